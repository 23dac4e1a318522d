package scheduler

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// openedOnlyWhenRecorded fails the test when a step is opened before its
// row is committed: a step's commands never run unless its row exists,
// however early its process was started.
func openedOnlyWhenRecorded(t *testing.T, h *harness, id *string) func(api.Phase, int) {
	return func(phase api.Phase, seq int) {
		steps, err := h.store.Steps(context.Background(), *id)
		if err != nil {
			t.Error(err)
			return
		}
		for _, st := range steps {
			if st.Seq == seq && st.Phase == phase && st.Status == api.StepRunning {
				return
			}
		}
		t.Errorf("step %s/%d was opened before its row was committed RUNNING", phase, seq)
	}
}

// index is the position of entry in trace, -1 when absent.
func index(trace []string, entry string) int { return slices.Index(trace, entry) }

func TestTheNextStepsProcessStartsWhileTheStepBeforeRuns(t *testing.T) {
	fx := newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{} })
	h := newHarness(t, fx)
	var id string
	fx.onOpen = openedOnlyWhenRecorded(t, h, &id)
	id = h.start("", "agent=command", "agent_command=agent", "max_iterations=2", "verify_command=true")
	run := h.drive(id, false)
	if run.Status != api.RunAborted || run.Reason != "max_iterations:2" {
		t.Fatalf("run %s %s: %s", run.Status, run.Reason, run.Description)
	}
	trace := fx.traced()
	steps := h.steps(id)
	if len(steps) != 4 {
		t.Fatalf("%d steps, want 4: %s", len(steps), statuses(steps))
	}
	for _, st := range steps[1:] {
		name := string(st.Phase) + "/" + strconv.Itoa(st.Seq)
		before := string(steps[st.Seq-2].Phase) + "/" + strconv.Itoa(st.Seq-1)
		started, ended := index(trace, "start "+name), index(trace, "end "+before)
		if started < 0 || ended < 0 || started > ended {
			t.Errorf("%s was not started while %s ran: %q", name, before, trace)
		}
		if n := strings.Count(strings.Join(trace, "\n")+"\n", "start "+name+"\n"); n != 1 {
			t.Errorf("%s started %d times: %q", name, n, trace)
		}
	}
	// The one started after the last step, which the run never took,
	// ran nothing and left no file.
	if index(trace, "abandon implementation/5") < 0 || index(trace, "open implementation/5") >= 0 {
		t.Errorf("the process started for a 5th step was not abandoned unopened: %q", trace)
	}
	if _, err := os.Stat(filepath.Join(h.s.opts.Home, "runs", id, "0005-implementation.log")); !os.IsNotExist(err) {
		t.Errorf("the abandoned step's log is left behind: %v", err)
	}
}

func TestAProcessStartedForAnotherPlanNeverRuns(t *testing.T) {
	// The implementation fails: the next step is the next iteration's
	// implementation, not the verification started ahead.
	fx := newFakeExec(t, func(phase api.Phase, seq int) fakeStep {
		if phase == api.PhaseImplementation && seq == 1 {
			return fakeStep{code: 1}
		}
		return fakeStep{}
	})
	h := newHarness(t, fx)
	var id string
	fx.onOpen = openedOnlyWhenRecorded(t, h, &id)
	id = h.start("", "agent=command", "agent_command=agent", "max_iterations=2", "verify_command=true", "max_consecutive_implementation_failures=0")
	run := h.drive(id, false)
	if run.Status != api.RunAborted {
		t.Fatalf("run %s %s: %s", run.Status, run.Reason, run.Description)
	}
	trace := fx.traced()
	if got, want := statuses(h.steps(id)), "implementation:FAILED implementation:SUCCEEDED verification:SUCCEEDED"; got != want {
		t.Fatalf("steps %s, want %s", got, want)
	}
	if index(trace, "start verification/2") < 0 || index(trace, "abandon verification/2") < 0 || index(trace, "open verification/2") >= 0 {
		t.Errorf("the verification started ahead was not abandoned unopened: %q", trace)
	}
	if index(trace, "start implementation/2") < index(trace, "abandon verification/2") {
		t.Errorf("the planned step was started before the wrong one was gone: %q", trace)
	}
	if _, err := os.Stat(filepath.Join(h.s.opts.Home, "runs", id, "0002-verification.log")); !os.IsNotExist(err) {
		t.Errorf("the abandoned step's log is left behind: %v", err)
	}
	for _, name := range []string{"implementation/1", "implementation/2", "verification/3"} {
		if index(trace, "open "+name) < 0 {
			t.Errorf("%s never ran: %q", name, trace)
		}
	}
}
