package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
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
	urls    []string          // per worker, its own store URL when set (a proxy's)
	config  []string          // more .loop/config lines for gitFleetRun
	files   map[string]string // more files of the clone for gitFleetRun, by path
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
	url := f.url
	if i < len(f.urls) && f.urls[i] != "" {
		url = f.urls[i]
	}
	f.workers[i].startDaemon(append([]string{"--store", url, "--worker-id", f.ids[i], "--lease-ttl", fleetTTL.String(),
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

// TestFleetChaos is the fleet's chaos campaign: random faults on three
// workers running runs whose agents work 3 s per step, while an invariant
// checker samples the database and the machine's processes, then checks
// the history once every run has completed.
//
// Faults are kill -9 (the worker restarted after its downtime), SIGSTOP
// (then SIGCONT) and a partition (the loopback proxy between the worker and
// the database stalls every byte, then heals). Each worker has one fault
// at a time; faults on different workers overlap. A fault lasts 0.5–6 s
// (below the watchdog: nothing is interrupted) half of the time, 6 s–TTL
// (the worker stops its own agents, no takeover) a fifth, TTL–2 × TTL (its
// runs are taken over) the rest.
//
// What must hold:
//   - sampled every 500 ms: no run with two RUNNING steps; no run with two
//     live agents (by the pids the agents log, whichever worker ran them);
//     events numbered without a gap (max(seq) = count); no lease of a
//     killed, frozen or cut-off worker renewed after its fault began; no
//     lease renewed for a run its worker does not execute (no live agent of
//     that worker for that run within a grace of 12 s, the time between
//     steps and after a worker comes back);
//   - afterwards: every run COMPLETED, no step FAILED, no two steps of a run
//     overlapping in time, every step and event row written by the worker
//     holding the run's lease at that moment (an audit trigger records the
//     writing session's worker — its application_name — the run's lease
//     owner and epoch at each write, and the leases the writing
//     transaction was fenced under, storage.FencedSetting: a stale
//     worker's write would show another owner; a write by the same worker
//     id under an older epoch — a runner of a lease its worker lost and
//     then claimed again — names that older epoch; and a step row the
//     owner writes while its run is RUNNING names the run's current epoch,
//     or it was written unfenced), and checkInvariants.
//
// By default (CI) 20 faults on 10 runs, about 2–3 minutes.
// LOOPD_FLEET_CHAOS=N runs N faults on LOOPD_FLEET_CHAOS_RUNS runs (default
// 30): the campaign is N=200. LOOPD_FLEET_CHAOS_SEED replays a
// campaign's random choices (the seed is logged).
func TestFleetChaos(t *testing.T) {
	faults, runs := 20, 10
	if v := os.Getenv("LOOPD_FLEET_CHAOS"); v != "" {
		var err error
		if faults, err = strconv.Atoi(v); err != nil || faults < 1 {
			t.Fatalf("LOOPD_FLEET_CHAOS=%q: want a number", v)
		}
		runs = 30
	}
	if v := os.Getenv("LOOPD_FLEET_CHAOS_RUNS"); v != "" {
		var err error
		if runs, err = strconv.Atoi(v); err != nil || runs < 1 {
			t.Fatalf("LOOPD_FLEET_CHAOS_RUNS=%q: want a number", v)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("LOOPD_FLEET_CHAOS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("LOOPD_FLEET_CHAOS_SEED=%q: want a number", v)
		}
	}
	t.Logf("chaos: %d faults on %d runs, seed %d (LOOPD_FLEET_CHAOS_SEED replays it)", faults, runs, seed)
	began := time.Now()
	c := newFleetChaos(t, runs)
	c.campaign(faults, seed)
	c.finish()
	t.Logf("chaos: whole test %s", time.Since(began).Round(time.Second))
}

// chaosKind is a kind of fault.
type chaosKind string

const (
	chaosKill      chaosKind = "kill -9"   // killed, restarted after the fault's length
	chaosStop      chaosKind = "SIGSTOP"   // frozen, then SIGCONT
	chaosPartition chaosKind = "partition" // its database connections stall, then heal
)

// fleetChaos is a fleet under a fault campaign, with its invariant checker.
type fleetChaos struct {
	t       *testing.T
	f       *fleet
	db      *sql.DB
	proxies []*pgProxy
	ids     []string // the runs

	mu         sync.Mutex
	down       []time.Time // per worker: since when it can renew nothing (zero while up)
	upAt       []time.Time // per worker: when it last came back
	violations map[string][]string
	samples    int
	faults     map[chaosKind][3]int // per kind: short, medium, long
	faultTime  map[chaosKind]time.Duration

	// The sampler's own state (one goroutine).
	leases    map[string]chaosLease
	lastAgent map[string]map[int]time.Time // run → worker → last seen with a live agent
	epochSeen map[string]time.Time         // run/epoch → first sampled
	maxLive   int                          // most live agents of one run seen at once
	downSeen  int                          // leases of down workers checked
	renewals  int                          // renewals by workers that are up checked

	campaignTime time.Duration
}

type chaosLease struct {
	owner   string
	epoch   int64
	expires int64
}

// chaosGrace is how long a worker may renew a run's lease with no live
// agent of it: between steps, and after it comes back from a fault (the
// phase starts again).
const chaosGrace = 12 * time.Second

func newFleetChaos(t *testing.T, runs int) *fleetChaos {
	f := newFleet(t, 3)
	db, err := sql.Open("pgx", f.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// The audit trigger: every step row written or changed, and every
	// event, with the writing session's worker, the run's lease and status
	// at that moment (the writer's own transaction sees its own claim),
	// and the leases the writing transaction names as those it is fenced
	// under (" run@epoch" each, storage.FencedSetting; "" unfenced).
	for _, q := range []string{
		`CREATE TABLE chaos_writes (id BIGSERIAL PRIMARY KEY, tbl TEXT, run_id TEXT, writer TEXT, owner TEXT,
			epoch BIGINT, status TEXT, fenced TEXT, what TEXT, at TIMESTAMPTZ DEFAULT clock_timestamp())`,
		`CREATE FUNCTION chaos_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO chaos_writes (tbl, run_id, writer, owner, epoch, status, fenced, what)
			SELECT TG_TABLE_NAME, NEW.run_id, current_setting('application_name'), r.lease_owner, r.lease_epoch, r.status,
				COALESCE(current_setting('` + storage.FencedSetting + `', true), ''),
				COALESCE(to_jsonb(NEW)->>'type', (to_jsonb(NEW)->>'seq') || ' ' || (to_jsonb(NEW)->>'status'))
			FROM runs r WHERE r.id = NEW.run_id;
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER chaos_steps AFTER INSERT OR UPDATE ON steps FOR EACH ROW EXECUTE FUNCTION chaos_audit()`,
		`CREATE TRIGGER chaos_events AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION chaos_audit()`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("install the audit trigger: %v\n%s", err, q)
		}
	}
	c := &fleetChaos{t: t, f: f, db: db, down: make([]time.Time, 3), upAt: make([]time.Time, 3),
		violations: map[string][]string{}, faults: map[chaosKind][3]int{}, faultTime: map[chaosKind]time.Duration{},
		leases: map[string]chaosLease{}, lastAgent: map[string]map[int]time.Time{}, epochSeen: map[string]time.Time{}}
	// Every worker reaches the database through a proxy of its own (to be
	// cut off alone), and names itself to the server (the audit's writer).
	f.urls = make([]string, 3)
	for i := range 3 {
		p := f.newProxy()
		c.proxies = append(c.proxies, p)
		f.urls[i] = p.url(f) + "&application_name=" + f.ids[i]
		f.start(i, "--max-concurrent-runs", strconv.Itoa(runs))
		c.upAt[i] = time.Now()
	}
	for i := range runs {
		ws := filepath.Join(t.TempDir(), "ws")
		if err := os.MkdirAll(filepath.Join(ws, ".loop"), 0o755); err != nil {
			t.Fatal(err)
		}
		// The run goes on until the campaign is over (the file finish).
		_ = os.WriteFile(filepath.Join(ws, ".loop/config"), []byte("agent=command\nagent_command="+scriptedAgent()+"\nmax_iterations=5000\n"), 0o644)
		_ = os.WriteFile(filepath.Join(ws, ".env"), []byte("FAKE_SLEEP=3\nFAKE_DONE_FILE=finish\n"), 0o600)
		e := f.workers[i%3]
		for _, args := range [][]string{{"trust"}, {"start", "goal"}} {
			r := e.loopctlAt(ws, nil, args...)
			if r.code != 0 {
				t.Fatalf("loopctl %v: %s%s", args, r.stdout, r.stderr)
			}
			if args[0] == "start" {
				id := strings.TrimSpace(r.stdout)
				c.ids = append(c.ids, id)
				f.ws[id] = ws
			}
		}
	}
	eventually(t, "every run's agent to run", 60*time.Second, func() bool {
		for _, id := range c.ids {
			if len(f.agents(id)) == 0 {
				return false
			}
		}
		return true
	})
	return c
}

// violate records a broken invariant (the first ones of each kind are
// reported).
func (c *fleetChaos) violate(kind, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violations[kind] = append(c.violations[kind], time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

// campaign runs the faults: one loop per worker, each taking the next
// fault until there are none left.
func (c *fleetChaos) campaign(faults int, seed uint64) {
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				c.sample()
			}
		}
	}()
	began := time.Now()
	var left sync.Mutex
	remaining := faults
	var wg sync.WaitGroup
	for w := range 3 {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			time.Sleep(time.Duration(rng.Int64N(int64(2 * time.Second)))) // not all at once
			for {
				left.Lock()
				if remaining == 0 {
					left.Unlock()
					return
				}
				remaining--
				k := faults - remaining
				left.Unlock()
				c.fault(k, w, rng)
				time.Sleep(time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))) // the time between faults
			}
		})
	}
	wg.Wait()
	c.t.Logf("chaos: %d faults in %s", faults, time.Since(began).Round(time.Second))
	c.campaignTime = time.Since(began)
	// The runs end: each finishes at its next step.
	for _, id := range c.ids {
		if err := os.WriteFile(filepath.Join(c.f.ws[id], "finish"), nil, 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	for _, id := range c.ids {
		eventually(c.t, "run "+id+" to complete", 3*time.Minute, func() bool {
			return c.f.workers[0].status(id).Status == api.RunCompleted
		})
	}
	close(stop)
	<-sampled
}

// fault runs fault k on worker w, for a random length.
func (c *fleetChaos) fault(k, w int, rng *rand.Rand) {
	kind := []chaosKind{chaosKill, chaosStop, chaosPartition}[rng.IntN(3)]
	var d time.Duration
	bucket := 0
	switch p := rng.IntN(10); {
	case p < 5:
		d = 500*time.Millisecond + time.Duration(rng.Int64N(int64(5500*time.Millisecond)))
	case p < 7:
		bucket, d = 1, 6*time.Second+time.Duration(rng.Int64N(int64(fleetTTL-6*time.Second)))
	default:
		bucket, d = 2, fleetTTL+time.Duration(rng.Int64N(int64(fleetTTL)))
	}
	c.t.Logf("fault %d: %s worker %d for %s", k, kind, w, d.Round(time.Millisecond))
	e := c.f.workers[w]
	setDown := func(down bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if down {
			c.down[w] = time.Now()
		} else {
			c.down[w], c.upAt[w] = time.Time{}, time.Now()
		}
	}
	switch kind {
	case chaosKill:
		_ = e.daemon.Process.Signal(syscall.SIGKILL)
		setDown(true)
		<-e.exited
		time.Sleep(d) // the fault's length
		setDown(false)
		c.f.start(w, "--max-concurrent-runs", strconv.Itoa(len(c.ids)))
	case chaosStop:
		_ = e.daemon.Process.Signal(syscall.SIGSTOP)
		setDown(true)
		time.Sleep(d) // the fault's length
		setDown(false)
		_ = e.daemon.Process.Signal(syscall.SIGCONT)
	case chaosPartition:
		c.proxies[w].cut()
		setDown(true)
		time.Sleep(d) // the fault's length
		setDown(false)
		c.proxies[w].heal()
	}
	c.mu.Lock()
	n := c.faults[kind]
	n[bucket]++
	c.faults[kind] = n
	c.faultTime[kind] += d
	c.mu.Unlock()
}

// sample checks what must hold at every moment.
func (c *fleetChaos) sample() {
	ctx := c.t.Context()
	now := time.Now()
	c.mu.Lock()
	c.samples++
	c.mu.Unlock()
	rows, err := c.db.QueryContext(ctx, `SELECT run_id, count(*) FROM steps WHERE status = 'RUNNING' GROUP BY run_id HAVING count(*) > 1`)
	if err != nil {
		c.violate("sampler", "query steps: %v", err)
		return
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			c.violate("sampler", "read steps: %v", err)
			continue
		}
		c.violate("two RUNNING steps", "run %s has %d RUNNING steps", id, n)
	}
	if err := rows.Err(); err != nil {
		c.violate("sampler", "read steps: %v", err)
	}
	rows.Close()
	var maxSeq, count int64
	if err := c.db.QueryRowContext(ctx, `SELECT COALESCE(max(seq), 0), count(*) FROM events`).Scan(&maxSeq, &count); err != nil {
		c.violate("sampler", "query events: %v", err)
	} else if maxSeq != count {
		c.violate("seq gap", "max(seq) %d, count %d", maxSeq, count)
	}

	// Live agents, by run and by the worker whose LOOPD_HOME their output
	// goes to: a pid from the run's invocation log counts only while its
	// output is a step log of that run (a pid reused by another process
	// is not the run's agent).
	live := map[string][]string{}
	for _, id := range c.ids {
		b, _ := os.ReadFile(filepath.Join(c.f.ws[id], ".agent-invocations"))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, l := range lines[max(0, len(lines)-4):] {
			fs := strings.Fields(l)
			if len(fs) != 3 {
				continue
			}
			pid, err := strconv.Atoi(fs[2])
			if err != nil || syscall.Kill(pid, 0) != nil || zombie(pid) {
				continue
			}
			out, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", pid))
			if err != nil {
				continue // it has just exited
			}
			for w, e := range c.f.workers {
				if strings.HasPrefix(out, filepath.Join(e.home, "runs", id)+string(filepath.Separator)) {
					live[id] = append(live[id], fmt.Sprintf("pid %d of %s, step %s, output %s", pid, c.f.ids[w], fs[1], filepath.Base(out)))
					if c.lastAgent[id] == nil {
						c.lastAgent[id] = map[int]time.Time{}
					}
					c.lastAgent[id][w] = now
				}
			}
		}
		c.maxLive = max(c.maxLive, len(live[id]))
		if len(live[id]) > 1 {
			c.violate("two agents", "run %s has %d live agents: %s", id, len(live[id]), strings.Join(live[id], "; "))
		}
	}

	rows, err = c.db.QueryContext(ctx, `SELECT id, COALESCE(lease_owner, ''), lease_epoch, COALESCE(lease_expires_at, 0) FROM runs WHERE status = 'RUNNING'`)
	if err != nil {
		c.violate("sampler", "query runs: %v", err)
		return
	}
	defer rows.Close()
	c.mu.Lock()
	down, upAt := slices.Clone(c.down), slices.Clone(c.upAt)
	c.mu.Unlock()
	for rows.Next() {
		var id string
		var l chaosLease
		if err := rows.Scan(&id, &l.owner, &l.epoch, &l.expires); err != nil {
			c.violate("sampler", "scan runs: %v", err)
			return
		}
		w := slices.Index(c.f.ids, l.owner)
		if w < 0 {
			continue
		}
		key := fmt.Sprintf("%s/%d", id, l.epoch)
		if _, ok := c.epochSeen[key]; !ok {
			c.epochSeen[key] = now
		}
		// A worker that can renew nothing renewed nothing: its leases
		// expire no later than TTL after its fault began (+1 s for a
		// renewal already on its way then).
		if !down[w].IsZero() {
			c.downSeen++
		}
		if !down[w].IsZero() && l.expires > down[w].Add(fleetTTL+time.Second).UnixMilli() {
			c.violate("renewed while down", "run %s: lease of worker %s (epoch %d) expires %s, renewed after its fault began at %s",
				id, l.owner, l.epoch, time.UnixMilli(l.expires).Format("15:04:05.000"), down[w].Format("15:04:05.000"))
		}
		// A renewal since the last sample, by a worker that is up: it
		// must be executing the run.
		prev, ok := c.leases[id]
		if ok && prev.owner == l.owner && prev.epoch == l.epoch && l.expires > prev.expires && down[w].IsZero() {
			c.renewals++
			since := c.epochSeen[key]
			for _, at := range []time.Time{c.lastAgent[id][w], upAt[w]} {
				if at.After(since) {
					since = at
				}
			}
			if now.Sub(since) > chaosGrace {
				c.violate("renewed, not executed", "run %s: worker %s renewed its lease (epoch %d) with no live agent of it for %s",
					id, l.owner, l.epoch, now.Sub(since).Round(time.Millisecond))
			}
		}
		c.leases[id] = l
	}
}

// finish checks the history and reports the campaign's numbers.
func (c *fleetChaos) finish() {
	t, ctx := c.t, c.t.Context()
	rows, err := c.db.QueryContext(ctx, `SELECT run_id, seq, status, error, started_at, COALESCE(ended_at, 0) FROM steps ORDER BY run_id, seq`)
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		seq          int
		status, err  string
		start, ended int64
	}
	byRun := map[string][]step{}
	for rows.Next() {
		var id string
		var s step
		if err := rows.Scan(&id, &s.seq, &s.status, &s.err, &s.start, &s.ended); err != nil {
			t.Fatal(err)
		}
		byRun[id] = append(byRun[id], s)
	}
	rows.Close()
	interrupted := map[string]int{}
	total := 0
	for _, id := range c.ids {
		if st := c.f.workers[0].status(id).Status; st != api.RunCompleted {
			t.Errorf("run %s is %s, want COMPLETED", id, st)
		}
		steps := byRun[id]
		total += len(steps)
		for i, s := range steps {
			switch s.status {
			case "FAILED":
				t.Errorf("run %s: step %d FAILED (%s)", id, s.seq, s.err)
			case "INTERRUPTED":
				why, _, _ := strings.Cut(s.err, ":")
				interrupted[why]++
			case "RUNNING":
				t.Errorf("run %s: step %d still RUNNING in a completed run", id, s.seq)
			}
			if i > 0 && s.start < steps[i-1].ended {
				t.Errorf("run %s: step %d started at %d, before step %d ended at %d: two steps at once",
					id, s.seq, s.start, steps[i-1].seq, steps[i-1].ended)
			}
		}
	}
	// A takeover moves a run to another worker; a worker restarted after
	// its lease expired claims its own run back (from = to).
	var takeovers, reclaims int
	if err := c.db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE payload::jsonb->>'from_worker' <> payload::jsonb->>'to_worker'),
		count(*) FILTER (WHERE payload::jsonb->>'from_worker' = payload::jsonb->>'to_worker')
		FROM events WHERE type = 'RUN_RECOVERED'`).Scan(&takeovers, &reclaims); err != nil {
		t.Fatal(err)
	}
	// Stale writes: a worker's write to a run leased to another worker.
	var audited int
	if err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM chaos_writes`).Scan(&audited); err != nil || audited == 0 {
		t.Fatalf("the audit recorded %d writes (%v): it watches nothing", audited, err)
	}
	rows, err = c.db.QueryContext(ctx, `SELECT tbl, run_id, writer, owner, epoch, what, at FROM chaos_writes
		WHERE writer = ANY($1) AND COALESCE(owner, '') <> '' AND writer <> owner ORDER BY id`, c.f.ids)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tbl, id, writer, owner, what string
		var epoch int64
		var at time.Time
		if err := rows.Scan(&tbl, &id, &writer, &owner, &epoch, &what, &at); err != nil {
			t.Fatalf("read a stale write: %v", err)
		}
		c.violate("stale write", "%s of run %s (%s) written by %s while leased to %s (epoch %d) at %s",
			tbl, id, what, writer, owner, epoch, at.Format("15:04:05.000"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the stale writes: %v", err)
	}
	rows.Close()
	// Stale epochs: a write by the run's own worker id, but fenced under
	// an older lease of the run than the current one — or, for a step
	// row of a RUNNING run, fenced under none (nothing then proves its
	// epoch: the usage checkpoint was written so before it was fenced).
	// The claim's own events are written by the statement that sets the
	// epoch, and name none.
	rows, err = c.db.QueryContext(ctx, `SELECT tbl, run_id, writer, epoch, fenced, what, at FROM chaos_writes
		WHERE writer = ANY($1) AND writer = owner
		AND position(' ' || run_id || '@' || epoch || ' ' IN fenced || ' ') = 0
		AND (position(' ' || run_id || '@' IN fenced) > 0 OR (tbl = 'steps' AND status = 'RUNNING'))
		ORDER BY id`, c.f.ids)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tbl, id, writer, fenced, what string
		var epoch int64
		var at time.Time
		if err := rows.Scan(&tbl, &id, &writer, &epoch, &fenced, &what, &at); err != nil {
			t.Fatalf("read a stale-epoch write: %v", err)
		}
		c.violate("stale-epoch write", "%s of run %s (%s) written by its owner %s fenced under %q while the lease's epoch was %d at %s",
			tbl, id, what, writer, fenced, epoch, at.Format("15:04:05.000"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the stale-epoch writes: %v", err)
	}
	rows.Close()
	var fencedWrites int
	if err := c.db.QueryRowContext(ctx, `SELECT count(*) FROM chaos_writes WHERE fenced <> ''`).Scan(&fencedWrites); err != nil || fencedWrites == 0 {
		t.Errorf("the audit saw %d writes naming their lease (%v): the fenced transactions do not name it", fencedWrites, err)
	}
	var writerList string
	if err := c.db.QueryRowContext(ctx, `SELECT COALESCE(string_agg(DISTINCT writer, ','), '') FROM chaos_writes`).Scan(&writerList); err != nil {
		t.Fatalf("read the audit's writers: %v", err)
	}
	for _, id := range c.f.ids {
		if !strings.Contains(writerList, id) {
			t.Errorf("the audit saw no write by worker %s (writers: %q): the sessions do not name their worker", id, writerList)
		}
	}
	c.f.checkInvariants()

	c.mu.Lock()
	defer c.mu.Unlock()
	kinds := slices.Sorted(maps.Keys(c.violations))
	for _, k := range kinds {
		v := c.violations[k]
		t.Errorf("invariant %q broken %d times; first: %s", k, len(v), strings.Join(v[:min(len(v), 10)], "\n\t"))
	}
	var fs []string
	sum := 0
	for _, k := range []chaosKind{chaosKill, chaosStop, chaosPartition} {
		n := c.faults[k]
		sum += n[0] + n[1] + n[2]
		fs = append(fs, fmt.Sprintf("%s %d (%d short, %d medium, %d long; %s in all)", k, n[0]+n[1]+n[2], n[0], n[1], n[2], c.faultTime[k].Round(time.Second)))
	}
	t.Logf("chaos: %d faults in %s: %s", sum, c.campaignTime.Round(time.Second), strings.Join(fs, ", "))
	t.Logf("chaos: %d runs, all COMPLETED; %d steps, INTERRUPTED %v; %d takeovers by another worker, %d runs claimed back by their restarted worker (RUN_RECOVERED); %d samples (%d leases of down workers, %d renewals checked), at most %d live agent(s) per run; %d writes audited",
		len(c.ids), total, interrupted, takeovers, reclaims, c.samples, c.downSeen, c.renewals, c.maxLive, audited)
}

// A worker cut off from the database while it holds a step's commit open
// (the run's row locked by its fenced update, the step's end written, not
// committed): the server ends its idle session (idle_in_transaction
// timeout, a third of the TTL), which frees the row for a takeover within
// TTL + scan (+5 s of slack) of the cut; its agents die before the takeover;
// the held transaction never commits, and the run completes elsewhere.
//
// The worker is brought there deterministically by a test hook
// (LOOPD_TEST_HOLD_IN_STEP_TX, inert unless set): its first step commit
// writes a marker file and waits inside the transaction until the file is
// removed.
func TestFleetPartitionInsideStepTransaction(t *testing.T) {
	f := newFleet(t, 3)
	proxy := f.newProxy()
	marker := filepath.Join(t.TempDir(), "held-in-step-tx")
	f.workers[0].daemonEnv = append(f.workers[0].daemonEnv, "LOOPD_TEST_HOLD_IN_STEP_TX="+marker)
	direct := f.url
	f.url = proxy.url(f)
	f.start(0)
	f.url = direct
	// Run a's step ends and is held in its commit; run b's agent keeps
	// working (it waits for go-1 in its workspace), for the watchdog to stop.
	a, b := f.startRun(0), f.startRun(0)
	eventually(t, "worker 0 to run both agents", 60*time.Second, func() bool {
		return len(f.agents(a)) == 1 && len(f.agents(b)) == 1
	})
	f.start(1)
	f.start(2)
	bAgent := f.agents(b)[0]
	if err := os.WriteFile(filepath.Join(f.ws[a], "go-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var held string
	eventually(t, "worker 0 to hold run a's step commit open", 30*time.Second, func() bool {
		bs, err := os.ReadFile(marker)
		held = strings.TrimSpace(string(bs))
		return err == nil
	})
	proxy.cut()
	cutAt := time.Now()
	if held != a+" 1" {
		t.Fatalf("the held transaction is %q, want run %s's step 1", held, a)
	}
	stop := make(chan struct{})
	deaths := watchDeaths([]int{bAgent}, stop)
	var at time.Time
	var to string
	eventually(t, "run a to be taken over", fleetTTL+fleetScan+30*time.Second, func() bool {
		at, to = recoveredAt(f.workers[1].events(a), f.ids[0])
		return !at.IsZero()
	})
	lat := at.Sub(cutAt)
	if lat > fleetTTL+fleetScan+5*time.Second {
		t.Errorf("run a taken over %s after its worker was cut off inside a step's transaction, want ≤ TTL + scan + 5s (%s)",
			lat, fleetTTL+fleetScan+5*time.Second)
	}
	if to == f.ids[0] || to == "" {
		t.Errorf("run a recovered by %q, want another worker", to)
	}
	var bAt time.Time
	eventually(t, "run b to be taken over", fleetTTL+fleetScan+30*time.Second, func() bool {
		bAt, _ = recoveredAt(f.workers[1].events(b), f.ids[0])
		return !bAt.IsZero()
	})
	close(stop)
	var lead time.Duration
	if died, ok := (<-deaths)[bAgent]; !ok {
		t.Errorf("the cut-off worker's agent of run b (pid %d) was alive at its takeover", bAgent)
	} else if lead = bAt.Sub(died); lead < 2*time.Second {
		t.Errorf("the cut-off worker's agent died %s before its run's takeover, want ≥ 2s", lead)
	}
	// The network heals and the held transaction goes on: its session is
	// gone, and a retry is fenced out by the new epoch.
	proxy.heal()
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the healed worker to drop its lost leases", 30*time.Second, func() bool {
		return len(f.daemonInfo(0).Leases) == 0
	})
	if err := os.WriteFile(filepath.Join(f.ws[b], "go-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e := f.workers[1]
	for _, id := range []string{a, b} {
		eventually(t, "run "+id+" to complete on the other workers", 90*time.Second, func() bool {
			return e.status(id).Status == api.RunCompleted
		})
		steps := e.steps(id)
		if len(steps) == 0 || steps[0].Status != api.StepInterrupted || !strings.HasPrefix(steps[0].Error, "worker_lost:"+f.ids[0]+":") {
			t.Errorf("run %s: first step %+v, want INTERRUPTED worker_lost:%s (the held commit of its end never landed)", id, steps, f.ids[0])
		}
		for _, st := range steps[1:] {
			if st.Status != api.StepSucceeded {
				t.Errorf("run %s: step %d is %s (%s), want SUCCEEDED", id, st.Seq, st.Status, st.Error)
			}
		}
	}
	// Run a's agent ran iteration 1 on worker 0, then iteration 1 again
	// and 2 on the taker: the step the held commit would have started
	// never ran an agent.
	var its []string
	bs, _ := os.ReadFile(filepath.Join(f.ws[a], ".agent-invocations"))
	for l := range strings.SplitSeq(strings.TrimSpace(string(bs)), "\n") {
		its = append(its, strings.Fields(l)[0])
	}
	if strings.Join(its, " ") != "1 1 2" {
		t.Errorf("run a's agent ran iterations %v, want 1 (worker 0), then 1 and 2 (the taker)", its)
	}
	t.Logf("worker cut off inside a step's transaction: run taken over %s after the cut (TTL %s, idle-in-transaction bound %s); its other agent dead %s before its run's takeover",
		lat.Round(time.Millisecond), fleetTTL, fleetTTL/3, lead.Round(time.Millisecond))
	f.checkInvariants()
}

// A worker restarted just before its leases expire renews them before it
// adopts them: the deadline its steps' wrappers watch (TTL − margin after
// a renewal) never outlives the run's lease minus the margin. Before, it
// adopted them on the deadline of a bare ping, its agents ran on while the
// leases lapsed, and another worker could take the runs over under them.
func TestFleetRestartedWorkerRenewsBeforeItAdopts(t *testing.T) {
	f := newFleet(t, 1)
	f.start(0)
	id := f.startRun(0)
	eventually(t, "the agent to run", 30*time.Second, func() bool { return len(f.agents(id)) == 1 })
	db, err := sql.Open("pgx", f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lease := func() (owner string, expires int64) {
		if err := db.QueryRowContext(t.Context(), `SELECT COALESCE(lease_owner, ''), COALESCE(lease_expires_at, 0) FROM runs WHERE id = $1`,
			id).Scan(&owner, &expires); err != nil {
			t.Fatal(err)
		}
		return owner, expires
	}
	f.workers[0].killDaemon()
	_, expires := lease()
	// Back 2 s before the lease expires (its agent is dead by then: the
	// wrapper's guard stopped it at TTL − margin).
	time.Sleep(time.Until(time.UnixMilli(expires).Add(-2 * time.Second)))
	restarted := time.Now()
	f.start(0)
	deadlineFile := filepath.Join(f.workers[0].home, "lease-deadline")
	checked := 0
	for time.Since(restarted) < 4*time.Second {
		b, err := os.ReadFile(deadlineFile)
		fi, serr := os.Stat(deadlineFile)
		owner, exp := lease()
		if err == nil && serr == nil && fi.ModTime().After(restarted) && owner == f.ids[0] {
			at, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			checked++
			if limit := time.UnixMilli(exp).Add(-fleetMargin).Unix() + 1; at > limit {
				t.Fatalf("the restarted worker's steps may run until %s, but its lease expires at %s (margin %s): adopted without a renewal",
					time.Unix(at, 0).Format("15:04:05"), time.UnixMilli(exp).Format("15:04:05.000"), fleetMargin)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if checked == 0 {
		t.Fatal("the restarted worker wrote no deadline while it held the run")
	}
	if err := os.WriteFile(filepath.Join(f.ws[id], "go-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to complete", 60*time.Second, func() bool { return f.workers[0].status(id).Status == api.RunCompleted })
}
