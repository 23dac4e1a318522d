package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// aheadProcesses lists the live processes of a run's step seq: the tag is
// a whole argument of the step's wrapper (and a process started ahead of
// its step is one, waiting at its gate).
func aheadProcesses(id string, seq int) []int {
	tag := []byte("\x00loopd-step:" + id + ":" + strconv.Itoa(seq) + "\x00")
	var pids []int
	for _, pid := range processesMentioning("loopd-step:" + id + ":" + strconv.Itoa(seq)) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && bytes.Contains(b, tag) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// While a step runs, the process of the step predicted after it waits at
// its gate, with nothing of that step run and no row for it. kill -9 of
// the daemon then: the waiting process exits by itself (its gate closed
// with the daemon), the step that ran is recorded once from its exit
// status, and the step that was never recorded leaves no file behind.
func TestKill9WithAStepStartedAhead(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"),
		`verify_command=while [ ! -f verify-go ]; do sleep 0.05; done; test -f done.txt && echo "ok  widget"`)
	id := e.start("goal")
	e.runningStep(id, 2) // the verification of iteration 1, the run's last step
	// The next iteration's implementation, started ahead: in case the
	// verification fails.
	eventually(t, "the process of step 3 started ahead", 10*time.Second, func() bool { return len(aheadProcesses(id, 3)) == 1 })
	ahead := aheadProcesses(id, 3)[0]
	stray := filepath.Join(e.home, "runs", id, "0003-implementation.log")
	eventually(t, "the log the waiting wrapper creates", 10*time.Second, func() bool { _, err := os.Stat(stray); return err == nil })
	if n := len(e.steps(id)); n != 2 {
		t.Fatalf("%d steps recorded while step 3 waits at its gate, want 2", n)
	}
	if inv := e.invocations(); len(inv) != 1 {
		t.Fatalf("the agent ran %d times before the crash, want 1 (the process started ahead runs nothing)", len(inv))
	}

	e.killDaemon()
	eventually(t, "the process started ahead to exit at its closed gate", 10*time.Second, func() bool { return !pidAlive(ahead) })
	e.release("verify-go")
	e.stepRecorded(id, 2)
	e.startDaemon()
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d, want 0:\n%s", code, e.daemonLog())
	}
	steps := e.steps(id)
	if len(steps) != 2 || steps[1].Status != api.StepSucceeded {
		t.Fatalf("steps = %+v; want the implementation and its verification", steps)
	}
	if inv := e.invocations(); len(inv) != 1 {
		t.Errorf("the agent ran %d times, want once", len(inv))
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("the log of step 3, never recorded, is still there (%v)", err)
	}
	if n := countType(e.events(id), "STEP_STARTED"); n != 2 {
		t.Errorf("%d STEP_STARTED events, want 2", n)
	}
}
