package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// verifyFails is a verification that always fails, like a test runner.
const verifyFails = `verify_command=echo "--- FAIL: TestWidget (0.00s)"; echo "FAIL"; exit 1`

// counters is what must be identical before and after any restart.
type counters struct {
	Status     api.RunStatus
	Iteration  int
	Steps      int
	Counters   api.Counters
	Usage      api.Usage
	Reported   string // Usage.ReportedCostUSD by value ("none" when null); Usage keeps it nil so the struct compares
	Conditions string
}

func (e *env) counters(id string) counters {
	e.t.Helper()
	r := e.status(id)
	var conds []string
	for _, c := range r.Conditions {
		p := "nil"
		if c.Progress != nil {
			p = strconv.FormatFloat(*c.Progress, 'f', 4, 64)
		}
		conds = append(conds, c.Type+":"+p+":"+strconv.FormatBool(c.Met))
	}
	reported := "none"
	if v, ok := r.Usage.ReportedCost(); ok {
		reported = strconv.FormatFloat(v, 'f', -1, 64)
	}
	u := r.Usage
	u.ReportedCostUSD = nil
	return counters{r.Status, r.Iteration, r.Steps, r.Counters, u, reported, strings.Join(conds, ",")}
}

// The most important test: kill -9 while the agent works after two
// verification failures; the restarted daemon adopts the still-running
// agent (it runs once), records its real exit, and the next verification
// failure ends the run with max_consecutive_failures:verification:3.
func TestKill9DuringAgentStepAdoptsIt(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=release", "FAKE_WAIT_ITERATION=3", "FAKE_COST=0.5"), verifyFails)
	id := e.start("goal")
	step := e.runningStep(id, 5) // iteration 3's implementation
	before := e.counters(id)
	if before.Counters.Verification != 2 {
		t.Fatalf("verification streak before the crash = %d, want 2", before.Counters.Verification)
	}

	e.killDaemon()
	if !pidAlive(step.Pid) {
		t.Fatal("kill -9 of the daemon killed the agent")
	}
	e.startDaemon()
	eventually(t, "STEP_ADOPTED", 10*time.Second, func() bool { return countType(e.events(id), "STEP_ADOPTED") == 1 })
	if after := e.counters(id); after != before {
		t.Errorf("counters changed across the restart:\nbefore %+v\nafter  %+v", before, after)
	}
	if !pidAlive(step.Pid) {
		t.Fatal("the restarted daemon killed the adopted agent")
	}
	e.release("release")
	if code := e.wait(id); code != 1 {
		t.Fatalf("wait exit %d, want 1 (FAILED)", code)
	}
	r := e.status(id)
	if r.Status != api.RunFailed || r.Reason != "max_consecutive_failures:verification:3" {
		t.Errorf("run = %s %q", r.Status, r.Reason)
	}
	inv := e.invocations()
	if len(inv) != 3 {
		t.Errorf("the agent ran %d times (%v), want exactly 3: never twice for one iteration", len(inv), inv)
	}
	steps := e.steps(id)
	if len(steps) != 6 {
		t.Fatalf("%d steps, want 6", len(steps))
	}
	if s := steps[4]; s.Status != api.StepSucceeded || s.ExitCode == nil || *s.ExitCode != 0 || reportedCost(s.Usage) != 0.5 {
		t.Errorf("adopted step = %+v; want its real outcome recorded", s)
	}
	evs := e.events(id)
	if n := countType(evs, "RUN_FAILED"); n != 1 {
		t.Errorf("%d RUN_FAILED events", n)
	}
	if n := countType(evs, "STEP_FINISHED"); n != 6 {
		t.Errorf("%d STEP_FINISHED events for 6 steps", n)
	}
	if reportedCost(r.Usage) != 1.5 {
		t.Errorf("cost %v, want 1.5: each of 3 agent runs counted exactly once", reportedCost(r.Usage))
	}
}

// kill -9 during verification; the verification ends while no daemon
// runs: its exit status, recorded by the step's own wrapper, is found on
// restart.
func TestKill9DuringVerificationRecordsItsOutcome(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"),
		`verify_command=while [ ! -f verify-go ]; do sleep 0.05; done; test -f done.txt && echo "ok  widget"`)
	id := e.start("goal")
	e.runningStep(id, 2)
	e.killDaemon()
	e.release("verify-go")
	e.stepRecorded(id, 2) // the verification ended with no daemon watching
	e.startDaemon()
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d, want 0", code)
	}
	steps := e.steps(id)
	if len(steps) != 2 || steps[1].Status != api.StepSucceeded || *steps[1].ExitCode != 0 {
		t.Errorf("steps = %+v; want the verification recorded SUCCEEDED from its status file", steps)
	}
	if n := countType(e.events(id), "STEP_INTERRUPTED"); n != 0 {
		t.Errorf("%d STEP_INTERRUPTED: the outcome was not lost", n)
	}
}

// When a step's outcome is really lost (the machine killed everything),
// it is INTERRUPTED, never counted as a failure, and its phase runs again.
func TestLostOutcomeIsInterruptedAndReruns(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=2", "FAKE_DONE_AT=2"), verifyDone)
	id := e.start("goal")
	step := e.runningStep(id, 3)
	before := e.counters(id)
	e.killDaemon()
	killGroup(step.Pid) // as if the machine had rebooted
	e.release("go-2")
	e.startDaemon()
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d, want 0", code)
	}
	steps := e.steps(id)
	var got []string
	for _, s := range steps {
		got = append(got, strconv.Itoa(s.Iteration)+string(s.Phase[0])+":"+string(s.Status))
	}
	want := "1i:SUCCEEDED 1v:FAILED 2i:INTERRUPTED 2i:SUCCEEDED 2v:SUCCEEDED"
	if strings.Join(got, " ") != want {
		t.Errorf("steps %s\nwant  %s", strings.Join(got, " "), want)
	}
	if n := countType(e.events(id), "STEP_INTERRUPTED"); n != 1 {
		t.Errorf("%d STEP_INTERRUPTED events, want 1", n)
	}
	if before.Counters.Implementation != 0 || e.status(id).Counters.Implementation != 0 {
		t.Error("an interrupted step counted as an implementation failure")
	}
}

// A graceful stop lets the step in flight finish: when the daemon dies
// while that step runs and its outcome is lost, the restarted daemon runs
// its phase again, as after any lost outcome, and stops the run after it —
// it does not stop with the step never finished.
func TestGracefulStopLetsALostStepRunAgain(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=2"), verifyFails)
	id := e.start("goal")
	step := e.runningStep(id, 3)
	e.must("stop", id)
	if r := e.status(id); r.Status != api.RunRunning {
		t.Fatalf("a graceful stop ended the run before its step finished: %s", r.Status)
	}
	e.killDaemon()
	killGroup(step.Pid) // the step's outcome is lost
	e.release("go-2")
	e.startDaemon()
	if code := e.wait(id); code != 3 {
		t.Fatalf("wait exit %d, want 3 (INTERRUPTED)", code)
	}
	var got []string
	for _, s := range e.steps(id) {
		got = append(got, strconv.Itoa(s.Iteration)+string(s.Phase[0])+":"+string(s.Status))
	}
	if want := "1i:SUCCEEDED 1v:FAILED 2i:INTERRUPTED 2i:SUCCEEDED"; strings.Join(got, " ") != want {
		t.Errorf("steps %s\nwant  %s", strings.Join(got, " "), want)
	}
	if r := e.status(id); r.Status != api.RunInterrupted || r.Reason != "user_stop" {
		t.Errorf("run %s %s, want INTERRUPTED user_stop", r.Status, r.Reason)
	}
}

func killGroup(pgid int) {
	for _, pid := range processesInGroup(pgid) {
		_ = syscallKill(pid)
	}
	for range 100 {
		if !groupAlive(pgid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A restart at every point of a multi-iteration run leaves identical
// counters: the run is parked inside each iteration's agent step, the
// daemon is killed and restarted, and every derived number must match.
func TestRestartAtEveryPointKeepsCounters(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_DONE_AT=4", "FAKE_COST=0.25"), verifyDone,
		"max_cost=100", "max_tokens=1000000", "max_consecutive_verification_failures=5")
	id := e.start("goal")
	for it := 1; it <= 4; it++ {
		e.runningStep(id, 2*it-1)
		before := e.counters(id)
		if it%2 == 0 {
			e.killDaemon()
		} else {
			e.stopDaemon() // a clean shutdown leaves the step running too
		}
		e.startDaemon()
		e.runningStep(id, 2*it-1)
		if after := e.counters(id); after != before {
			t.Errorf("iteration %d: counters changed across a restart:\nbefore %+v\nafter  %+v", it, before, after)
		}
		e.release("go-" + strconv.Itoa(it))
	}
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	final := e.status(id)
	if final.Iteration != 4 || reportedCost(final.Usage) != 1.0 || final.Counters.Verification != 0 {
		t.Errorf("final = iteration %d, cost %v, counters %+v", final.Iteration, reportedCost(final.Usage), final.Counters)
	}
	if n := len(e.invocations()); n != 4 {
		t.Errorf("the agent ran %d times, want 4", n)
	}
	if n := countType(e.events(id), "STEP_ADOPTED"); n != 4 {
		t.Errorf("%d STEP_ADOPTED, want 4", n)
	}
}

func TestPauseSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_DONE_AT=2"), verifyDone)
	id := e.start("goal")
	e.runningStep(id, 1)
	e.must("pause", id)
	e.release("go-1")
	eventually(t, "PAUSED", 10*time.Second, func() bool { return e.status(id).Status == api.RunPaused })
	steps := len(e.steps(id))
	e.killDaemon()
	e.startDaemon()
	// Another run, in another workspace, runs: the restarted daemon has
	// recovered and claims runs, and has not resumed the paused one.
	other := t.TempDir()
	e.writeFileIn(other, ".loop/config", "agent=command\nagent_command=true\nmax_iterations=1\n")
	oid := e.start("-C", other, "other goal")
	if code := e.wait(oid); code != 2 {
		t.Fatalf("the other run: wait exit %d", code)
	}
	if r := e.status(id); r.Status != api.RunPaused || r.Steps != steps {
		t.Fatalf("after restart: %s with %d steps; want PAUSED with %d", r.Status, r.Steps, steps)
	}
	e.release("go-2")
	e.must("resume", id)
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	if r := e.status(id); r.Iteration != 2 {
		t.Errorf("iteration %d, want 2", r.Iteration)
	}
}

// resume keeps every counter and budget: a run that spent its budget ends
// again at once unless the budget is raised, and the spending adds up.
// Each agent run costs $0.60 at claude-sonnet-4-5 prices (100k input at
// $3/M plus 20k output at $15/M); max_cost uses that priced cost.
func TestResumeKeepsTheBudget(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_INPUT=100000", "FAKE_OUTPUT=20000", "FAKE_COST=9"), verifyFails,
		"max_cost=1", "max_consecutive_verification_failures=0")
	id := e.start("goal")
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d, want 2", code)
	}
	r := e.status(id)
	if r.Reason != "max_cost:1.00" || len(e.invocations()) != 2 {
		t.Fatalf("run = %q after %d agent runs; want max_cost:1.00 after 2 ($1.20 ≥ $1)", r.Reason, len(e.invocations()))
	}
	e.must("resume", id)
	if code := e.wait(id); code != 2 {
		t.Fatalf("resumed without a higher budget: exit %d, want 2 at once", code)
	}
	if n := len(e.invocations()); n != 2 {
		t.Errorf("resume without a higher budget ran the agent again (%d runs)", n)
	}
	e.must("resume", id, "--set", "max_cost=2")
	if code := e.wait(id); code != 2 {
		t.Fatalf("exit %d", code)
	}
	r = e.status(id)
	if r.Reason != "max_cost:2.00" || len(e.invocations()) != 4 || r.Usage.CostUSD < 2.3999 || r.Usage.CostUSD > 2.4001 {
		t.Errorf("after raising: %q, %d agent runs, $%.4f; want max_cost:2.00 after 4 runs ($2.40)", r.Reason, len(e.invocations()), r.Usage.CostUSD)
	}
	if reportedCost(r.Usage) != 36 {
		t.Errorf("reported cost %v, want 36 (4 × 9)", reportedCost(r.Usage))
	}
	if r := e.loopctl("resume", id, "--set", "max_cost=lots"); r.code != 64 || !strings.Contains(r.stderr, "max_cost") {
		t.Errorf("resume with a bad value: exit %d %s", r.code, r.stderr)
	}
}

func TestVerificationFailureStreakFailsTheRun(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent(), verifyFails)
	id := e.start("goal")
	if code := e.wait(id); code != 1 {
		t.Fatalf("wait exit %d, want 1", code)
	}
	r := e.status(id)
	if r.Reason != "max_consecutive_failures:verification:3" || !strings.Contains(r.Description, "3") {
		t.Errorf("run = %q %q", r.Reason, r.Description)
	}
	verifications := 0
	for _, s := range e.steps(id) {
		if s.Phase == api.PhaseVerification {
			verifications++
		}
	}
	if verifications != 3 {
		t.Errorf("%d verification steps, want exactly 3", verifications)
	}
	evs := e.events(id)
	if n := countType(evs, "RUN_FAILED"); n != 1 {
		t.Errorf("%d RUN_FAILED events", n)
	}
	for _, ev := range evs {
		if ev.Type == "RUN_FAILED" {
			var p map[string]any
			_ = json.Unmarshal(ev.Payload, &p)
			if p["reason"] != "max_consecutive_failures:verification:3" {
				t.Errorf("RUN_FAILED payload = %v", p)
			}
		}
	}
	// The postmortem is written from the persisted history.
	pm := e.must("postmortem", id)
	if !strings.Contains(pm, "max_consecutive_failures:verification:3") || !strings.Contains(pm, "TestWidget") {
		t.Errorf("postmortem:\n%s", pm)
	}
}

func TestReviewFailureLimit(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent(), `review_command=echo "CHANGES REQUESTED: needs tests"`, verifyDone,
		"max_consecutive_review_failures=2")
	id := e.start("goal")
	if code := e.wait(id); code != 1 {
		t.Fatalf("wait exit %d, want 1", code)
	}
	if r := e.status(id); r.Reason != "max_consecutive_failures:review:2" {
		t.Errorf("reason %q", r.Reason)
	}
	var phases []string
	for _, s := range e.steps(id) {
		phases = append(phases, string(s.Phase))
	}
	if strings.Join(phases, ",") != "implementation,review,implementation,review" {
		t.Errorf("phases %v: a failed review must go back to implementation, and no verification after it", phases)
	}
	// The reviewer's words reach the next prompt.
	p, _ := os.ReadFile(filepath.Join(e.ws, ".prompt-3"))
	if !strings.Contains(string(p), "needs tests") {
		t.Errorf("second prompt lacks the review:\n%s", p)
	}
}

// A usage limit puts the run in WAITING until the reset time; the same
// iteration then runs again, counting neither an iteration nor a failure.
func TestUsageLimitWaitsAndResumes(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_RATE_LIMIT_ONCE=3", "FAKE_DONE_AT=1"), verifyDone,
		"max_consecutive_implementation_failures=1")
	id := e.start("goal")
	var r api.Run
	eventually(t, "WAITING", 10*time.Second, func() bool { r = e.status(id); return r.Status == api.RunWaiting })
	if r.WaitUntil.IsZero() || r.Counters.Implementation != 0 || r.Iteration != 1 {
		t.Errorf("waiting run = until %v, counters %+v, iteration %d", r.WaitUntil, r.Counters, r.Iteration)
	}
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d, want 0", code)
	}
	steps := e.steps(id)
	if len(steps) != 3 || steps[0].Iteration != 1 || steps[1].Iteration != 1 || steps[1].Phase != api.PhaseImplementation {
		t.Errorf("steps = %+v; want the limited attempt, then iteration 1 again", steps)
	}
	evs := e.events(id)
	if countType(evs, "RUN_WAITING") != 1 || countType(evs, "RUN_RESUMED") != 1 {
		t.Errorf("events %v", eventTypes(evs))
	}
	if r := e.status(id); r.Iteration != 1 || r.Reason != "completed:promise+verify" {
		t.Errorf("final: iteration %d %q", r.Iteration, r.Reason)
	}
}

func TestDaemonStopKillSteps(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_DONE_AT=1"), verifyDone)
	id := e.start("goal")
	step := e.runningStep(id, 1)
	e.must("daemon", "stop", "--kill-steps")
	<-e.exited
	eventually(t, "the step to be killed", 10*time.Second, func() bool { return !groupAlive(step.Pid) })
	e.startDaemon()
	e.release("go-1")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	steps := e.steps(id)
	if steps[0].Status != api.StepCanceled || steps[1].Phase != api.PhaseImplementation || steps[1].Iteration != 1 {
		t.Errorf("steps %+v: the killed step is CANCELED and its phase runs again", steps)
	}
}

// stepRecorded waits until step seq of run id has recorded its exit status
// in the run's exits file, written by the step's own shell as it ends.
func (e *env) stepRecorded(id string, seq int) {
	e.t.Helper()
	want := "loopd-step:" + id + ":" + strconv.Itoa(seq) + " exit "
	eventually(e.t, fmt.Sprintf("step %d to record its exit status", seq), 30*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(e.home, "runs", id, "exits"))
		return strings.Contains(string(b), want)
	})
}

// writeFileIn writes a file under dir (another workspace than e.ws).
func (e *env) writeFileIn(dir, name, content string) {
	e.t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}
