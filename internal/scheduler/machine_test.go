package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// The run state machine, table-driven: each case scripts what its steps
// do (exit codes, output) through the fake executor and checks where the
// run ends, why, and the steps it ran. No process runs; the database is
// real.
func TestStateMachine(t *testing.T) {
	const promise = "<promise>COMPLETE</promise>"
	ok := func(api.Phase, int) fakeStep { return fakeStep{} }
	tests := []struct {
		name   string
		sets   []string
		script func(phase api.Phase, seq int) fakeStep
		status api.RunStatus
		reason string
		desc   string // a part of the run's description
		steps  string // the steps' phase:status, in order
	}{
		{
			name:   "max_iterations ends the run after exactly N iterations",
			sets:   []string{"max_iterations=3", "verify_command=true"},
			script: ok,
			status: api.RunAborted, reason: "max_iterations:3",
			steps: "implementation:SUCCEEDED verification:SUCCEEDED implementation:SUCCEEDED verification:SUCCEEDED " +
				"implementation:SUCCEEDED verification:SUCCEEDED",
		},
		{
			name: "the promise and a passing verification complete the run",
			sets: []string{"max_iterations=10", "verify_command=true", "completion=promise,verify"},
			script: func(phase api.Phase, seq int) fakeStep {
				if phase == api.PhaseImplementation && seq == 3 {
					return fakeStep{output: "all done\n" + promise + "\n"}
				}
				return fakeStep{}
			},
			status: api.RunCompleted, reason: "completed:promise+verify", desc: "in iteration 2",
			steps: "implementation:SUCCEEDED verification:SUCCEEDED implementation:SUCCEEDED verification:SUCCEEDED",
		},
		{
			name: "the promise with a failing verification does not complete",
			sets: []string{"max_iterations=2", "verify_command=false", "completion=promise,verify",
				"max_consecutive_verification_failures=0"},
			script: func(phase api.Phase, seq int) fakeStep {
				if phase == api.PhaseVerification {
					return fakeStep{code: 1, output: "FAIL\n"}
				}
				return fakeStep{output: promise + "\n"}
			},
			status: api.RunAborted, reason: "max_iterations:2",
			steps: "implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:FAILED",
		},
		{
			name: "a streak of verification failures fails the run",
			sets: []string{"max_iterations=10", "verify_command=false", "max_consecutive_verification_failures=2"},
			script: func(phase api.Phase, seq int) fakeStep {
				if phase == api.PhaseVerification {
					return fakeStep{code: 1}
				}
				return fakeStep{}
			},
			status: api.RunFailed, reason: "max_consecutive_failures:verification:2",
			steps: "implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:FAILED",
		},
		{
			name: "a success between failures resets the streak",
			sets: []string{"max_iterations=4", "verify_command=x", "max_consecutive_verification_failures=2"},
			script: func(phase api.Phase, seq int) fakeStep {
				if phase == api.PhaseVerification && seq != 4 {
					return fakeStep{code: 1}
				}
				return fakeStep{}
			},
			status: api.RunFailed, reason: "max_consecutive_failures:verification:2",
			steps: "implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:SUCCEEDED " +
				"implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:FAILED",
		},
		{
			name: "failing tests going 5, 4, 3, 2, 1, 0 is progress, not a streak (progress_resets_streak default)",
			sets: []string{"max_iterations=10", "verify_command=tests", "completion=verify"},
			script: func(phase api.Phase, seq int) fakeStep {
				if phase == api.PhaseVerification {
					return unittestRun(5 - (seq/2 - 1)) // seq 2, 4, …: 5, 4, 3, 2, 1, 0 failing
				}
				return fakeStep{}
			},
			status: api.RunCompleted, reason: "completed:verify",
			steps: strings.Repeat("implementation:SUCCEEDED verification:FAILED ", 5) +
				"implementation:SUCCEEDED verification:SUCCEEDED",
		},
		{
			name: "failing tests that do not fall still fail after exactly 3",
			sets: []string{"max_iterations=10", "verify_command=tests", "completion=verify"},
			script: func(phase api.Phase, seq int) fakeStep {
				if phase == api.PhaseVerification {
					return unittestRun(5)
				}
				return fakeStep{}
			},
			status: api.RunFailed, reason: "max_consecutive_failures:verification:3",
			steps: strings.TrimSpace(strings.Repeat("implementation:SUCCEEDED verification:FAILED ", 3)),
		},
		{
			name: "a rise then a fall restarts the streak only on the fall",
			sets: []string{"max_iterations=10", "verify_command=tests", "completion=verify"},
			script: func(phase api.Phase, seq int) fakeStep {
				if phase == api.PhaseVerification {
					// 5, 6 (streak 2), 4 (restarts: 1), 4 (2), 4 (3: fails)
					return unittestRun([]int{5, 6, 4, 4, 4}[seq/2-1])
				}
				return fakeStep{}
			},
			status: api.RunFailed, reason: "max_consecutive_failures:verification:3",
			steps: strings.TrimSpace(strings.Repeat("implementation:SUCCEEDED verification:FAILED ", 5)),
		},
		{
			name: "progress_resets_streak=false counts every failure, falling or not",
			sets: []string{"max_iterations=10", "verify_command=tests", "completion=verify", "progress_resets_streak=false"},
			script: func(phase api.Phase, seq int) fakeStep {
				if phase == api.PhaseVerification {
					return unittestRun(5 - (seq/2 - 1))
				}
				return fakeStep{}
			},
			status: api.RunFailed, reason: "max_consecutive_failures:verification:3",
			steps: strings.TrimSpace(strings.Repeat("implementation:SUCCEEDED verification:FAILED ", 3)),
		},
		{
			name: "a failure whose tests could not be counted is never progress",
			sets: []string{"max_iterations=10", "verify_command=tests", "completion=verify"},
			script: func(phase api.Phase, seq int) fakeStep {
				if phase == api.PhaseVerification && seq == 2 {
					return unittestRun(5)
				}
				if phase == api.PhaseVerification {
					return fakeStep{code: 1, output: "segmentation fault\n"}
				}
				return fakeStep{}
			},
			status: api.RunFailed, reason: "max_consecutive_failures:verification:3",
			steps: strings.TrimSpace(strings.Repeat("implementation:SUCCEEDED verification:FAILED ", 3)),
		},
		{
			name: "a failed implementation skips verification and counts toward its streak",
			sets: []string{"max_iterations=10", "verify_command=true", "max_consecutive_implementation_failures=2"},
			script: func(phase api.Phase, seq int) fakeStep {
				return fakeStep{code: 2, output: "agent crashed\n"}
			},
			status: api.RunFailed, reason: "max_consecutive_failures:implementation:2",
			steps: "implementation:FAILED implementation:FAILED",
		},
		{
			name: "a review that does not approve is a failure; one that does completes",
			sets: []string{"max_iterations=5", "review_command=reviewer", "completion=review",
				"max_consecutive_review_failures=3"},
			script: func(phase api.Phase, seq int) fakeStep {
				if phase == api.PhaseReview && seq == 2 {
					return fakeStep{output: "needs work\n"}
				}
				if phase == api.PhaseReview {
					return fakeStep{output: "LGTM\nAPPROVED\n"}
				}
				return fakeStep{}
			},
			status: api.RunCompleted, reason: "completed:review",
			steps: "implementation:SUCCEEDED review:FAILED implementation:SUCCEEDED review:SUCCEEDED",
		},
		{
			name: "an agent's usage limit makes the run wait",
			sets: []string{"max_iterations=5"},
			script: func(phase api.Phase, seq int) fakeStep {
				return fakeStep{code: 1, output: "Claude AI usage limit reached|1000000000\n"}
			},
			status: api.RunWaiting, reason: "usage_limit",
			steps: "implementation:FAILED",
		},
		{
			name: "a question makes the run wait for an answer, with no verification and no failure",
			sets: []string{"max_iterations=5", "verify_command=false", "max_consecutive_implementation_failures=1"},
			script: func(phase api.Phase, seq int) fakeStep {
				return fakeStep{output: "I found two schemas.\n<question>Migrate the old one or drop it?</question>\n"}
			},
			status: api.RunWaiting, reason: "needs_answer", desc: "the agent asks: Migrate the old one or drop it?",
			steps: "implementation:SUCCEEDED",
		},
		{
			name: "a question quoted in prose is no question",
			sets: []string{"max_iterations=1"},
			script: func(phase api.Phase, seq int) fakeStep {
				return fakeStep{output: "I could ask <question>why?</question> but I will not\n"}
			},
			status: api.RunAborted, reason: "max_iterations:1",
			steps: "implementation:SUCCEEDED",
		},
		{
			name: "a step that cannot start fails without running",
			sets: []string{"max_iterations=5", "max_consecutive_implementation_failures=1"},
			script: func(phase api.Phase, seq int) fakeStep {
				return fakeStep{startErr: errors.New("fork: resource temporarily unavailable")}
			},
			status: api.RunFailed, reason: "max_consecutive_failures:implementation:1",
			steps: "implementation:FAILED",
		},
		{
			name: "a step whose outcome is lost runs again and is not counted",
			sets: []string{"max_iterations=2", "max_consecutive_implementation_failures=1"},
			script: func(phase api.Phase, seq int) fakeStep {
				return fakeStep{lost: seq == 1}
			},
			status: api.RunAborted, reason: "max_iterations:2",
			steps: "implementation:INTERRUPTED implementation:SUCCEEDED implementation:SUCCEEDED",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFakeExec(t, tt.script)
			h := newHarness(t, fx)
			id := h.start("", append([]string{"agent=command", "agent_command=agent"}, tt.sets...)...)
			run := h.drive(id, false)
			got := statuses(h.steps(id))
			if run.Status != tt.status || run.Reason != tt.reason || got != tt.steps || !strings.Contains(run.Description, tt.desc) {
				t.Fatalf("run %s %q (%s)\nsteps %s\nwant  %s %q, steps %s", run.Status, run.Reason, run.Description, got,
					tt.status, tt.reason, tt.steps)
			}
		})
	}
}

// unittestRun is a verification step's `python -m unittest` output with
// failing of five tests failing (exit 1), or all passing (exit 0).
func unittestRun(failing int) fakeStep {
	var b strings.Builder
	for i := range failing {
		fmt.Fprintf(&b, "======================================================================\n"+
			"FAIL: test_%d (tests.test_calc.TestCalc.test_%d)\n"+
			"----------------------------------------------------------------------\n"+
			"AssertionError: 2 != 3\n\n", i, i)
	}
	b.WriteString("----------------------------------------------------------------------\nRan 5 tests in 0.001s\n\n")
	if failing == 0 {
		b.WriteString("OK\n")
		return fakeStep{output: b.String()}
	}
	fmt.Fprintf(&b, "FAILED (failures=%d)\n", failing)
	return fakeStep{code: 1, output: b.String()}
}

func TestStateMachineRequests(t *testing.T) {
	tests := []struct {
		name    string
		request func(h *harness, id string)
		hold    bool
		status  api.RunStatus
		reason  string
		desc    string
		steps   string
	}{
		{
			name:    "a pause applies after the current step",
			request: func(h *harness, id string) { h.s.Pause(context.Background(), id) },
			status:  api.RunPaused, steps: "implementation:SUCCEEDED",
		},
		{
			name:    "a graceful stop lets the current step finish",
			request: func(h *harness, id string) { h.s.Stop(context.Background(), id, false) },
			status:  api.RunInterrupted, reason: "user_stop", desc: "after the current step",
			steps: "implementation:SUCCEEDED",
		},
		{
			name:    "stop --now kills the running step",
			hold:    true,
			request: func(h *harness, id string) { h.s.Stop(context.Background(), id, true) },
			status:  api.RunInterrupted, reason: "user_stop", desc: "the running step was killed",
			steps: "implementation:CANCELED",
		},
		{
			name:    "a user signal ends the run through its condition",
			request: func(h *harness, id string) { h.s.Signal(context.Background(), id) },
			status:  api.RunCompleted, reason: "condition:user_signal",
			steps: "implementation:SUCCEEDED",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h *harness
			var id string
			fx := newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{hold: tt.hold} })
			if tt.hold {
				go func() {
					<-fx.held
					tt.request(h, id)
				}()
			} else {
				fx.onOpen = func(api.Phase, int) { tt.request(h, id) }
			}
			h = newHarness(t, fx)
			dir := t.TempDir()
			stopFile := filepath.Join(dir, "stop.json")
			os.WriteFile(stopFile, []byte(`{"success_conditions":[{"type":"user_signal"}]}`), 0o600)
			id = h.start(dir, "agent=command", "agent_command=agent", "max_iterations=5", "stop_file="+stopFile)
			run := h.drive(id, false)
			got := statuses(h.steps(id))
			if run.Status != tt.status || run.Reason != tt.reason || got != tt.steps || !strings.Contains(run.Description, tt.desc) {
				t.Fatalf("run %s %q (%s), steps %s; want %s %q, steps %s", run.Status, run.Reason, run.Description, got,
					tt.status, tt.reason, tt.steps)
			}
		})
	}
}

// A run resumed (or recovered) between steps re-checks its limits before
// anything runs: a limit that was not raised ends it again at once.
func TestResumeAtTheLimitEndsAgainWithoutAStep(t *testing.T) {
	fx := newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{} })
	h := newHarness(t, fx)
	id := h.start("", "agent=command", "agent_command=agent", "max_iterations=1")
	if run := h.drive(id, false); run.Reason != "max_iterations:1" {
		t.Fatalf("first: %s %q", run.Status, run.Reason)
	}
	if err := h.s.Resume(context.Background(), id, nil); err != nil {
		t.Fatal(err)
	}
	h.claim(id)
	run := h.drive(id, true)
	if run.Status != api.RunAborted || run.Reason != "max_iterations:1" || len(h.steps(id)) != 1 {
		t.Fatalf("resumed at the limit: %s %q, %d steps", run.Status, run.Reason, len(h.steps(id)))
	}
	if !slices.Contains(h.eventTypes(id), "RUN_RECOVERED") {
		t.Errorf("a recovered runner did not say so: %v", h.eventTypes(id))
	}
	// Raised, it runs one more iteration.
	if err := h.s.Resume(context.Background(), id, []string{"max_iterations=2"}); err != nil {
		t.Fatal(err)
	}
	h.claim(id)
	if run := h.drive(id, false); run.Reason != "max_iterations:2" || len(h.steps(id)) != 2 {
		t.Fatalf("raised: %s %q, %d steps", run.Status, run.Reason, len(h.steps(id)))
	}
}

// An agent that start found on the PATH and that is gone by the first
// step ends the run before any step runs.
func TestAgentNotFoundAbortsBeforeAnyStep(t *testing.T) {
	fx := newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{} })
	h := newHarness(t, fx)
	bin := t.TempDir()
	codex := filepath.Join(bin, "codex")
	if err := os.WriteFile(codex, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	id := h.start("", "agent=codex", "model=gpt-5-codex", "max_iterations=3")
	if err := os.Remove(codex); err != nil {
		t.Fatal(err)
	}
	run := h.drive(id, false)
	if run.Status != api.RunAborted || run.Reason != "fatal:agent_not_found" || !strings.Contains(run.Description, "npm install -g @openai/codex") {
		t.Fatalf("%s %q %s", run.Status, run.Reason, run.Description)
	}
	if len(fx.steps()) != 0 {
		t.Fatalf("steps ran: %v", fx.steps())
	}
}

// recoverable inserts a RUNNING step as a daemon that died during it
// would have left it.
func recoverable(t *testing.T, h *harness, id string, phase api.Phase) *storage.Step {
	t.Helper()
	r := newRunner(h.s, id)
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	p, err := r.buildStep(r.hist.Next())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.writePrompt(); err != nil {
		t.Fatal(err)
	}
	if err := r.write(func(tx *storage.Tx) error { return r.insertStep(tx, p) }); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p.step.LogPath, []byte("partial output\n"), 0o600)
	return p.step
}

func TestRecoveryDecisions(t *testing.T) {
	tests := []struct {
		name   string
		exits  func(tag string) string // the run's exits file ("" none)
		cause  storage.CancelCause
		stop   string
		status api.RunStatus
		reason string
		steps  string
	}{
		{
			name:   "a step that ended while no daemon watched is recorded with its own status",
			exits:  func(tag string) string { return tag + " exit 0\n" },
			status: api.RunAborted, reason: "max_iterations:2",
			steps: "implementation:SUCCEEDED implementation:SUCCEEDED",
		},
		{
			name:   "its recorded failure counts",
			exits:  func(tag string) string { return tag + " exit 3\n" },
			status: api.RunAborted, reason: "max_iterations:2",
			steps: "implementation:FAILED implementation:SUCCEEDED",
		},
		{
			name:   "a lost outcome is INTERRUPTED and its phase runs again",
			status: api.RunAborted, reason: "max_iterations:2",
			steps: "implementation:INTERRUPTED implementation:SUCCEEDED implementation:SUCCEEDED",
		},
		{
			name:   "a step the earlier daemon was stopping for stop --now ends as that stop meant",
			cause:  storage.CancelUser,
			stop:   storage.StopNow,
			status: api.RunInterrupted, reason: "user_stop",
			steps: "implementation:CANCELED",
		},
		{
			name:   "a graceful stop lets a lost step's phase run again first",
			stop:   storage.StopGraceful,
			status: api.RunInterrupted, reason: "user_stop",
			steps: "implementation:INTERRUPTED implementation:SUCCEEDED",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{} })
			h := newHarness(t, fx)
			id := h.start("", "agent=command", "agent_command=agent", "max_iterations=2")
			st := recoverable(t, h, id, api.PhaseImplementation)
			r := newRunner(h.s, id)
			f := r.files(st.Seq, st.Phase)
			if tt.exits != nil {
				os.WriteFile(f.status, []byte(tt.exits(f.tag)), 0o600)
			}
			err := h.store.Write(context.Background(), func(tx *storage.Tx) error {
				if tt.cause != storage.CancelNone {
					if err := tx.SetCancelCause(st.ID, tt.cause); err != nil {
						return err
					}
				}
				if tt.stop != "" {
					return tx.SetStopRequest(id, tt.stop)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			run := h.drive(id, true)
			got := statuses(h.steps(id))
			if run.Status != tt.status || run.Reason != tt.reason || got != tt.steps {
				t.Fatalf("run %s %q (%s), steps %s; want %s %q, steps %s", run.Status, run.Reason, run.Description, got,
					tt.status, tt.reason, tt.steps)
			}
			if len(fx.swept) != 1 || fx.swept[0] != f.tag {
				t.Errorf("the gone step's leftovers were not swept: %v", fx.swept)
			}
		})
	}
}

// In a git workspace every implementation step's change is recorded in
// the ledger, once, and a step that changed nothing records no commit.
func TestLedgerRecordsEachIterationsChange(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "0"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	fx := newFakeExec(t, func(phase api.Phase, seq int) fakeStep {
		switch seq {
		case 1:
			return fakeStep{files: map[string]string{"a.txt": "one\n"}}
		case 3:
			return fakeStep{files: map[string]string{"a.txt": "one\ntwo\n", "b.txt": "b\n"}}
		}
		return fakeStep{}
	})
	h := newHarness(t, fx)
	id := h.start(ws, "agent=command", "agent_command=agent", "max_iterations=4")
	run := h.drive(id, false)
	if run.Reason != "max_iterations:4" {
		t.Fatalf("%s %q %s", run.Status, run.Reason, run.Description)
	}
	var changed []int
	for _, st := range h.steps(id) {
		if st.FilesChanged == nil {
			t.Fatalf("step %d: no ledger record", st.Seq)
		}
		changed = append(changed, *st.FilesChanged)
		if (*st.FilesChanged == 0) != (st.ChangeCommit == "") {
			t.Errorf("step %d: %d files, commit %q", st.Seq, *st.FilesChanged, st.ChangeCommit)
		}
	}
	if !slices.Equal(changed, []int{1, 0, 2, 0}) {
		t.Fatalf("files changed per step %v, want [1 0 2 0]", changed)
	}
}

// The changes gate: a promise with nothing changed does not complete; a
// change that is later undone is no change; a real change completes. The
// workspace is a real git repository and the ledger records the steps.
func TestChangesGate(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	const promise = "<promise>COMPLETE</promise>\n"
	tests := []struct {
		name   string
		files  map[int]map[string]string // by step seq
		status api.RunStatus
		reason string
	}{
		{name: "a promise with no change does not complete", status: api.RunAborted, reason: "max_iterations:3"},
		{name: "a change made and undone is no change",
			files:  map[int]map[string]string{1: {"a.txt": "one\n"}, 2: {"a.txt": "base\n"}},
			status: api.RunAborted, reason: "max_iterations:3"},
		{name: "a change completes", files: map[int]map[string]string{2: {"a.txt": "two\n"}},
			status: api.RunCompleted, reason: "completed:promise+changes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			t.Setenv("HOME", t.TempDir())
			if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("base\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"init", "-q"}, {"add", "a.txt"},
				{"-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "0"}} {
				cmd := exec.Command("git", args...)
				cmd.Dir = ws
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v %s", args, err, out)
				}
			}
			fx := newFakeExec(t, func(phase api.Phase, seq int) fakeStep {
				if seq == 1 {
					return fakeStep{output: "working\n", files: tt.files[seq]}
				}
				return fakeStep{output: promise, files: tt.files[seq]}
			})
			h := newHarness(t, fx)
			id := h.start(ws, "agent=command", "agent_command=agent", "max_iterations=3", "completion=promise,changes")
			run := h.drive(id, false)
			if run.Status != tt.status || run.Reason != tt.reason {
				t.Fatalf("run %s %q (%s), want %s %q", run.Status, run.Reason, run.Description, tt.status, tt.reason)
			}
		})
	}
}

// A question round-trip: the run waits (never claimed by itself), an
// answer to a run that does not wait is refused, the answer resumes it,
// and the next prompt carries the question and the answer.
func TestQuestionAnswer(t *testing.T) {
	const promise = "<promise>COMPLETE</promise>"
	var prompts []string
	fx := newFakeExec(t, nil)
	fx.script = func(phase api.Phase, seq int) fakeStep {
		if seq == 1 {
			return fakeStep{output: "<question>\nWhich port, token sk-live-123?\n</question>\n"}
		}
		return fakeStep{output: "done\n" + promise + "\n"}
	}
	h := newHarness(t, fx)
	ctx := context.Background()
	other := h.start("", "agent=command", "agent_command=agent", "max_iterations=1")
	h.drive(other, false)
	var se *StateError
	if err := h.s.Answer(ctx, other, "8080"); !errors.As(err, &se) || !strings.Contains(se.Msg, "not waiting for an answer") {
		t.Fatalf("answer to an ended run: %v", err)
	}

	ws := t.TempDir()
	envFile := filepath.Join(ws, "secrets.env")
	if err := os.WriteFile(envFile, []byte("DEPLOY_TOKEN=sk-live-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id := h.start(ws, "agent=command", "agent_command=agent", "max_iterations=5", "completion=promise", "env_file="+envFile)
	run := h.drive(id, false)
	if run.Status != api.RunWaiting || run.Reason != "needs_answer" || run.WaitUntil != nil {
		t.Fatalf("after the question: %s %q wait_until %v", run.Status, run.Reason, run.WaitUntil)
	}
	if _, err := h.store.Claimable(ctx, 1<<62); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a run waiting for an answer is claimable by itself: %v", err)
	}
	if err := h.s.Answer(ctx, id, "  "); err == nil {
		t.Fatal("an empty answer was accepted")
	}
	if err := h.s.Answer(ctx, id, "Use 8080, not sk-live-123."); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Answer(ctx, id, "again"); !errors.As(err, &se) {
		t.Fatalf("a second answer: %v", err)
	}
	h.claim(id)
	run = h.drive(id, false)
	if run.Status != api.RunCompleted || run.Reason != "completed:promise" {
		t.Fatalf("after the answer: %s %q (%s)", run.Status, run.Reason, run.Description)
	}
	steps := h.steps(id)
	if got := statuses(steps); got != "implementation:SUCCEEDED implementation:SUCCEEDED" || steps[1].Iteration != 2 {
		t.Fatalf("steps %s", got)
	}
	if steps[0].Question != "Which port, token [REDACTED:DEPLOY_TOKEN]?" || steps[0].Answer != "Use 8080, not [REDACTED:DEPLOY_TOKEN]." {
		t.Fatalf("stored question %q answer %q", steps[0].Question, steps[0].Answer)
	}
	b, err := os.ReadFile(strings.TrimSuffix(steps[1].LogPath, ".log") + ".prompt")
	if err != nil {
		t.Fatal(err)
	}
	prompts = append(prompts, string(b))
	for _, want := range []string{"## Your question from iteration 1\n\nWhich port, token [REDACTED:DEPLOY_TOKEN]?", "## The answer\n\nUse 8080, not [REDACTED:DEPLOY_TOKEN]."} {
		if !strings.Contains(prompts[0], want) {
			t.Errorf("the next prompt lacks %q:\n%s", want, prompts[0])
		}
	}
	if strings.Contains(prompts[0], "Feedback from iteration") {
		t.Errorf("the question's iteration got failure feedback:\n%s", prompts[0])
	}
}
