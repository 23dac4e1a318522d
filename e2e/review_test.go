package e2e

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// slowTermAgent takes a while to exit on SIGTERM, like an agent writing
// its final usage, and records that it got the signal.
const slowTermAgent = `agent_command=trap 'echo got TERM; sleep 2; echo bye; exit 143' TERM; echo working; while :; do sleep 0.05; done`

// stop --now that a crash interrupts is still a stop: after the restart
// the step is CANCELED (never a failure) and the run INTERRUPTED.
func TestStopNowSurvivesACrash(t *testing.T) {
	e := newEnv(t)
	e.startDaemon("--kill-grace", "30s")
	e.config("agent=command", slowTermAgent, "max_consecutive_implementation_failures=1")
	id := e.start("goal")
	e.runningStep(id, 1)
	e.logShows(id, 1, "working") // its TERM handler is installed
	e.must("stop", id, "--now")
	e.logShows(id, 1, "got TERM") // the agent is in its TERM handler
	e.killDaemon()
	e.startDaemon("--kill-grace", "30s")
	if code := e.wait(id); code != 3 {
		t.Fatalf("wait exit %d, want 3 (INTERRUPTED)", code)
	}
	r := e.status(id)
	if r.Reason != "user_stop" || r.Counters.Implementation != 0 {
		t.Errorf("run = %s %q, implementation streak %d; want INTERRUPTED user_stop and no failure", r.Status, r.Reason, r.Counters.Implementation)
	}
	steps := e.steps(id)
	if len(steps) != 1 || steps[0].Status != api.StepCanceled {
		t.Errorf("steps = %+v; want the one step CANCELED", steps)
	}
	// The agent got its grace period: its TERM handler finished.
	if out := e.must("logs", id, "--step", "1"); !strings.Contains(out, "bye") {
		t.Errorf("the agent was killed before its TERM handler finished:\n%s", out)
	}
}

// A stop --now that was recorded but not carried out (the daemon died in
// between) is carried out by the next daemon: it kills the adopted step.
func TestStopNowRecordedBeforeACrashIsCarriedOut(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=never"))
	id := e.start("goal")
	step := e.runningStep(id, 1)
	e.killDaemon()
	// What the API commits for `loopctl stop --now`, with no daemon left
	// to act on it.
	db, err := sql.Open("sqlite", filepath.Join(e.home, "loopd.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE runs SET stop_request = 'now' WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	db.Close()
	e.startDaemon()
	if code := e.wait(id); code != 3 {
		t.Fatalf("wait exit %d, want 3", code)
	}
	if s := e.steps(id); len(s) != 1 || s[0].Status != api.StepCanceled {
		t.Errorf("steps = %+v; want the adopted step killed and CANCELED", s)
	}
	if r := e.status(id); !strings.Contains(r.Description, "killed") {
		t.Errorf("description %q", r.Description)
	}
	eventually(t, "the step's processes to be gone", 10*time.Second, func() bool { return !groupAlive(step.Pid) })
}

// max_duration ends the run on time even in the middle of a long step: the
// step is stopped (CANCELED, not a failure) and the run ABORTED.
func TestMaxDurationStopsALongStep(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=never"), "max_duration=2s", "max_consecutive_implementation_failures=1")
	id := e.start("goal")
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d, want 2", code)
	}
	r := e.status(id)
	if r.Reason != "max_duration:2s" || r.Counters.Implementation != 0 {
		t.Errorf("run = %q, streak %d", r.Reason, r.Counters.Implementation)
	}
	if s := e.steps(id)[0]; s.Status != api.StepCanceled || !strings.Contains(s.Error, "max_duration") {
		t.Errorf("step = %s %q", s.Status, s.Error)
	}
}

// SIGTERM never waits for a postmortem command.
func TestShutdownDoesNotWaitForPostmortemCommand(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"), "postmortem_command=echo started; sleep 60")
	id := e.start("goal")
	e.wait(id)
	logPath := filepath.Join(e.home, "runs", id, "postmortem-command.log")
	eventually(t, "the postmortem command to start", 10*time.Second, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "started")
	})
	e.stopDaemon() // fails the test if loopd takes 20s
}

// wait goes on across a daemon restart.
func TestWaitSurvivesADaemonRestart(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go", "FAKE_DONE_AT=1"))
	id := e.start("goal")
	e.runningStep(id, 1)
	done := make(chan result, 1)
	go func() { done <- e.loopctl("wait", id) }()
	e.waiting(1) // the wait reached the daemon
	e.killDaemon()
	time.Sleep(500 * time.Millisecond) // the daemon stays down a while (the outage wait rides out)
	e.startDaemon()
	e.waiting(2) // the wait came back to the new daemon
	e.release("go")
	select {
	case r := <-done:
		if r.code != 0 {
			t.Errorf("wait across a restart: exit %d %s", r.code, r.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("wait did not return")
	}
}

// Commands that exec away their shell or set their own EXIT trap are
// still adopted after a crash, and run once.
func TestExecAndExitTrapCommandsSurviveACrash(t *testing.T) {
	for _, tc := range []struct{ name, prefix string }{
		{"exec", "exec "},
		{"own EXIT trap", "trap 'rm -f scratch' EXIT; "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.startDaemon()
			agent := strings.TrimPrefix(e.fakeAgent("FAKE_WAIT_FILE=go", "FAKE_DONE_AT=1"), "agent_command=")
			e.config("agent=command", "agent_command="+tc.prefix+agent)
			id := e.start("goal")
			e.runningStep(id, 1)
			e.killDaemon()
			e.startDaemon()
			e.release("go")
			if code := e.wait(id); code != 0 {
				t.Fatalf("wait exit %d", code)
			}
			if n := len(e.invocations()); n != 1 {
				t.Errorf("the agent ran %d times, want once", n)
			}
			if s := e.steps(id); len(s) != 1 || s[0].Status != api.StepSucceeded {
				t.Errorf("steps = %+v; want the adopted step recorded SUCCEEDED", s)
			}
		})
	}
}

// A pause asked for while a finished step's conditions are evaluated
// (here a slow custom script) holds the run before the next step.
func TestPauseDuringEvaluation(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent())
	e.writeFile("slow.sh", "#!/bin/sh\ntouch evaluating; sleep 2; exit 1\n", 0o755)
	e.writeFile(".loop/stop.json", `{"success_conditions":[{"type":"custom_script","script":"slow.sh"}]}`, 0o644)
	id := e.start("goal")
	eventually(t, "the evaluation to start", 20*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(e.ws, "evaluating"))
		return err == nil
	})
	e.must("pause", id)
	eventually(t, "PAUSED", 20*time.Second, func() bool { return e.status(id).Status == api.RunPaused })
	if r := e.status(id); r.Steps != 1 {
		t.Errorf("%d steps; the pause must hold the run before the next step", r.Steps)
	}
}

// A stop --now that a crash interrupted during its grace period is carried
// out by the next daemon.
func TestStopNowInterruptedDuringGrace(t *testing.T) {
	e := newEnv(t)
	e.startDaemon("--kill-grace", "30s")
	// It notes TERM and goes on: only the SIGKILL after the grace ends it.
	e.config("agent=command", `agent_command=trap 'echo got TERM' TERM; echo working; while :; do sleep 0.05; done`)
	id := e.start("goal")
	step := e.runningStep(id, 1)
	e.logShows(id, 1, "working") // its TERM handler is installed
	e.must("stop", id, "--now")
	e.logShows(id, 1, "got TERM") // TERM sent, grace running
	e.killDaemon()
	e.startDaemon("--kill-grace", "1s")
	if code := e.wait(id); code != 3 {
		t.Fatalf("wait exit %d, want 3", code)
	}
	if s := e.steps(id); len(s) != 1 || s[0].Status != api.StepCanceled {
		t.Errorf("steps = %+v; want the step CANCELED", s)
	}
	eventually(t, "the step's processes to be gone", 10*time.Second, func() bool { return !groupAlive(step.Pid) })
}

// wait rides out several daemon restarts, not just one.
func TestWaitSurvivesTwoRestarts(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go", "FAKE_DONE_AT=1"))
	id := e.start("goal")
	e.runningStep(id, 1)
	done := make(chan result, 1)
	go func() { done <- e.loopctl("wait", id) }()
	for i := range 2 {
		e.waiting(i + 1) // the wait is connected to this daemon
		e.killDaemon()
		time.Sleep(300 * time.Millisecond) // the daemon stays down a while (the outage wait rides out)
		e.startDaemon()
	}
	e.waiting(3)
	e.release("go")
	select {
	case r := <-done:
		if r.code != 0 {
			t.Errorf("wait across two restarts: exit %d %s", r.code, r.stderr)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("wait did not return")
	}
}

// max_duration counts each step's time once. (The runner's history kept
// every step it had finished as still running, so the elapsed time it
// evaluated grew quadratically and ended runs after a fraction of their
// max_duration.)
func TestMaxDurationCountsEachStepOnce(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", "agent_command=sleep 0.3", "max_duration=3s", "max_iterations=100")
	id := e.start("goal")
	e.wait(id)
	if r := e.status(id); r.Reason != "max_duration:3s" {
		t.Fatalf("run ended %s %q, want max_duration:3s", r.Status, r.Reason)
	}
	var ms int64
	steps := e.steps(id)
	for _, s := range steps {
		ms += s.DurationMS
	}
	// The run ends once its steps have taken 3s; with each step counted
	// k times it ended after four steps, 1.2s of them.
	if ms < 2500 {
		t.Errorf("the run ended after %d steps taking %d ms in all, want about 3000 ms", len(steps), ms)
	}
}

// logShows waits until step seq's output shows text.
func (e *env) logShows(id string, seq int, text string) {
	e.t.Helper()
	logs, _ := filepath.Glob(filepath.Join(e.home, "runs", id, fmt.Sprintf("%04d-*.log", seq)))
	if len(logs) != 1 {
		e.t.Fatalf("step %d of run %s: log files %v", seq, id, logs)
	}
	eventually(e.t, "the step's output to show "+text, 30*time.Second, func() bool {
		b, _ := os.ReadFile(logs[0])
		return strings.Contains(string(b), text)
	})
}

// waiting waits until the daemons of this test have received n requests
// of loopctl wait (their debug log says so).
func (e *env) waiting(n int) {
	e.t.Helper()
	eventually(e.t, fmt.Sprintf("loopctl wait's request #%d to reach the daemon", n), 30*time.Second, func() bool {
		return strings.Count(e.daemonLog(), "a client waits for the run to end") >= n
	})
}
