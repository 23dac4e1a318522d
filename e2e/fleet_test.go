package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/storage/pgtest"
)

// The lease settings of the fleet tests (the test setting): a
// dead worker's runs are taken over TTL + a scan after its last renewal,
// and its agents are stopped TTL − margin after it.
const (
	fleetTTL       = 15 * time.Second
	fleetHeartbeat = 2 * time.Second
	fleetMargin    = 5 * time.Second
	fleetScan      = 2 * time.Second // the scheduler's default claim scan
)

// fleet is three loopd workers over one throwaway PostgreSQL database,
// each with a LOOPD_HOME of its own, and runs in workspaces of their own
// (non-git) on this machine.
type fleet struct {
	t       *testing.T
	url     string
	workers []*env
	ids     []string          // worker ids, by index
	ws      map[string]string // run id → workspace
	lead    []time.Duration   // how long before its run's takeover each lost agent was dead
	user    *env              // a user with a clone (gitFleetRun)
	userEnv []string          // the user's LOOPD_URL and LOOPD_TOKEN
	config  []string          // more .loop/config lines for gitFleetRun
}

func newFleet(t *testing.T, n int) *fleet {
	t.Helper()
	url := pgtest.Database(t, "loopd_fleet_e2e", func(ctx context.Context, url string) error {
		return storage.MigratePostgres(ctx, url)
	})
	f := &fleet{t: t, url: url, ws: map[string]string{}}
	for i := range n {
		e := newEnv(t)
		// A race-built worker reports data races to files in its home,
		// which fail the test (its stderr is only shown on failure).
		e.daemonEnv = append(e.daemonEnv, "GORACE=atexit_sleep_ms=0 log_path="+filepath.Join(e.home, "race"))
		t.Cleanup(func() {
			reports, _ := filepath.Glob(filepath.Join(e.home, "race.*"))
			for _, r := range reports {
				b, _ := os.ReadFile(r)
				t.Errorf("worker %d: data race:\n%s", i, b)
			}
		})
		f.workers = append(f.workers, e)
		f.ids = append(f.ids, fmt.Sprintf("w%d", i))
	}
	return f
}

// start starts worker i, with extra flags.
func (f *fleet) start(i int, extra ...string) {
	f.t.Helper()
	f.workers[i].startDaemon(append([]string{"--store", f.url, "--worker-id", f.ids[i], "--lease-ttl", fleetTTL.String(),
		"--heartbeat", fleetHeartbeat.String(), "--fence-margin", fleetMargin.String(), "--max-concurrent-runs", "25"}, extra...)...)
}

// startRun creates a run through worker via's API in a new workspace
// whose scripted agent waits, in iteration 1, until the file go-1 exists,
// and completes in iteration 2.
func (f *fleet) startRun(via int) string {
	f.t.Helper()
	ws := filepath.Join(f.t.TempDir(), "ws")
	if err := os.MkdirAll(filepath.Join(ws, ".loop"), 0o755); err != nil {
		f.t.Fatal(err)
	}
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), mode); err != nil {
			f.t.Fatal(err)
		}
	}
	write(".loop/config", "agent=command\nagent_command="+scriptedAgent()+"\nmax_iterations=5\n", 0o644)
	write(".env", "FAKE_WAIT_FILE=go-%d\nFAKE_WAIT_ITERATION=1\nFAKE_DONE_AT=2\nFAKE_EARLY_USAGE=1\nFAKE_INPUT=1234\n", 0o600)
	e := f.workers[via]
	for _, args := range [][]string{{"trust"}, {"start", "goal"}} {
		r := e.loopctlAt(ws, nil, args...)
		if r.code != 0 {
			f.t.Fatalf("loopctl %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		if args[0] == "start" {
			id := strings.TrimSpace(r.stdout)
			f.ws[id] = ws
			return id
		}
	}
	return ""
}

// agents reads the pids of a run's agent invocations, in order.
func (f *fleet) agents(id string) []int {
	b, _ := os.ReadFile(filepath.Join(f.ws[id], ".agent-invocations"))
	var pids []int
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if fs := strings.Fields(l); len(fs) == 3 {
			if pid, err := strconv.Atoi(fs[2]); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// daemonInfo is `loopctl daemon status --json` of worker i.
func (f *fleet) daemonInfo(i int) api.DaemonInfo {
	f.t.Helper()
	var info api.DaemonInfo
	out := f.workers[i].must("daemon", "status", "--json")
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		f.t.Fatalf("daemon status json: %v\n%s", err, out)
	}
	return info
}

// watchDeaths polls pids every 10ms until each is gone, and sends when.
func watchDeaths(pids []int, stop <-chan struct{}) <-chan map[int]time.Time {
	out := make(chan map[int]time.Time, 1)
	go func() {
		dead := map[int]time.Time{}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for len(dead) < len(pids) {
			select {
			case <-stop:
				out <- dead
				return
			case now := <-t.C:
				for _, pid := range pids {
					if _, ok := dead[pid]; ok {
						continue
					}
					if err := syscall.Kill(pid, 0); err == syscall.ESRCH || zombie(pid) {
						dead[pid] = now
					}
				}
			}
		}
		out <- dead
	}()
	return out
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// recoveredAt is the time of run id's RUN_RECOVERED event taking it from
// worker from, or zero.
func recoveredAt(evs []api.Event, from string) (time.Time, string) {
	for _, ev := range evs {
		if ev.Type != "RUN_RECOVERED" {
			continue
		}
		var p struct {
			From string `json:"from_worker"`
			To   string `json:"to_worker"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		if p.From == from {
			return ev.TS.Time, p.To
		}
	}
	return time.Time{}, ""
}

// holdRuns starts n runs while only worker 0 runs, and waits until it
// executes them all (each one's agent started), then starts the others.
func (f *fleet) holdRuns(n int) []string {
	f.t.Helper()
	f.start(0)
	var ids []string
	for range n {
		ids = append(ids, f.startRun(0))
	}
	eventually(f.t, "worker 0 to run every run's agent", 60*time.Second, func() bool {
		for _, id := range ids {
			if len(f.agents(id)) == 0 {
				return false
			}
		}
		return true
	})
	// The heartbeat checkpoints the running steps' usage (their
	// transcripts show 1,234 input tokens before the agents wait).
	for _, id := range ids {
		eventually(f.t, "run "+id+"'s running step to show its usage so far", 4*fleetHeartbeat+5*time.Second, func() bool {
			steps := f.workers[0].steps(id)
			return len(steps) == 1 && steps[0].Status == api.StepRunning && steps[0].Usage.InputTokens == 1234
		})
	}
	if out := f.workers[0].must("daemon", "status"); !strings.Contains(out, fmt.Sprintf("worker  %s, holding %d run leases", f.ids[0], n)) {
		f.t.Errorf("daemon status of a worker:\n%s", out)
	}
	if got := f.daemonInfo(0); len(got.Leases) != n || got.Worker != f.ids[0] || !strings.HasPrefix(got.Store, "postgres://") {
		f.t.Fatalf("worker 0's status: store %q worker %q leases %v; want %d leases", got.Store, got.Worker, got.Leases, n)
	}
	for i := 1; i < len(f.workers); i++ {
		f.start(i)
	}
	return ids
}

// checkTakeover checks what every taken-over run must show, through
// worker via: RUN_RECOVERED from the lost worker within TTL + scan + 5s
// of lostAt, each of its agents dead before that, exactly one INTERRUPTED
// step (worker_lost:<lost>), and then the run completes (0 lost).
func (f *fleet) checkTakeover(ids []string, lost, via int, lostAt time.Time, dead map[int]time.Time, first map[string]int) []time.Duration {
	f.t.Helper()
	e := f.workers[via]
	var latencies []time.Duration
	for _, id := range ids {
		var at time.Time
		var to string
		eventually(f.t, "run "+id+" to be taken over", fleetTTL+fleetScan+30*time.Second, func() bool {
			at, to = recoveredAt(e.events(id), f.ids[lost])
			return !at.IsZero()
		})
		if to == f.ids[lost] || to == "" {
			f.t.Errorf("run %s recovered by %q, want another worker", id, to)
		}
		lat := at.Sub(lostAt)
		latencies = append(latencies, lat)
		if lat > fleetTTL+fleetScan+5*time.Second {
			f.t.Errorf("run %s taken over %s after the worker was lost, want ≤ TTL + scan + 5s", id, lat)
		}
		pid := first[id]
		if died, ok := dead[pid]; !ok {
			f.t.Errorf("run %s: the lost worker's agent (pid %d) was still alive at the takeover", id, pid)
		} else if lead := at.Sub(died); lead < 2*time.Second {
			f.t.Errorf("run %s: the lost worker's agent died at %s, %s before the takeover at %s; want ≥ 2s before",
				id, died.Format(time.StampMilli), lead, at.Format(time.StampMilli))
		} else {
			f.lead = append(f.lead, lead)
		}
	}
	for _, id := range ids {
		if err := os.WriteFile(filepath.Join(f.ws[id], "go-1"), nil, 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, id := range ids {
		eventually(f.t, "run "+id+" to complete on the surviving workers", 90*time.Second, func() bool {
			return e.status(id).Status == api.RunCompleted
		})
		interrupted := 0
		for _, st := range e.steps(id) {
			if st.Status == api.StepInterrupted {
				interrupted++
				if !strings.HasPrefix(st.Error, "worker_lost:"+f.ids[lost]+":") {
					f.t.Errorf("run %s: INTERRUPTED step %d has error %q, want worker_lost:%s", id, st.Seq, st.Error, f.ids[lost])
				}
			}
			if st.Status == api.StepFailed {
				f.t.Errorf("run %s: step %d FAILED (%s): losing a worker must never fail a phase", id, st.Seq, st.Error)
			}
		}
		if interrupted != 1 {
			f.t.Errorf("run %s: %d INTERRUPTED steps, want exactly 1", id, interrupted)
		}
		if r := e.status(id); r.Worker == f.ids[lost] || r.Worker == "" {
			f.t.Errorf("run %s: worker %q, want a surviving worker", id, r.Worker)
		}
	}
	if out := e.must("list", "--all-workspaces"); !strings.Contains(out, "WORKER") || strings.Contains(out, " "+f.ids[lost]+" ") {
		f.t.Errorf("loopctl list --all-workspaces names no worker, or still the lost one:\n%s", out)
	}
	f.checkInvariants()
	return latencies
}

// fleetRuns is how many runs the lost worker holds: 5, or
// LOOPD_FLEET_RUNS (the campaign uses 20).
func fleetRuns(t *testing.T) int {
	if v := os.Getenv("LOOPD_FLEET_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LOOPD_FLEET_RUNS=%q: want a number", v)
		}
		return n
	}
	return 5
}

// kill -9 of a worker holding runs: every run is leased by another worker
// within TTL + scan (+5s of slack), its phase runs again from one
// INTERRUPTED worker_lost step, none is lost, and the dead worker's
// agents — orphans nobody watches — were killed by their wrappers' guard
// before the takeover.
//
// LOOPD_FLEET_KILLS=K repeats it K times, each on a fresh fleet (the
// issue's campaign: K=10 with LOOPD_FLEET_RUNS=20), and logs the takeover
// latencies over all of them.
func TestFleetKill9WorkerRunsTakenOver(t *testing.T) {
	kills := 1
	if v := os.Getenv("LOOPD_FLEET_KILLS"); v != "" {
		var err error
		if kills, err = strconv.Atoi(v); err != nil || kills < 1 {
			t.Fatalf("LOOPD_FLEET_KILLS=%q: want a number", v)
		}
	}
	var all, leads []time.Duration
	for k := range kills {
		t.Run(fmt.Sprintf("kill%d", k+1), func(t *testing.T) {
			lat, lead := fleetKill9(t)
			all, leads = append(all, lat...), append(leads, lead...)
		})
	}
	slices.Sort(all)
	slices.Sort(leads)
	if len(all) > 0 && len(leads) > 0 {
		t.Logf("%d kills, %d runs taken over: latency min %s median %s max %s; lost agents dead before the takeover by min %s median %s",
			kills, len(all), all[0], all[len(all)/2], all[len(all)-1], leads[0], leads[len(leads)/2])
	}
}

func fleetKill9(t *testing.T) (latencies, leads []time.Duration) {
	f := newFleet(t, 3)
	n := fleetRuns(t)
	ids := f.holdRuns(n)
	first := map[string]int{}
	var pids []int
	for _, id := range ids {
		first[id] = f.agents(id)[0]
		pids = append(pids, first[id])
	}
	stop := make(chan struct{})
	deaths := watchDeaths(pids, stop)
	f.workers[0].killDaemon()
	killedAt := time.Now()
	eventually(t, "the first takeover", fleetTTL+fleetScan+30*time.Second, func() bool {
		at, _ := recoveredAt(f.workers[1].events(ids[0]), f.ids[0])
		return !at.IsZero()
	})
	close(stop)
	dead := <-deaths
	lat := f.checkTakeover(ids, 0, 1, killedAt, dead, first)
	t.Logf("kill -9 of a worker holding %d runs: taken over after %v; its agents dead %v before (TTL %s, heartbeat %s, margin %s)",
		n, lat, f.lead, fleetTTL, fleetHeartbeat, fleetMargin)
	return lat, f.lead
}

// A worker frozen (SIGSTOP) for 2 × TTL: its agents are killed by their
// wrappers' guard before its runs are taken over, and once it is resumed
// not one of its writes is accepted — its runs show only the takeover's
// INTERRUPTED step, and it holds no lease any more.
func TestFleetFrozenWorkerIsFencedOut(t *testing.T) {
	f := newFleet(t, 3)
	n := 3
	ids := f.holdRuns(n)
	first := map[string]int{}
	var pids []int
	for _, id := range ids {
		first[id] = f.agents(id)[0]
		pids = append(pids, first[id])
	}
	stop := make(chan struct{})
	deaths := watchDeaths(pids, stop)
	victim := f.workers[0].daemon.Process
	if err := victim.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = victim.Signal(syscall.SIGCONT)
		}
	}()
	eventually(t, "the first takeover", fleetTTL+fleetScan+30*time.Second, func() bool {
		at, _ := recoveredAt(f.workers[1].events(ids[0]), f.ids[0])
		return !at.IsZero()
	})
	close(stop)
	dead := <-deaths
	// Frozen for 2 × TTL in all, then resumed: it must learn it lost
	// everything, and write nothing.
	time.Sleep(time.Until(frozenAt.Add(2 * fleetTTL)))
	if err := victim.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	eventually(t, "the resumed worker to drop its lost leases", 30*time.Second, func() bool {
		return len(f.daemonInfo(0).Leases) == 0
	})
	lat := f.checkTakeover(ids, 0, 1, frozenAt, dead, first)
	t.Logf("SIGSTOP of a worker holding %d runs for 2 × TTL: taken over after %v; its agents dead %v before", n, lat, f.lead)
	if log := f.workers[0].daemonLog(); !strings.Contains(log, "lease lost") && !strings.Contains(log, "fenced out") {
		t.Errorf("the resumed worker's log says nothing of its lost leases:\n%s", log)
	}
}

// SIGTERM drains a worker: its running steps finish and are recorded by
// it, its leases are released, and another worker continues each run at
// its next step at once — nothing INTERRUPTED, no TTL to wait.
func TestFleetSIGTERMDrainsAndHandsOver(t *testing.T) {
	f := newFleet(t, 2)
	ids := f.holdRuns(2)
	_ = f.workers[0].daemon.Process.Signal(syscall.SIGTERM)
	eventually(t, "the worker to start draining", 20*time.Second, func() bool {
		return strings.Contains(f.workers[0].daemonLog(), "draining")
	})
	for _, id := range ids {
		if err := os.WriteFile(filepath.Join(f.ws[id], "go-1"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-f.workers[0].exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the draining worker did not exit within 30s of its steps' end")
	}
	releasedAt := time.Now()
	if log := f.workers[0].daemonLog(); !strings.Contains(log, "drained: leases released") {
		t.Fatalf("the worker exited without releasing its leases:\n%s", log)
	}
	b := f.workers[1]
	for _, id := range ids {
		eventually(t, "run "+id+" to complete on the other worker", 60*time.Second, func() bool {
			return b.status(id).Status == api.RunCompleted
		})
		at, to := recoveredAt(b.events(id), f.ids[0])
		if at.IsZero() || to != f.ids[1] {
			t.Errorf("run %s: no RUN_RECOVERED from %s to %s", id, f.ids[0], f.ids[1])
		} else if lat := at.Sub(releasedAt); lat > fleetScan+3*time.Second {
			t.Errorf("run %s: handed over %s after the drain, want within a scan (not a TTL)", id, lat)
		}
		steps := b.steps(id)
		for _, st := range steps {
			if st.Status != api.StepSucceeded {
				t.Errorf("run %s: step %d is %s (%s); a drain interrupts nothing", id, st.Seq, st.Status, st.Error)
			}
		}
		if len(f.agents(id)) != 2 {
			t.Errorf("run %s: %d agent invocations, want 2 (iteration 1 on the drained worker, 2 on the other)", id, len(f.agents(id)))
		}
	}
	f.checkInvariants()
}

// A worker killed and restarted within its lease (the same --worker-id and
// LOOPD_HOME) takes its runs back and adopts their running agents, as the
// embedded daemon does: nothing is interrupted or run twice.
func TestFleetRestartedWorkerReadoptsItsLeases(t *testing.T) {
	f := newFleet(t, 1)
	f.start(0)
	ids := []string{f.startRun(0), f.startRun(0)}
	eventually(t, "both agents to run", 60*time.Second, func() bool {
		return len(f.agents(ids[0])) == 1 && len(f.agents(ids[1])) == 1
	})
	f.workers[0].killDaemon()
	f.start(0)
	for _, id := range ids {
		eventually(t, "run "+id+"'s step to be adopted", 20*time.Second, func() bool {
			return countType(f.workers[0].events(id), "STEP_ADOPTED") == 1
		})
		if err := os.WriteFile(filepath.Join(f.ws[id], "go-1"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		eventually(t, "run "+id+" to complete", 60*time.Second, func() bool {
			return f.workers[0].status(id).Status == api.RunCompleted
		})
		for _, st := range f.workers[0].steps(id) {
			if st.Status != api.StepSucceeded {
				t.Errorf("run %s: step %d is %s (%s), want every step SUCCEEDED", id, st.Seq, st.Status, st.Error)
			}
		}
		if n := len(f.agents(id)); n != 2 {
			t.Errorf("run %s: %d agent invocations, want 2 (the adopted one ran once)", id, n)
		}
	}
}

// The fleet flags are refused without --store, and unsafe lease settings
// are refused, before anything is written.
func TestFleetFlagsAreChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--lease-ttl", "10s"}, "--lease-ttl need --store"},
		{[]string{"--store", "postgres://x@127.0.0.1:1/db", "--fence-margin", "30s"}, "--fence-margin must be"},
		{[]string{"--store", "postgres://x@127.0.0.1:1/db", "--lease-ttl", "15s", "--heartbeat", "6s"}, "--heartbeat must be"},
	} {
		e := newEnv(t)
		cmd := exec.Command(filepath.Join(binDir, "loopd"), c.args...)
		cmd.Env = e.environ()
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 64 || !strings.Contains(string(out), c.want) {
			t.Errorf("loopd %v = %v\n%s; want exit 64 saying %q", c.args, err, out, c.want)
		}
		if _, err := os.Stat(filepath.Join(e.home, "loopd.db")); err == nil {
			t.Errorf("loopd %v created a database", c.args)
		}
	}
}

// postgresPids are the throwaway cluster's server processes: the
// postmaster (data/postmaster.pid in the directory the URL's host names)
// and its children.
func (f *fleet) postgresPids() []int {
	f.t.Helper()
	u, err := neturl.Parse(f.url)
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(u.Query().Get("host"), "data", "postmaster.pid"))
	if err != nil {
		f.t.Fatal(err)
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		f.t.Fatal(err)
	}
	pids := []int{pm}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		st, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(st)
		fs := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fs) > 1 && fs[1] == strconv.Itoa(pm) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// pausePostgres freezes every server process for d (as a stalled
// database, or a failover, looks to the workers), then resumes them.
func (f *fleet) pausePostgres(d time.Duration) {
	f.t.Helper()
	pids := f.postgresPids()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	defer func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	// The pause is the experiment's duration, not a wait for something.
	time.Sleep(d)
}

// A database outage shorter than TTL − margin − 2 heartbeats interrupts
// nothing; one longer than the lease makes the worker stop its agents by
// itself (its watchdog makes no database call), and once the database is
// back the steps are INTERRUPTED self_fenced — not failed — and their
// phase runs again within seconds, with nothing lost.
func TestFleetDatabasePause(t *testing.T) {
	f := newFleet(t, 1)
	f.start(0)
	ids := []string{f.startRun(0), f.startRun(0)}
	eventually(t, "both agents to run", 60*time.Second, func() bool {
		return len(f.agents(ids[0])) == 1 && len(f.agents(ids[1])) == 1
	})
	short := fleetTTL - fleetMargin - 2*fleetHeartbeat - time.Second
	f.pausePostgres(short)
	// The worker answers again once the database does (its API reads it),
	// and still holds both runs.
	eventually(t, "the worker to answer after the short pause", 10*time.Second, func() bool {
		return len(f.daemonInfo(0).Leases) == 2
	})
	for _, id := range ids {
		pid := f.agents(id)[0]
		if syscall.Kill(pid, 0) != nil || zombie(pid) {
			t.Errorf("run %s: its agent died in a %s database pause", id, short)
		}
		if n := countType(f.workers[0].events(id), "STEP_INTERRUPTED"); n != 0 {
			t.Errorf("run %s: %d steps interrupted by a %s database pause, want 0", id, n, short)
		}
	}
	if strings.Contains(f.workers[0].daemonLog(), "no lease renewal succeeded") {
		t.Errorf("the worker fenced itself in a %s pause", short)
	}

	long := fleetTTL * 6 / 5
	first := map[string]int{ids[0]: f.agents(ids[0])[0], ids[1]: f.agents(ids[1])[0]}
	stop := make(chan struct{})
	deaths := watchDeaths([]int{first[ids[0]], first[ids[1]]}, stop)
	pausedAt := time.Now()
	f.pausePostgres(long)
	backAt := time.Now()
	close(stop)
	dead := <-deaths
	for _, id := range ids {
		died, ok := dead[first[id]]
		if !ok {
			t.Errorf("run %s: its agent was still running after a %s database pause (lease %s)", id, long, fleetTTL)
		} else if lim := fleetTTL - fleetMargin + 2*time.Second; died.Sub(pausedAt) > lim {
			t.Errorf("run %s: its agent stopped %s into the pause, want ≤ %s", id, died.Sub(pausedAt), lim)
		}
	}
	var recovery []time.Duration
	for _, id := range ids {
		eventually(t, "run "+id+"'s phase to run again", 30*time.Second, func() bool { return len(f.agents(id)) == 2 })
		recovery = append(recovery, time.Since(backAt))
		steps := f.workers[0].steps(id)
		if len(steps) != 2 || steps[0].Status != api.StepInterrupted || !strings.HasPrefix(steps[0].Error, "self_fenced:") {
			t.Fatalf("run %s: steps %+v, want the first INTERRUPTED self_fenced and the phase running again", id, steps)
		}
		if err := os.WriteFile(filepath.Join(f.ws[id], "go-1"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		eventually(t, "run "+id+" to complete", 60*time.Second, func() bool { return f.workers[0].status(id).Status == api.RunCompleted })
	}
	t.Logf("database paused %s: nothing interrupted; paused %s: agents stopped, phase running again %v after it returned", short, long, recovery)
	f.checkInvariants()
}

// pgProxy is a loopback TCP proxy to the cluster's Unix socket that can
// stall every connection (a network partition: nothing is refused or
// reset, bytes just stop) and heal.
type pgProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	holed  bool
}

func (f *fleet) newProxy() *pgProxy {
	f.t.Helper()
	u, err := neturl.Parse(f.url)
	if err != nil {
		f.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: filepath.Join(u.Query().Get("host"), ".s.PGSQL.5432")}
	p.cond = sync.NewCond(&p.mu)
	f.t.Cleanup(func() { ln.Close(); p.heal() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

// url is the store URL of f's database through the proxy.
func (p *pgProxy) url(f *fleet) string {
	u, _ := neturl.Parse(f.url)
	return "postgres://postgres@" + p.ln.Addr().String() + u.Path + "?sslmode=disable"
}

func (p *pgProxy) serve(c net.Conn) {
	defer c.Close()
	p.wait()
	s, err := net.Dial("unix", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	pump := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.wait() // held while the network is cut
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go pump(s, c)
	go pump(c, s)
	<-done
}

func (p *pgProxy) wait() {
	p.mu.Lock()
	for p.holed {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

func (p *pgProxy) cut() { p.mu.Lock(); p.holed = true; p.mu.Unlock() }

func (p *pgProxy) heal() { p.mu.Lock(); p.holed = false; p.cond.Broadcast(); p.mu.Unlock() }

// A worker cut off from the database for 2 × TTL (its connections stall,
// nothing is refused): it stops its agents by itself ≥ 2 s before any
// other worker may take its runs, the others take them over, and once the
// network heals not one of its writes is accepted.
func TestFleetPartitionedWorkerStopsItsAgents(t *testing.T) {
	f := newFleet(t, 3)
	proxy := f.newProxy()
	direct := f.url
	f.url = proxy.url(f) // worker 0 reaches the database through the proxy
	f.start(0)
	f.url = direct
	var ids []string
	for range 3 {
		ids = append(ids, f.startRun(0))
	}
	eventually(t, "worker 0 to run every run's agent", 60*time.Second, func() bool {
		for _, id := range ids {
			if len(f.agents(id)) == 0 {
				return false
			}
		}
		return true
	})
	f.start(1)
	f.start(2)
	first := map[string]int{}
	var pids []int
	for _, id := range ids {
		first[id] = f.agents(id)[0]
		pids = append(pids, first[id])
	}
	stop := make(chan struct{})
	deaths := watchDeaths(pids, stop)
	proxy.cut()
	cutAt := time.Now()
	eventually(t, "the first takeover", fleetTTL+fleetScan+30*time.Second, func() bool {
		at, _ := recoveredAt(f.workers[1].events(ids[0]), f.ids[0])
		return !at.IsZero()
	})
	close(stop)
	dead := <-deaths
	time.Sleep(time.Until(cutAt.Add(2 * fleetTTL))) // the partition's length, not a wait for something
	proxy.heal()
	eventually(t, "the healed worker to drop its lost leases", 30*time.Second, func() bool {
		return len(f.daemonInfo(0).Leases) == 0
	})
	lat := f.checkTakeover(ids, 0, 1, cutAt, dead, first)
	t.Logf("worker partitioned 2 × TTL: taken over after %v; its agents dead %v before", lat, f.lead)
	if log := f.workers[0].daemonLog(); !strings.Contains(log, "no lease renewal succeeded in time") {
		t.Errorf("the partitioned worker's watchdog never fired:\n%s", log)
	}
}

// An API-only node (--worker=false) creates and serves runs but never
// claims one: a worker started after it runs the run.
func TestFleetAPIOnlyNodeClaimsNothing(t *testing.T) {
	f := newFleet(t, 2)
	f.workers[0].startDaemon("--store", f.url, "--worker=false")
	id := f.startRun(0)
	if info := f.daemonInfo(0); info.Worker != "" || len(info.Leases) != 0 || info.Store == "" {
		t.Fatalf("API node's status: store %q worker %q leases %v; want a store and no worker", info.Store, info.Worker, info.Leases)
	}
	if out := f.workers[0].must("daemon", "status"); !strings.Contains(out, "worker  none: an API-only node") || !strings.Contains(out, "store   postgres://") {
		t.Errorf("daemon status of an API node:\n%s", out)
	}
	f.start(1)
	eventually(t, "the worker to run the run's agent", 30*time.Second, func() bool { return len(f.agents(id)) == 1 })
	if r := f.workers[0].status(id); r.Status != api.RunRunning || r.Worker != f.ids[1] {
		t.Fatalf("run %s is %s on worker %q (read through the API node), want RUNNING on %s", id, r.Status, r.Worker, f.ids[1])
	}
}

// checkInvariants checks, in the database, what must hold whatever
// happened to the fleet: no run with two RUNNING steps; every INTERRUPTED
// step says why; events numbered without a gap (max(seq) = count); and a
// run's epoch equals its claims (RUN_STARTED and RUN_RESUMED naming a
// worker, RUN_RECOVERED naming the worker it came from) — so no write
// took a lease without a claim.
func (f *fleet) checkInvariants() {
	f.t.Helper()
	db, err := sql.Open("pgx", f.url)
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	ctx := f.t.Context()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT run_id FROM steps WHERE status = 'RUNNING'
		GROUP BY run_id HAVING count(*) > 1) x`).Scan(&n); err != nil || n != 0 {
		f.t.Errorf("runs with two RUNNING steps: %d (%v)", n, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM steps WHERE status = 'INTERRUPTED' AND error = ''`).Scan(&n); err != nil || n != 0 {
		f.t.Errorf("INTERRUPTED steps without a reason: %d (%v)", n, err)
	}
	var maxSeq, count int64
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(max(seq), 0), count(*) FROM events`).Scan(&maxSeq, &count); err != nil || maxSeq != count {
		f.t.Errorf("events: max(seq) %d, count %d (%v): a gap", maxSeq, count, err)
	}
	rows, err := db.QueryContext(ctx, `SELECT r.id, r.lease_epoch, (SELECT count(*) FROM events e WHERE e.run_id = r.id AND (
			(e.type IN ('RUN_STARTED', 'RUN_RESUMED') AND e.payload::jsonb ? 'worker')
			OR (e.type = 'RUN_RECOVERED' AND e.payload::jsonb ? 'to_worker'))) FROM runs r`)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	checked := 0
	for rows.Next() {
		checked++
		var id string
		var epoch, claims int64
		if err := rows.Scan(&id, &epoch, &claims); err != nil {
			f.t.Fatal(err)
		}
		if epoch != claims {
			f.t.Errorf("run %s: lease epoch %d, but %d claims recorded", id, epoch, claims)
		}
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	if checked == 0 || count == 0 {
		f.t.Errorf("invariants checked over %d runs and %d events: the database is not the fleet's", checked, count)
	}
}

// `loopd migrate --store URL` brings an empty database to the schema and
// says so; a database it cannot reach fails with the reason and no password.
func TestFleetMigrateCommand(t *testing.T) {
	url := pgtest.Database(t, "loopd_empty_e2e", func(context.Context, string) error { return nil })
	e := newEnv(t)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(filepath.Join(binDir, "loopd"), args...)
		cmd.Env = e.environ()
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, code := run("migrate", "--store", url)
	if code != 0 || !strings.Contains(out, "is at schema version "+strconv.Itoa(storage.PostgresSchemaVersion())) {
		t.Fatalf("loopd migrate = exit %d:\n%s", code, out)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != storage.PostgresSchemaVersion() {
		t.Fatalf("schema_migrations has %d rows (%v), want %d", n, err, storage.PostgresSchemaVersion())
	}
	out, code = run("migrate", "--store", "postgres://loopd:s3cret@127.0.0.1:1/db?connect_timeout=2", "--timeout", "10s")
	if code != 1 || strings.Contains(out, "s3cret") || !strings.Contains(out, "loopd migrate:") {
		t.Fatalf("loopd migrate of an unreachable database = exit %d:\n%s\nwant exit 1 naming the problem, without the password", code, out)
	}
	if out, code = run("migrate"); code != 64 || !strings.Contains(out, "--store") {
		t.Fatalf("loopd migrate without --store = exit %d:\n%s", code, out)
	}
}

// A draining worker whose step does not finish within --drain-timeout
// stops it (CANCELED, cause daemon_stop: not a failure of its phase),
// releases the lease, and another worker runs the phase again at once.
func TestFleetDrainTimeoutStopsTheStep(t *testing.T) {
	f := newFleet(t, 2)
	f.start(0, "--drain-timeout", "2s")
	id := f.startRun(0)
	eventually(t, "the agent to run", 30*time.Second, func() bool { return len(f.agents(id)) == 1 })
	f.start(1)
	_ = f.workers[0].daemon.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.workers[0].exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the draining worker did not exit within 20s with a 2s drain timeout")
	}
	if log := f.workers[0].daemonLog(); !strings.Contains(log, "drain timeout") || !strings.Contains(log, "drained: leases released") {
		t.Fatalf("the worker did not stop its step at the drain timeout and release its lease:\n%s", log)
	}
	b := f.workers[1]
	eventually(t, "the other worker to run the phase again", 20*time.Second, func() bool { return len(f.agents(id)) == 2 })
	if err := os.WriteFile(filepath.Join(f.ws[id], "go-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to complete", 60*time.Second, func() bool { return b.status(id).Status == api.RunCompleted })
	steps := b.steps(id)
	if steps[0].Status != api.StepCanceled || !strings.Contains(steps[0].Error, "stopped with the daemon") {
		t.Errorf("the drained step is %s (%s), want CANCELED stopped with the daemon", steps[0].Status, steps[0].Error)
	}
	for _, st := range steps[1:] {
		if st.Status != api.StepSucceeded {
			t.Errorf("step %d is %s (%s), want SUCCEEDED", st.Seq, st.Status, st.Error)
		}
	}
	if at, to := recoveredAt(b.events(id), f.ids[0]); at.IsZero() || to != f.ids[1] {
		t.Errorf("no RUN_RECOVERED from %s to %s", f.ids[0], f.ids[1])
	}
	f.checkInvariants()
}

// LOOPD_FLEET_CHAOS=N runs N random faults — kill -9 and restart, or a
// SIGSTOP of 3 s to 2 × TTL — on three workers running 10 runs whose
// agents work 2 s per step for 4 + 3N iterations, then checks that every run
// completed without a FAILED step, and the fleet's invariants. Off by
// default: it takes minutes.
func TestFleetChaos(t *testing.T) {
	v := os.Getenv("LOOPD_FLEET_CHAOS")
	if v == "" {
		t.Skip("LOOPD_FLEET_CHAOS=N runs N random faults on a fleet (minutes)")
	}
	faults, err := strconv.Atoi(v)
	if err != nil || faults < 1 {
		t.Fatalf("LOOPD_FLEET_CHAOS=%q: want a number", v)
	}
	f := newFleet(t, 3)
	for i := range f.workers {
		f.start(i)
	}
	var ids []string
	for i := range 10 {
		ws := filepath.Join(t.TempDir(), "ws")
		if err := os.MkdirAll(filepath.Join(ws, ".loop"), 0o755); err != nil {
			t.Fatal(err)
		}
		// Long enough to outlast the faults: about 5 s of faults per
		// iteration of 2 s.
		done := 4 + 3*faults
		_ = os.WriteFile(filepath.Join(ws, ".loop/config"), []byte(fmt.Sprintf("agent=command\nagent_command=%s\nmax_iterations=%d\n",
			scriptedAgent(), done+10)), 0o644)
		_ = os.WriteFile(filepath.Join(ws, ".env"), []byte(fmt.Sprintf("FAKE_SLEEP=2\nFAKE_DONE_AT=%d\n", done)), 0o600)
		e := f.workers[i%3]
		for _, args := range [][]string{{"trust"}, {"start", "goal"}} {
			r := e.loopctlAt(ws, nil, args...)
			if r.code != 0 {
				t.Fatalf("loopctl %v: %s%s", args, r.stdout, r.stderr)
			}
			if args[0] == "start" {
				id := strings.TrimSpace(r.stdout)
				ids = append(ids, id)
				f.ws[id] = ws
			}
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for k := range faults {
		w := rng.IntN(3)
		e := f.workers[w]
		if rng.IntN(2) == 0 {
			t.Logf("fault %d: kill -9 worker %d, then restart it", k+1, w)
			e.killDaemon()
			f.start(w)
		} else {
			d := 3*time.Second + time.Duration(rng.Int64N(int64(2*fleetTTL-3*time.Second)))
			t.Logf("fault %d: SIGSTOP worker %d for %s", k+1, w, d.Round(time.Millisecond))
			_ = e.daemon.Process.Signal(syscall.SIGSTOP)
			time.Sleep(d) // the fault's length
			_ = e.daemon.Process.Signal(syscall.SIGCONT)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Second)))) // the time between faults
	}
	for _, id := range ids {
		eventually(t, "run "+id+" to complete", time.Duration(5+faults)*time.Minute, func() bool {
			return f.workers[0].status(id).Status == api.RunCompleted
		})
		interrupted := 0
		for _, st := range f.workers[0].steps(id) {
			if st.Status == api.StepFailed {
				t.Errorf("run %s: step %d FAILED (%s)", id, st.Seq, st.Error)
			}
			if st.Status == api.StepInterrupted {
				interrupted++
			}
		}
		t.Logf("run %s: %d steps interrupted", id, interrupted)
	}
	f.checkInvariants()
}
