package e2e

// The chaos test's one implementation, shared by TestChaos (chaos_test.go,
// build tag chaos, 50 kills, or kills for -chaos.duration as CI runs it)
// and TestChaosShort (chaos_short_test.go, every test run, a few kills).
// See chaos_test.go for how to run and replay it.

import (
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", to read the daemon's file directly

	"github.com/loopd/loopd/internal/api"
)

var (
	chaosSeedFlag  = flag.Uint64("chaos.seed", 0, "seed of the chaos tests' kill schedule; 0 picks one from the clock (env LOOPD_CHAOS_SEED)")
	chaosKillsFlag = flag.Int("chaos.kills", 0, "number of kill -9 of the daemon in the chaos tests; 0 keeps each test's own (env LOOPD_CHAOS_KILLS)")
	chaosForFlag   = flag.Duration("chaos.duration", 0, "kill the daemon for this long instead of a number of times (env LOOPD_CHAOS_DURATION); CI runs a short campaign this way")
)

// chaosDuration is how long the campaign kills the daemon, when given
// (the flag, else LOOPD_CHAOS_DURATION): it then replaces the kill count.
func chaosDuration(t *testing.T) time.Duration {
	if *chaosForFlag > 0 {
		return *chaosForFlag
	}
	if s := os.Getenv("LOOPD_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("LOOPD_CHAOS_DURATION=%q: want a positive duration such as 30s", s)
		}
		return d
	}
	return 0
}

// chaosSeed is the seed of this test process: the flag, else the
// environment, else the clock. It is logged so a failure can be replayed.
func chaosSeed(t *testing.T) uint64 {
	if *chaosSeedFlag != 0 {
		return *chaosSeedFlag
	}
	if s := os.Getenv("LOOPD_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LOOPD_CHAOS_SEED=%q: %v", s, err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

func chaosKills(t *testing.T, def int) int {
	if *chaosKillsFlag > 0 {
		return *chaosKillsFlag
	}
	if s := os.Getenv("LOOPD_CHAOS_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LOOPD_CHAOS_KILLS=%q: want a positive count", s)
		}
		return n
	}
	return def
}

// Step commands. Each sleeps a few tens of milliseconds ($$ is the step's
// wrapper pid, so the length varies from step to step) so that a kill has
// real windows inside every phase; the agent also sleeps after it answered,
// so some kills find its output written and its process still alive.
const (
	chaosVerifyDone   = `verify_command=sleep 0.0$(( $$ % 4 + 1 )); if [ -f done.txt ]; then echo "ok  widget 0.01s"; else echo "--- FAIL: TestWidget (0.00s)"; echo "    widget_test.go:12: done.txt is missing"; exit 1; fi`
	chaosVerifyFails  = `verify_command=sleep 0.0$(( $$ % 4 + 1 )); echo "--- FAIL: TestWidget (0.00s)"; echo "FAIL"; exit 1`
	chaosVerifyPasses = `verify_command=sleep 0.0$(( $$ % 4 + 1 )); echo "ok  widget 0.01s"`
	chaosReview       = `review_command=sleep 0.0$(( $$ % 3 + 1 )); if [ -f done.txt ]; then echo "APPROVED"; else echo "CHANGES REQUESTED: the widget is not done"; fi`
)

// chaosStepLog, put in front of every step command, appends one line per
// start of a step's commands to the workspace's .step-invocations.
const chaosStepLog = `echo "$LOOP_PHASE $LOOP_ITERATION $LOOP_STEP" >> .step-invocations; `

func chaosAgentCommand() string {
	return `agent_command=sleep 0.0$(( $$ % 5 + 2 )); ` + scriptedAgent() + `; rc=$?; sleep 0.0$(( $$ % 3 + 1 )); exit $rc`
}

// chaosScenario is one kind of run and the ending it must reach whatever
// the kills do: the kills may cost a step (INTERRUPTED, run again) but
// never change the counted history, so the ending is exact.
type chaosScenario struct {
	name   string
	vars   []string // FAKE_* variables of the scripted agent (.env)
	config []string // .loop/config lines besides the agent
	status api.RunStatus
	reason string
	// counted returns the acceptable signatures of the counted steps
	// (SUCCEEDED/FAILED, in seq order, "1i:S 1v:F …") of a run whose last
	// iteration is last.
	counted func(last int) []string
	// iteration is the iteration the run ends in; 0 when it depends on
	// when the user stopped it.
	iteration int
	// inputTokens is what each agent invocation reports.
	inputTokens int64
	userStop    bool // the test stops it with `loopctl stop` mid-way
}

// iterations renders n iterations of a pipeline signature, the last one
// possibly different.
func iterations(n int, each, last string) string {
	var parts []string
	for i := 1; i <= n; i++ {
		sig := each
		if i == n {
			sig = last
		}
		for s := range strings.FieldsSeq(sig) {
			parts = append(parts, strconv.Itoa(i)+s)
		}
	}
	return strings.Join(parts, " ")
}

func chaosScenarios() []chaosScenario {
	return []chaosScenario{{
		name: "completes", vars: []string{"FAKE_DONE_AT=4"}, config: []string{chaosVerifyDone, "max_consecutive_verification_failures=5"},
		status: api.RunCompleted, reason: "completed:promise+verify", iteration: 4, inputTokens: 1000,
		counted: func(int) []string { return []string{iterations(4, "i:S v:F", "i:S v:S")} },
	}, {
		name: "verify-streak", config: []string{chaosVerifyFails, "max_consecutive_verification_failures=4"},
		status: api.RunFailed, reason: "max_consecutive_failures:verification:4", iteration: 4, inputTokens: 1000,
		counted: func(int) []string { return []string{iterations(4, "i:S v:F", "i:S v:F")} },
	}, {
		name: "max-iterations", config: []string{chaosVerifyPasses, "max_iterations=4"},
		status: api.RunAborted, reason: "max_iterations:4", iteration: 4, inputTokens: 1000,
		counted: func(int) []string { return []string{iterations(4, "i:S v:S", "i:S v:S")} },
	}, {
		// Each agent run costs $0.60 at claude-sonnet-4-5 prices: the fifth
		// one crosses $2.50, before its verification.
		name: "max-cost", vars: []string{"FAKE_INPUT=100000", "FAKE_OUTPUT=20000"},
		config: []string{chaosVerifyFails, "max_cost=2.5", "max_consecutive_verification_failures=0"},
		status: api.RunAborted, reason: "max_cost:2.50", iteration: 5, inputTokens: 100000,
		counted: func(int) []string { return []string{iterations(5, "i:S v:F", "i:S")} },
	}, {
		// Stopped by the user (graceful: the step in flight finishes). The
		// max_iterations bound only keeps a lost stop from running forever.
		name: "user-stop", config: []string{chaosVerifyPasses, "max_iterations=60"},
		status: api.RunInterrupted, reason: "user_stop", inputTokens: 1000, userStop: true,
		counted: func(last int) []string {
			if last == 0 {
				return []string{""}
			}
			return []string{iterations(last, "i:S v:S", "i:S"), iterations(last, "i:S v:S", "i:S v:S")}
		},
	}, {
		name: "review", vars: []string{"FAKE_DONE_AT=3"}, config: []string{chaosReview, chaosVerifyDone},
		status: api.RunCompleted, reason: "completed:promise+verify+review", iteration: 3, inputTokens: 1000,
		counted: func(int) []string { return []string{iterations(3, "i:S r:F", "i:S r:S v:S")} },
	}}
}

// chaosRun is one run of the workload.
type chaosRun struct {
	sc      *chaosScenario
	id      string
	ws      string // canonical path
	stopAt  int    // user-stop: stop once this iteration runs
	stopped bool
	status  api.RunStatus // as last seen
	bad     bool          // an invariant failed: print its history
}

// chaos is one chaos test's state.
type chaos struct {
	t      *testing.T
	e      *env
	rng    *rand.Rand
	seed   uint64
	wsRoot string
	lanes  [][]*chaosRun // per scenario, its runs in order
	scs    []chaosScenario
	mon    *monitor
	starts int       // daemon starts
	began  time.Time // when the test began

	// Where the kills landed, from the frozen daemon's point of view;
	// terms of them were a SIGTERM (an orderly stop) instead of a kill -9.
	kills, hunted, inWriteTx, noStep, terms int
	phaseKills                              map[api.Phase]int
	delays                                  []time.Duration
}

// runChaos runs the workload under kills kill -9s (a third of them
// SIGTERMs) of the daemon, or under kills for the -chaos.duration when
// given, then checks every invariant and logs the numbers.
//
// The workload: one lane per scenario, each running one run at a time and
// starting the next (in a fresh workspace) when its run has ended, while
// kills remain. Each cycle lets the daemon run a random while, freezes and
// kills it, sometimes leaves it down a little, and restarts it. Meanwhile
// a monitor samples /proc. At the end every run must have reached its
// scenario's ending, and these must hold:
//
//  1. the predicted status, reason, iteration and exit code;
//  2. steps: seqs 1..n, none RUNNING or CANCELED, exactly one STEP_STARTED
//     and one STEP_FINISHED/STEP_INTERRUPTED each, one step at a time;
//  3. step commands and agent invocations: at most once per step, exactly
//     once per step with an outcome, never for an INTERRUPTED step (only
//     the daemon is killed here, never a step); never two steps or two
//     agents of one run alive at once (the monitor);
//  4. counters, iteration and usage equal what the step history implies,
//     and the tokens equal invocations × tokens per invocation;
//  5. one terminal event matching the run, one RUN_CREATED, one
//     POSTMORTEM_WRITTEN; event seqs strictly increasing, and gap-free
//     over the whole log;
//  6. PRAGMA integrity_check ok, and raw counts in the database agree;
//  7. no process of the test's LOOPD_HOME left once everything ended.
func runChaos(t *testing.T, kills int) {
	seed := chaosSeed(t)
	campaign := chaosDuration(t)
	if campaign > 0 {
		t.Logf("chaos: seed %d, kills for %s (replay: go test -tags chaos -run '^%s$' -v ./e2e/ -chaos.seed=%d -chaos.duration=%s)",
			seed, campaign, t.Name(), seed, campaign)
	} else {
		t.Logf("chaos: seed %d, %d kills (replay: go test -tags chaos -run '^%s$' -v ./e2e/ -chaos.seed=%d -chaos.kills=%d)",
			seed, kills, t.Name(), seed, kills)
	}
	c := &chaos{
		t: t, e: newEnv(t), seed: seed, wsRoot: t.TempDir(), began: time.Now(),
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		scs:        chaosScenarios(),
		phaseKills: map[api.Phase]int{},
	}
	c.lanes = make([][]*chaosRun, len(c.scs))
	c.mon = newMonitor()
	c.startDaemon()
	for i := range c.scs {
		c.newRun(i)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() { c.mon.loop(done, 40*time.Millisecond) })

	for k := 0; ; k++ {
		left := kills - k // kills still to come, counting this one
		if campaign > 0 {
			// About three kills a second remain to be made.
			left = int((campaign-time.Since(c.began))/(300*time.Millisecond)) + 1
			if time.Since(c.began) >= campaign {
				break
			}
		} else if left <= 0 {
			break
		}
		c.runFor(c.delay(), left)
		c.kill()
		// Sometimes the daemon stays down a while, so that steps end with
		// no daemon watching and are recorded from their status files.
		if c.rng.IntN(2) == 0 {
			time.Sleep(time.Duration(c.rng.IntN(80)) * time.Millisecond)
		}
		c.startDaemon()
	}
	chaosTime := time.Since(c.began)
	c.drain()
	close(done)
	wg.Wait()
	c.check(chaosTime)
}

// delay picks how long the daemon runs before the next kill: a quarter
// land within 30 ms of its start (recovery, adoption), the rest anywhere up
// to 300 ms.
func (c *chaos) delay() time.Duration {
	if c.rng.IntN(4) == 0 {
		return time.Duration(3+c.rng.IntN(27)) * time.Millisecond
	}
	return time.Duration(30+c.rng.IntN(270)) * time.Millisecond
}

// ctl runs loopctl. A -race build of loopctl would sleep 1 s at exit
// (the race runtime's atexit_sleep_ms) on each of the test's hundreds of
// calls; GORACE turns that off and changes nothing else.
func (c *chaos) ctl(args ...string) result {
	c.t.Helper()
	return c.e.loopctlEnv([]string{"GORACE=atexit_sleep_ms=0"}, args...)
}

// ctlJSON runs loopctl and decodes its JSON output into v.
func (c *chaos) ctlJSON(v any, args ...string) {
	c.t.Helper()
	r := c.ctl(append(args, "--json")...)
	if r.code != 0 {
		c.t.Fatalf("loopctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		c.t.Fatalf("loopctl %s: %v\n%s", strings.Join(args, " "), err, r.stdout)
	}
}

func (c *chaos) status(id string) api.Run {
	c.t.Helper()
	var r api.Run
	c.ctlJSON(&r, "status", id)
	return r
}

func (c *chaos) steps(id string) []api.Step {
	c.t.Helper()
	var s []api.Step
	c.ctlJSON(&s, "steps", id)
	return s
}

// events reads a run's events (NDJSON).
func (c *chaos) events(id string) []api.Event {
	c.t.Helper()
	r := c.ctl("events", id, "--json")
	if r.code != 0 {
		c.t.Fatalf("loopctl events %s: exit %d: %s", id, r.code, r.stderr)
	}
	return parseEvents(c.t, r.stdout)
}

func (c *chaos) startDaemon() {
	c.e.startDaemon("--max-concurrent-runs", "8")
	c.starts++
}

// newRun starts the next run of scenario i in a fresh workspace.
func (c *chaos) newRun(i int) {
	t := c.t
	sc := &c.scs[i]
	ws := filepath.Join(c.wsRoot, fmt.Sprintf("%s-%d", sc.name, len(c.lanes[i])+1))
	if err := os.MkdirAll(filepath.Join(ws, ".loop"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := []string{"agent=command"}
	for _, line := range append([]string{chaosAgentCommand()}, sc.config...) {
		if k, v, _ := strings.Cut(line, "="); strings.HasSuffix(k, "_command") {
			line = k + "=" + chaosStepLog + v
		}
		cfg = append(cfg, line)
	}
	if err := os.WriteFile(filepath.Join(ws, ".loop", "config"), []byte(strings.Join(cfg, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte(strings.Join(sc.vars, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	canon, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.ctl("trust", "-C", ws); r.code != 0 {
		t.Fatalf("loopctl trust (%s): exit %d: %s%s", sc.name, r.code, r.stdout, r.stderr)
	}
	r := c.ctl("start", "-C", ws, "--name", sc.name, "make the widget work")
	if r.code != 0 {
		t.Fatalf("loopctl start (%s): exit %d: %s%s", sc.name, r.code, r.stdout, r.stderr)
	}
	run := &chaosRun{sc: sc, id: strings.TrimSpace(r.stdout), ws: canon, stopAt: 2 + c.rng.IntN(2)}
	c.lanes[i] = append(c.lanes[i], run)
	c.mon.watch(run.id, canon)
}

// runFor lets the daemon run for d. When d leaves room, it first does the
// workload's bookkeeping through loopctl: it stops user-stop runs that
// reached their iteration and replaces runs that ended, while enough kills
// remain to hit the new ones.
func (c *chaos) runFor(d time.Duration, killsLeft int) {
	until := time.Now().Add(d)
	if d >= 80*time.Millisecond {
		c.bookkeep(killsLeft > 2)
	}
	time.Sleep(time.Until(until))
	c.delays = append(c.delays, d)
}

func (c *chaos) bookkeep(replace bool) {
	r := c.ctl("list", "--all-workspaces", "--json", "--limit", "1000")
	if r.code != 0 {
		c.t.Fatalf("loopctl list: exit %d: %s", r.code, r.stderr)
	}
	var runs []api.Run
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		c.t.Fatalf("list json: %v\n%s", err, r.stdout)
	}
	byID := map[string]api.Run{}
	for _, run := range runs {
		byID[run.ID] = run
	}
	for i, lane := range c.lanes {
		cur := lane[len(lane)-1]
		run, ok := byID[cur.id]
		if !ok {
			c.t.Fatalf("run %s (%s) is missing from loopctl list", cur.id, cur.sc.name)
		}
		cur.status = run.Status
		switch {
		case run.Status.Terminal():
			if replace {
				c.newRun(i)
			}
		case cur.sc.userStop && !cur.stopped && run.Iteration >= cur.stopAt:
			c.stop(cur)
		}
	}
}

func (c *chaos) stop(run *chaosRun) {
	r := c.ctl("stop", run.id)
	if r.code != 0 {
		c.t.Errorf("loopctl stop %s (%s): exit %d: %s%s", run.id, run.sc.name, r.code, r.stdout, r.stderr)
		run.bad = true
	}
	run.stopped = true
}

// kill freezes the daemon (SIGSTOP) at the chosen moment, notes what it
// was doing — inside a write transaction? which steps were running? — and
// then kills it with SIGKILL: from the daemon's side exactly a kill -9 at
// that moment. A quarter of the kills hunt for a write transaction first,
// so that some surely land inside one.
func (c *chaos) kill() {
	t := c.t
	select {
	case <-c.e.exited:
		t.Fatalf("loopd exited by itself before kill %d:\n%s", c.kills+1, tailLines(c.e.daemonLog(), 80))
	default:
	}
	pid := c.e.daemon.Process.Pid
	shm := filepath.Join(c.e.home, "loopd.db-shm")
	if c.rng.IntN(4) == 0 {
		c.hunted++
		deadline := time.Now().Add(150 * time.Millisecond)
		for time.Now().Before(deadline) && !writeLockHeld(pid, shm) {
			time.Sleep(50 * time.Microsecond)
		}
	}
	// A third of the kills are an orderly stop instead (SIGTERM, as a
	// service manager or `loopctl daemon stop` does): the daemon exits
	// promptly and leaves its steps running for the next one to adopt.
	if c.rng.IntN(3) == 0 {
		c.kills++
		c.terms++
		c.mon.sample(fmt.Sprintf("kill %d (SIGTERM)", c.kills))
		c.e.stopDaemon()
		return
	}
	_ = c.e.daemon.Process.Signal(syscall.SIGSTOP)
	waitStopped(pid)
	c.kills++
	if writeLockHeld(pid, shm) {
		c.inWriteTx++
	}
	live := c.mon.sample(fmt.Sprintf("kill %d", c.kills))
	if len(live) == 0 {
		c.noStep++
	}
	seen := map[api.Phase]bool{}
	for _, ph := range live {
		seen[ph] = true
	}
	for ph := range seen {
		c.phaseKills[ph]++
	}
	c.e.killDaemon()
}

// waitStopped waits until every thread of pid is stopped (or gone).
func waitStopped(pid int) {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := true
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] != 'T' && b[i+2] != 't' {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// writeLockHeld reports whether pid holds SQLite's WAL write lock: the
// POSIX write lock on byte 120 of the database's -shm file (UNIX_SHM_BASE
// + WAL_WRITE_LOCK in SQLite's unix VFS), taken by BEGIN IMMEDIATE and held
// until the commit.
func writeLockHeld(pid int, shm string) bool {
	var st syscall.Stat_t
	if syscall.Stat(shm, &st) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	ino, p := ":"+strconv.FormatUint(st.Ino, 10), strconv.Itoa(pid)
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && f[1] == "POSIX" && f[3] == "WRITE" && f[4] == p && strings.HasSuffix(f[5], ino) && f[6] == "120" {
			return true
		}
	}
	return false
}

// drain ends the workload: every user-stop run not stopped yet is stopped
// now, and every run is waited for.
func (c *chaos) drain() {
	for _, lane := range c.lanes {
		for _, run := range lane {
			if run.sc.userStop && !run.stopped {
				c.stop(run)
			}
		}
	}
	for _, lane := range c.lanes {
		for _, run := range lane {
			r := c.ctl("wait", run.id, "--timeout", "90s")
			if r.code > 3 {
				c.t.Errorf("wait %s (%s): exit %d: %s%s", run.id, run.sc.name, r.code, r.stdout, r.stderr)
				run.bad = true
			}
			run.status = c.status(run.id).Status
			if want := run.status.ExitCode(); r.code != want {
				c.failf(run, "loopctl wait exit %d, but the run is %s (exit %d)", r.code, run.status, want)
			}
		}
	}
}

func (c *chaos) failf(run *chaosRun, format string, args ...any) {
	c.t.Helper()
	c.t.Errorf("run %s (%s, workspace %s): %s", run.id, run.sc.name, filepath.Base(run.ws), fmt.Sprintf(format, args...))
	run.bad = true
}

// chaosStats are the numbers a chaos test reports.
type chaosStats struct {
	runs                           map[api.RunStatus]int
	steps                          map[api.StepStatus]int
	phases                         map[api.Phase]int
	invocations, implRan           int // agent runs; implementation steps that ran it
	interruptedRan, interruptedNot int // INTERRUPTED implementation steps whose agent ran, or never started
	adopted, fromStatus, lost      int // steps across a restart, by how they were resolved
	betweenSteps, recoveries       int // RUN_RECOVERED with no step in flight; all of them
	events                         int
	commands                       int // step command starts (.step-invocations)
}

// check verifies every invariant and logs the numbers.
func (c *chaos) check(chaosTime time.Duration) {
	t := c.t
	st := chaosStats{runs: map[api.RunStatus]int{}, steps: map[api.StepStatus]int{}, phases: map[api.Phase]int{}}
	runIDs := map[string]*chaosRun{}
	for _, lane := range c.lanes {
		for _, run := range lane {
			runIDs[run.id] = run
			c.checkRun(run, &st)
		}
	}
	for _, lane := range c.lanes {
		for _, run := range lane {
			if run.bad {
				c.printHistory(run)
			}
		}
	}
	// 7. No orphans: once every run has ended no step process is left,
	// with the daemon up and after it stopped.
	if pids := processesMentioning(c.e.home + "/"); len(pids) > 0 {
		t.Errorf("processes of ended runs still alive with the daemon up: %s", describePids(pids))
	}
	c.e.stopDaemon()
	if pids := append(processesMentioning(c.e.home+"/"), processesWithEnv("LOOPD_HOME="+c.e.home)...); len(pids) > 0 {
		t.Errorf("orphan processes after the daemon stopped: %s", describePids(pids))
	}
	for _, v := range c.mon.violations() {
		t.Errorf("process sampling: %s", v)
	}
	c.checkDatabase(runIDs)
	samples, maxSteps, maxAgents := c.mon.stats()
	var total int
	for _, n := range st.steps {
		total += n
	}
	var runs int
	for _, n := range st.runs {
		runs += n
	}
	slices.Sort(c.delays)
	median, early := time.Duration(0), 0
	if len(c.delays) > 0 {
		median = c.delays[len(c.delays)/2]
	}
	for _, d := range c.delays {
		if d < 30*time.Millisecond {
			early++
		}
	}
	t.Logf(`chaos summary (seed %d):
  kills: %d, %d of them SIGTERM (daemon starts %d; median run time before a kill %s, %d within 30 ms of a start; %d hunted a write transaction)
    frozen inside a SQLite write transaction: %d
    with an agent running: %d, a review running: %d, a verification running: %d, no step running: %d
  runs: %d %s
  steps: %d %s, by phase %s
    across a restart: %d adopted alive, %d recorded from their status file, %d INTERRUPTED (outcome lost)
    run recoveries: %d, of which %d between steps
  step command starts: %d (one per SUCCEEDED/FAILED step, none for INTERRUPTED ones)
  agent invocations: %d = implementation steps that ran the agent %d; INTERRUPTED implementation steps: %d never started it, %d ran it
  events: %d
  process samples: %d; most live steps of one run at once: %d; most agents of one run at once: %d
  time: %s under kills, %s in all`,
		c.seed, c.kills, c.terms, c.starts, median, early, c.hunted,
		c.inWriteTx,
		c.phaseKills[api.PhaseImplementation], c.phaseKills[api.PhaseReview], c.phaseKills[api.PhaseVerification], c.noStep,
		runs, fmtCounts(st.runs), total, fmtCounts(st.steps), fmtCounts(st.phases),
		st.adopted, st.fromStatus, st.lost, st.recoveries, st.betweenSteps,
		st.commands, st.invocations, st.implRan, st.interruptedNot, st.interruptedRan, st.events,
		samples, maxSteps, maxAgents, chaosTime.Round(100*time.Millisecond), time.Since(c.began).Round(100*time.Millisecond))
}

func fmtCounts[K ~string](m map[K]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[K(k)]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// checkRun checks one run's invariants 1–5 through loopctl.
func (c *chaos) checkRun(run *chaosRun, st *chaosStats) {
	r := c.status(run.id)
	steps := c.steps(run.id)
	evs := c.events(run.id)
	sc := run.sc
	st.runs[r.Status]++
	st.events += len(evs)

	// 1. The predicted ending.
	if r.Status != sc.status || r.Reason != sc.reason {
		c.failf(run, "ended %s %q (%s), want %s %q", r.Status, r.Reason, r.Description, sc.status, sc.reason)
	}
	if sc.iteration > 0 && r.Iteration != sc.iteration {
		c.failf(run, "ended in iteration %d, want %d", r.Iteration, sc.iteration)
	}
	if r.ExitCode == nil || *r.ExitCode != r.Status.ExitCode() {
		c.failf(run, "exit_code %v for %s", r.ExitCode, r.Status)
	}

	// 2. Steps: gap-free seqs, none left RUNNING, one start and one end
	// event each, and never two at once.
	stepByID := map[int64]api.Step{}
	for i, s := range steps {
		st.steps[s.Status]++
		st.phases[s.Phase]++
		stepByID[s.ID] = s
		if s.Seq != i+1 {
			c.failf(run, "step #%d has seq %d: seqs must be 1..n without gaps or repeats", i+1, s.Seq)
		}
		switch s.Status {
		case api.StepRunning:
			c.failf(run, "step %d is still RUNNING after the run ended", s.Seq)
		case api.StepCanceled:
			// Nothing in this workload cancels a step (no stop --now, no
			// max_duration, no daemon stop --kill-steps).
			c.failf(run, "step %d was CANCELED: %s", s.Seq, s.Error)
		}
	}
	if r.Steps != len(steps) {
		c.failf(run, "status says %d steps, loopctl steps lists %d", r.Steps, len(steps))
	}
	type stepEvents struct{ started, ended, interrupted, adopted, startSeq, endSeq int64 }
	per := map[int64]*stepEvents{}
	var lastSeq int64
	terminal := 0
	var terminalEv api.Event
	for _, ev := range evs {
		if ev.Seq <= lastSeq {
			c.failf(run, "event seq %d after %d: seqs must strictly increase", ev.Seq, lastSeq)
		}
		lastSeq = ev.Seq
		switch ev.Type {
		case "STEP_STARTED", "STEP_FINISHED", "STEP_INTERRUPTED", "STEP_ADOPTED":
			if ev.StepID == nil {
				c.failf(run, "event %d (%s) names no step", ev.Seq, ev.Type)
				continue
			}
		}
		if ev.StepID != nil {
			if _, ok := stepByID[*ev.StepID]; !ok {
				c.failf(run, "event %d (%s) names step id %d, which is not a step of this run", ev.Seq, ev.Type, *ev.StepID)
				continue
			}
			if per[*ev.StepID] == nil {
				per[*ev.StepID] = &stepEvents{}
			}
		}
		switch ev.Type {
		case "STEP_STARTED":
			p := per[*ev.StepID]
			p.started++
			p.startSeq = ev.Seq
		case "STEP_FINISHED", "STEP_INTERRUPTED":
			p := per[*ev.StepID]
			p.ended++
			p.endSeq = ev.Seq
			if ev.Type == "STEP_INTERRUPTED" {
				p.interrupted++
			}
			var payload struct {
				Status api.StepStatus `json:"status"`
			}
			_ = json.Unmarshal(ev.Payload, &payload)
			if s := stepByID[*ev.StepID]; payload.Status != s.Status {
				c.failf(run, "step %d is %s but its %s event says %s", s.Seq, s.Status, ev.Type, payload.Status)
			}
		case "STEP_ADOPTED":
			per[*ev.StepID].adopted++
		case "RUN_COMPLETED", "RUN_FAILED", "RUN_ABORTED", "RUN_INTERRUPTED":
			terminal++
			terminalEv = ev
		}
	}
	var prevEnd int64
	for _, s := range steps {
		p := per[s.ID]
		if p == nil || p.started != 1 || p.ended != 1 {
			c.failf(run, "step %d (%s, %s) has %+v: want exactly one STEP_STARTED and one STEP_FINISHED or STEP_INTERRUPTED",
				s.Seq, s.Phase, s.Status, p)
			continue
		}
		if p.interrupted == 1 && s.Status != api.StepInterrupted {
			c.failf(run, "step %d has a STEP_INTERRUPTED event but is %s", s.Seq, s.Status)
		}
		if p.startSeq < prevEnd {
			c.failf(run, "step %d started (event %d) before the step before it ended (event %d): two steps at once", s.Seq, p.startSeq, prevEnd)
		}
		prevEnd = p.endSeq
	}

	// 3a. Step commands: started at most once per step, as the step's
	// phase and iteration. Only the daemon is killed here, never a step's
	// process, so the wrapper always records its exit status: a step whose
	// commands started can always be adopted or recorded, and INTERRUPTED
	// (outcome lost) must mean its commands never started. An INTERRUPTED
	// step that did run means loopd lost an outcome it could have read, or
	// let a step run that it did not see, next to its retry.
	started := map[int]int{}
	for _, in := range readStepLog(run.ws) {
		started[in.seq]++
		if in.seq < 1 || in.seq > len(steps) {
			c.failf(run, "step commands %q ran with no such step", in.line)
			continue
		}
		if s := steps[in.seq-1]; string(s.Phase) != in.phase || s.Iteration != in.iteration {
			c.failf(run, "step commands %q ran as step %d, which is %s of iteration %d", in.line, s.Seq, s.Phase, s.Iteration)
		}
	}
	for _, s := range steps {
		n := started[s.Seq]
		st.commands += n
		switch {
		case n > 1:
			c.failf(run, "the commands of step %d (%s) started %d times", s.Seq, s.Phase, n)
		case n == 0 && (s.Status == api.StepSucceeded || s.Status == api.StepFailed):
			c.failf(run, "step %d (%s) is %s but its commands never started", s.Seq, s.Phase, s.Status)
		case n == 1 && s.Status == api.StepInterrupted:
			c.failf(run, "step %d (%s) is INTERRUPTED (outcome lost) but its commands ran, and no step process was ever killed", s.Seq, s.Phase)
		}
	}

	// 3b. Agent invocations: at most one per step, each on an
	// implementation step of its iteration, and exactly one for each
	// implementation step with a real outcome.
	inv := readInvocations(run.ws)
	st.invocations += len(inv)
	bySeq := map[int]int{}
	for _, in := range inv {
		bySeq[in.seq]++
		if in.seq < 1 || in.seq > len(steps) {
			c.failf(run, "agent invocation %q has no step", in.line)
			continue
		}
		if s := steps[in.seq-1]; s.Phase != api.PhaseImplementation || s.Iteration != in.iteration {
			c.failf(run, "agent invocation %q ran as step %d, which is %s of iteration %d", in.line, s.Seq, s.Phase, s.Iteration)
		}
	}
	for seq, n := range bySeq {
		if n > 1 {
			c.failf(run, "the agent ran %d times for step %d: a duplicated invocation", n, seq)
		}
	}
	for _, s := range steps {
		if s.Phase != api.PhaseImplementation {
			continue
		}
		// An INTERRUPTED step may or may not have run the agent (the
		// daemon died around its launch); one with a real outcome ran it
		// exactly once.
		n := bySeq[s.Seq]
		if n == 1 {
			st.implRan++
		}
		switch {
		case s.Status == api.StepSucceeded || s.Status == api.StepFailed:
			if n != 1 {
				c.failf(run, "implementation step %d is %s but the agent ran %d times for it", s.Seq, s.Status, n)
			}
		case s.Status == api.StepInterrupted && n == 1:
			st.interruptedRan++
		case s.Status == api.StepInterrupted:
			st.interruptedNot++
		}
	}

	// 4. Counters and usage are what the history implies.
	want := api.Counters{}
	streak := map[api.Phase]int{}
	var counted []string
	var u api.Usage
	for _, s := range steps {
		u.InputTokens += s.Usage.InputTokens
		u.OutputTokens += s.Usage.OutputTokens
		u.CacheReadTokens += s.Usage.CacheReadTokens
		u.CacheWriteTokens += s.Usage.CacheWriteTokens
		u.CostUSD += s.Usage.CostUSD
		if v, ok := s.Usage.ReportedCost(); ok {
			sum, _ := u.ReportedCost()
			sum += v
			u.ReportedCostUSD = &sum
		}
		if s.Status != api.StepSucceeded && s.Status != api.StepFailed {
			continue // CANCELED and INTERRUPTED steps count for nothing
		}
		counted = append(counted, fmt.Sprintf("%d%c:%c", s.Iteration, s.Phase[0], s.Status[0]))
		if s.Status == api.StepFailed {
			streak[s.Phase]++
		} else {
			streak[s.Phase] = 0
		}
	}
	want.Implementation, want.Review, want.Verification = streak[api.PhaseImplementation], streak[api.PhaseReview], streak[api.PhaseVerification]
	if r.Counters != want {
		c.failf(run, "counters %+v, the history implies %+v", r.Counters, want)
	}
	lastIt := 0
	if len(steps) > 0 {
		lastIt = steps[len(steps)-1].Iteration
	}
	if r.Iteration != lastIt {
		c.failf(run, "iteration %d, the history implies %d", r.Iteration, lastIt)
	}
	if got := strings.Join(counted, " "); !slices.Contains(sc.counted(lastIt), got) {
		c.failf(run, "counted steps %q, want %q", got, sc.counted(lastIt))
	}
	if u.InputTokens != r.Usage.InputTokens || u.OutputTokens != r.Usage.OutputTokens ||
		u.CacheReadTokens != r.Usage.CacheReadTokens || u.CacheWriteTokens != r.Usage.CacheWriteTokens ||
		!near(u.CostUSD, r.Usage.CostUSD) || !near(reportedCost(u), reportedCost(r.Usage)) ||
		(u.ReportedCostUSD == nil) != (r.Usage.ReportedCostUSD == nil) {
		c.failf(run, "usage %+v, the steps sum to %+v", r.Usage, u)
	}
	if wantIn := int64(len(inv)) * sc.inputTokens; r.Usage.InputTokens != wantIn {
		c.failf(run, "input tokens %d, want %d: %d agent invocations × %d, each counted exactly once",
			r.Usage.InputTokens, wantIn, len(inv), sc.inputTokens)
	}

	// 5. Exactly one terminal event, of the run's status and reason.
	wantType := "RUN_" + string(r.Status)
	if terminal != 1 || terminalEv.Type != wantType {
		c.failf(run, "%d terminal events (last %s), want exactly one %s", terminal, terminalEv.Type, wantType)
	} else {
		var p struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(terminalEv.Payload, &p)
		if p.Reason != r.Reason {
			c.failf(run, "%s payload reason %q, the run says %q", terminalEv.Type, p.Reason, r.Reason)
		}
	}
	if n := countType(evs, "RUN_CREATED"); n != 1 {
		c.failf(run, "%d RUN_CREATED events", n)
	}
	// The postmortem of the ending is written once, in the background.
	eventually(c.t, "POSTMORTEM_WRITTEN of "+run.id, 20*time.Second, func() bool {
		return countType(c.events(run.id), "POSTMORTEM_WRITTEN") >= 1
	})
	if n := countType(c.events(run.id), "POSTMORTEM_WRITTEN"); n != 1 {
		c.failf(run, "%d POSTMORTEM_WRITTEN events for one ending", n)
	}

	// How the kills met this run: steps in flight at a recovery and how
	// they were resolved.
	open := map[int64]bool{}
	for _, ev := range evs {
		if ev.StepID == nil && ev.Type != "RUN_RECOVERED" {
			continue
		}
		switch ev.Type {
		case "STEP_STARTED":
			open[*ev.StepID] = true
		case "STEP_FINISHED", "STEP_INTERRUPTED":
			delete(open, *ev.StepID)
		case "RUN_RECOVERED":
			st.recoveries++
			if len(open) == 0 {
				st.betweenSteps++
			}
			for id := range open {
				switch {
				case per[id] != nil && per[id].adopted > 0:
					st.adopted++
				case stepByID[id].Status == api.StepInterrupted:
					st.lost++
				default:
					st.fromStatus++
				}
				delete(open, id) // counted once, at its first recovery
			}
		}
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

type invocation struct {
	phase          string
	iteration, seq int
	line           string
}

// readStepLog parses .step-invocations: "<phase> <iteration> <step>".
func readStepLog(ws string) []invocation {
	b, _ := os.ReadFile(filepath.Join(ws, ".step-invocations"))
	var out []invocation
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		in := invocation{line: l}
		if len(f) == 3 {
			in.phase = f[0]
			in.iteration, _ = strconv.Atoi(f[1])
			in.seq, _ = strconv.Atoi(f[2])
		}
		out = append(out, in)
	}
	return out
}

// readInvocations parses the scripted agent's log: "<iteration> <step> <pid>".
func readInvocations(ws string) []invocation {
	b, _ := os.ReadFile(filepath.Join(ws, ".agent-invocations"))
	var out []invocation
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		in := invocation{line: l}
		if len(f) == 3 {
			in.iteration, _ = strconv.Atoi(f[0])
			in.seq, _ = strconv.Atoi(f[1])
		}
		out = append(out, in)
	}
	return out
}

// checkDatabase (invariant 6) opens the database read-only after the
// daemon stopped: integrity, and raw counts that must agree with what
// loopctl showed.
func (c *chaos) checkDatabase(runs map[string]*chaosRun) {
	t := c.t
	db, err := sql.Open("sqlite", "file:"+filepath.Join(c.e.home, "loopd.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatalf("open the database read-only: %v", err)
	}
	defer db.Close()
	var verdict string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&verdict); err != nil || verdict != "ok" {
		t.Errorf("PRAGMA integrity_check = %q (%v), want ok", verdict, err)
	}
	rows := func(what, q string) {
		t.Helper()
		rs, err := db.Query(q)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		defer rs.Close()
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Errorf("%s: a row that cannot be read: %v", what, err)
				continue
			}
			t.Errorf("%s: %v", what, vals)
		}
		if err := rs.Err(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	rows("foreign key violation", `PRAGMA foreign_key_check`)
	rows("a step recorded twice", `SELECT run_id, seq, COUNT(*) FROM steps GROUP BY run_id, seq HAVING COUNT(*) > 1`)
	rows("a step left RUNNING", `SELECT run_id, seq, phase FROM steps WHERE status = 'RUNNING'`)
	rows("a run that has not ended", `SELECT id, status FROM runs WHERE status NOT IN ('COMPLETED','FAILED','ABORTED','INTERRUPTED')`)
	rows("seqs with a gap", `SELECT run_id, COUNT(*), MAX(seq) FROM steps GROUP BY run_id HAVING COUNT(*) != MAX(seq)`)
	// Event seqs are gap-free: every commit takes the next ones, and a
	// transaction cut short by a kill takes none.
	rows("event seqs with a gap", `SELECT COUNT(*), MIN(seq), MAX(seq) FROM events HAVING COUNT(*) != MAX(seq) - MIN(seq) + 1`)
	rows("a step without exactly one start and one end event", `SELECT s.run_id, s.seq,
		(SELECT COUNT(*) FROM events e WHERE e.step_id = s.id AND e.type = 'STEP_STARTED'),
		(SELECT COUNT(*) FROM events e WHERE e.step_id = s.id AND e.type IN ('STEP_FINISHED','STEP_INTERRUPTED'))
		FROM steps s WHERE 1 != (SELECT COUNT(*) FROM events e WHERE e.step_id = s.id AND e.type = 'STEP_STARTED')
		OR 1 != (SELECT COUNT(*) FROM events e WHERE e.step_id = s.id AND e.type IN ('STEP_FINISHED','STEP_INTERRUPTED'))`)
	rows("a run with other than one terminal event", `SELECT r.id, r.status, COUNT(e.seq) FROM runs r LEFT JOIN events e
		ON e.run_id = r.id AND e.type IN ('RUN_COMPLETED','RUN_FAILED','RUN_ABORTED','RUN_INTERRUPTED')
		GROUP BY r.id HAVING COUNT(e.seq) != 1 OR MAX(e.type) != 'RUN_' || r.status`)

	var nRuns int
	if err := db.QueryRow(`SELECT COUNT(*) FROM runs`).Scan(&nRuns); err != nil || nRuns != len(runs) {
		t.Errorf("%d runs in the database (%v), the test created %d", nRuns, err, len(runs))
	}
	// Every daemon start committed its DAEMON_STARTED before it answered;
	// a kill -9 never loses a commit (WAL, synchronous=NORMAL).
	var started int
	if err := db.QueryRow(`SELECT COUNT(*) FROM events WHERE type = 'DAEMON_STARTED'`).Scan(&started); err != nil || started != c.starts {
		t.Errorf("%d DAEMON_STARTED events (%v), the daemon was started %d times", started, err, c.starts)
	}
	var steps int
	if err := db.QueryRow(`SELECT COUNT(*) FROM steps`).Scan(&steps); err != nil {
		t.Error(err)
	}
	t.Logf("database: integrity_check %s, %d runs, %d steps, %d DAEMON_STARTED", verdict, nRuns, steps, started)
}

// printHistory logs a failing run's steps, events and the daemon log lines
// that name it.
func (c *chaos) printHistory(run *chaosRun) {
	var b strings.Builder
	fmt.Fprintf(&b, "history of run %s (%s):\n  steps:\n", run.id, run.sc.name)
	for _, s := range c.steps(run.id) {
		fmt.Fprintf(&b, "    %3d it%-2d %-14s %-11s exit=%s in=%d %s\n", s.Seq, s.Iteration, s.Phase, s.Status,
			fmtExit(s.ExitCode), s.Usage.InputTokens, s.Error)
	}
	b.WriteString("  events:\n")
	for _, ev := range c.events(run.id) {
		step := ""
		if ev.StepID != nil {
			step = fmt.Sprintf("step#%d", *ev.StepID)
		}
		p := string(ev.Payload)
		if len(p) > 160 {
			p = p[:160] + "…"
		}
		fmt.Fprintf(&b, "    %6d %s %-20s %-9s %s\n", ev.Seq, ev.TS.Format("15:04:05.000"), ev.Type, step, p)
	}
	inv, _ := os.ReadFile(filepath.Join(run.ws, ".agent-invocations"))
	fmt.Fprintf(&b, "  agent invocations (iteration step pid):\n%s", indent(string(inv), "    "))
	cmds, _ := os.ReadFile(filepath.Join(run.ws, ".step-invocations"))
	fmt.Fprintf(&b, "  step command starts (phase iteration step):\n%s", indent(string(cmds), "    "))
	var lines []string
	for l := range strings.SplitSeq(c.e.daemonLog(), "\n") {
		if strings.Contains(l, run.id) || strings.Contains(l, "loopd started") || strings.Contains(l, "\trecovered\t") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 300 {
		lines = lines[len(lines)-300:]
	}
	fmt.Fprintf(&b, "  daemon log lines naming it (and daemon starts and recoveries):\n%s", indent(strings.Join(lines, "\n"), "    "))
	c.t.Log(b.String())
}

func fmtExit(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

func indent(s, prefix string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix) + "\n"
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// processesWithEnv lists live processes whose environment holds kv.
func processesWithEnv(kv string) []int {
	var pids []int
	for _, pid := range allPids() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil || !slices.Contains(strings.Split(string(b), "\x00"), kv) || !pidAlive(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func describePids(pids []int) string {
	var parts []string
	for _, pid := range pids {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		parts = append(parts, fmt.Sprintf("%d %q", pid, strings.ReplaceAll(string(b), "\x00", " ")))
	}
	return strings.Join(parts, "; ")
}

func allPids() []int {
	ents, _ := os.ReadDir("/proc")
	pids := make([]int, 0, len(ents))
	for _, ent := range ents {
		if pid, err := strconv.Atoi(ent.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// monitor samples /proc while the workload runs: for each run, the live
// step process groups (by the tag loopd puts in a step's argv) and the live
// scripted agents (by their working directory, the run's workspace). One
// run must never have two of either at once, across any restart.
type monitor struct {
	agent string // the scripted agent's path, as in its argv

	mu        sync.Mutex
	wsRun     map[string]string // workspace → run id
	runs      map[string]bool
	samples   int
	maxSteps  int
	maxAgents int
	bad       []string
}

func newMonitor() *monitor {
	return &monitor{agent: scriptedAgent(),
		wsRun: map[string]string{}, runs: map[string]bool{}}
}

func (m *monitor) watch(id, ws string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wsRun[ws] = id
	m.runs[id] = true
}

func (m *monitor) loop(done <-chan struct{}, every time.Duration) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-done:
			return
		case <-tk.C:
			m.sample("")
		}
	}
}

// atGate reports whether process pid is a step's wrapper waiting at its
// gate: it holds the gate, a pipe, as fd 3 until the daemon opens it, and
// closes it before it runs anything of the step.
func atGate(pid int) bool {
	l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/3")
	return err == nil && strings.HasPrefix(l, "pipe:")
}

type procInfo struct {
	pid, ppid int
	cmdline   []string
}

// canRun reports whether process pid can still run code of its own, and
// its start time (to know it again): not a zombie, not exiting, no SIGKILL
// pending. A step's process that was sent SIGKILL (the daemon kills what a
// step left when it ends, then lets the next step run) is dead to the
// step even while the kernel tears it down.
func canRun(pid int) (start string, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	i := strings.LastIndexByte(string(stat), ')')
	if err != nil || i < 0 || i+2 >= len(stat) {
		return "", false
	}
	f := strings.Fields(string(stat[i+2:])) // state, ppid, …, flags (f[6]), …, starttime (f[19])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return "", false
	}
	if flags, err := strconv.ParseUint(f[6], 10, 64); err != nil || flags&0x4 != 0 { // PF_EXITING
		return "", false
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return "", false
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		name, mask, _ := strings.Cut(line, ":")
		if name != "SigPnd" && name != "ShdPnd" {
			continue
		}
		if v, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64); err == nil && v&(1<<(9-1)) != 0 {
			return "", false // SIGKILL pending
		}
	}
	return f[19], true
}

// sample takes one look at /proc and returns the phases of the live steps.
//
// A look is not atomic: a step's process read early may end, and the
// run's next step be let run, before a later process is read. So a run
// seen with two steps alive is looked at again, after the whole pass:
// the steps whose processes are still the same and still alive then were
// alive together at the moment the last of them was read in the pass (a
// gate once opened stays open), which is what the invariant forbids.
func (m *monitor) sample(when string) []api.Phase {
	steps := map[string]map[int]api.Phase{} // run → seq → phase
	type stepProc struct {
		pid   int
		start string
	}
	procs := map[string]map[int][]stepProc{} // run → seq → its processes seen alive
	agents := map[int]procInfo{}
	for _, pid := range allPids() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		s := string(b)
		isStep, isAgent := strings.Contains(s, "\x00loopd-step:"), strings.Contains(s, m.agent)
		if !isStep && !isAgent {
			continue
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		i := strings.LastIndexByte(string(stat), ')')
		if err != nil || i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			continue
		}
		args := strings.Split(strings.TrimRight(s, "\x00"), "\x00")
		if isStep && atGate(pid) {
			// A step's wrapper waiting at its gate has run nothing of its
			// step (the daemon starts a run's next step's process while a
			// step runs): it is not a step alive.
			isStep = false
		}
		start, alive := canRun(pid)
		if isStep && alive {
			for j, a := range args {
				tag, ok := strings.CutPrefix(a, "loopd-step:")
				if !ok {
					continue
				}
				id, seqStr, _ := strings.Cut(tag, ":")
				seq, _ := strconv.Atoi(seqStr)
				if procs[id] == nil {
					procs[id] = map[int][]stepProc{}
				}
				procs[id][seq] = append(procs[id][seq], stepProc{pid, start})
				phase := api.Phase("")
				if j+1 < len(args) { // the status file: …/NNNN-<phase>.status
					base := strings.TrimSuffix(filepath.Base(args[j+1]), ".status")
					if _, p, ok := strings.Cut(base, "-"); ok {
						phase = api.Phase(p)
					}
				}
				if steps[id] == nil {
					steps[id] = map[int]api.Phase{}
				}
				steps[id][seq] = phase
				break
			}
		}
		if isAgent {
			f := strings.Fields(string(stat[i+2:]))
			ppid := 0
			if len(f) > 1 {
				ppid, _ = strconv.Atoi(f[1])
			}
			agents[pid] = procInfo{pid: pid, ppid: ppid, cmdline: args}
		}
	}
	// An agent's own forks (before they exec) share its argv: count only
	// agents whose parent is not an agent.
	perWS := map[string][]int{}
	for pid, p := range agents {
		if _, nested := agents[p.ppid]; nested {
			continue
		}
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
		if err != nil {
			continue
		}
		perWS[cwd] = append(perWS[cwd], pid)
	}

	for id, seqs := range steps {
		if len(seqs) < 2 {
			continue
		}
		for seq, ps := range procs[id] {
			still := false
			for _, p := range ps {
				if start, ok := canRun(p.pid); ok && start == p.start {
					still = true
				}
			}
			if !still {
				delete(seqs, seq) // ended during the pass: not alive with the others
			}
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples++
	var phases []api.Phase
	for id, seqs := range steps {
		if !m.runs[id] {
			continue
		}
		m.maxSteps = max(m.maxSteps, len(seqs))
		if len(seqs) > 1 {
			m.bad = append(m.bad, fmt.Sprintf("%s: run %s has %d steps alive at once: %v", orNow(when), id, len(seqs), seqs))
		}
		for _, p := range seqs {
			phases = append(phases, p)
		}
	}
	for ws, pids := range perWS {
		id, ok := m.wsRun[ws]
		if !ok {
			continue
		}
		m.maxAgents = max(m.maxAgents, len(pids))
		if len(pids) > 1 {
			m.bad = append(m.bad, fmt.Sprintf("%s: run %s has %d agents alive at once: pids %v", orNow(when), id, len(pids), pids))
		}
	}
	return phases
}

func orNow(when string) string {
	if when == "" {
		return time.Now().Format("15:04:05.000")
	}
	return when
}

func (m *monitor) violations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.bad)
}

func (m *monitor) stats() (samples, maxSteps, maxAgents int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.samples, m.maxSteps, m.maxAgents
}
