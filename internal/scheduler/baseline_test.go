package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// unittestFailing is `python -m unittest` output (exit 1) with the named
// tests of five failing, or passing output (exit 0) when none is named.
func unittestFailing(names ...int) fakeStep {
	var b strings.Builder
	for _, i := range names {
		fmt.Fprintf(&b, "======================================================================\n"+
			"FAIL: test_%d (tests.test_calc.TestCalc.test_%d)\n"+
			"----------------------------------------------------------------------\n"+
			"AssertionError: 2 != 3\n\n", i, i)
	}
	b.WriteString("----------------------------------------------------------------------\nRan 5 tests in 0.001s\n\n")
	if len(names) == 0 {
		b.WriteString("OK\n")
		return fakeStep{output: b.String()}
	}
	fmt.Fprintf(&b, "FAILED (failures=%d)\n", len(names))
	return fakeStep{code: 1, output: b.String()}
}

// verify_baseline: the verification runs once before iteration 1 (phase
// baseline, iteration 0) and the verify gate ignores the failures it
// found, by name; a new failure still fails, a baseline failure that now
// passes is fine, and what cannot be matched by name is never ignored.
func TestVerifyBaseline(t *testing.T) {
	const promise = "done\n<promise>COMPLETE</promise>\n"
	agent := fakeStep{output: promise}
	tests := []struct {
		name     string
		sets     []string
		baseline fakeStep
		verify   fakeStep
		status   api.RunStatus
		reason   string
		steps    string
		ignored  []string // the last verification's ignored tests
		prompt   string   // in the last implementation step's prompt
	}{
		{
			name:     "only the baseline's failures: the gate holds",
			sets:     []string{"verify_baseline=true"},
			baseline: unittestFailing(1, 3), verify: unittestFailing(1, 3),
			status: api.RunCompleted, reason: "completed:promise+verify",
			steps:   "baseline:FAILED implementation:SUCCEEDED verification:SUCCEEDED",
			ignored: []string{"test_1", "test_3"},
		},
		{
			name:     "the same project without verify_baseline does not complete",
			sets:     []string{"verify_baseline=false"},
			baseline: unittestFailing(1, 3), verify: unittestFailing(1, 3),
			status: api.RunAborted, reason: "max_iterations:2",
			steps: "implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:FAILED",
		},
		{
			name:     "a baseline failure that now passes is fine",
			sets:     []string{"verify_baseline=true"},
			baseline: unittestFailing(1, 3), verify: unittestFailing(3),
			status: api.RunCompleted, reason: "completed:promise+verify",
			steps:   "baseline:FAILED implementation:SUCCEEDED verification:SUCCEEDED",
			ignored: []string{"test_3"},
		},
		{
			name:     "a failure not in the baseline still fails the gate",
			sets:     []string{"verify_baseline=true"},
			baseline: unittestFailing(1), verify: unittestFailing(1, 2),
			status: api.RunAborted, reason: "max_iterations:2",
			steps:   "baseline:FAILED implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:FAILED",
			ignored: []string{"test_1"},
			prompt:  "Of these, 1 was already failing before the run and ignored: tests.test_calc.TestCalc.test_1. The others are the ones to fix.",
		},
		{
			name:     "a baseline whose failures were not parsed ignores nothing",
			sets:     []string{"verify_baseline=true"},
			baseline: fakeStep{code: 1, output: "Segmentation fault\n"}, verify: unittestFailing(1),
			status: api.RunAborted, reason: "max_iterations:2",
			steps: "baseline:FAILED implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:FAILED",
		},
		{
			name: "a failure without a name is never ignored",
			sets: []string{"verify_baseline=true"},
			baseline: fakeStep{code: 1, output: "FAILED test_calc.py::test_1 - assert 0 == 1\n" +
				"========================= 1 failed, 4 passed in 0.05s =========================\n"},
			// One failure named, two counted.
			verify: fakeStep{code: 1, output: "FAILED test_calc.py::test_1 - assert 0 == 1\n" +
				"========================= 2 failed, 3 passed in 0.05s =========================\n"},
			status: api.RunAborted, reason: "max_iterations:2",
			steps:   "baseline:FAILED implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:FAILED",
			ignored: []string{"test_1"},
		},
		{
			name:     "with several verify_commands, a failure before the last one stays",
			sets:     []string{"verify_baseline=true", "verify_command=python3 -m unittest", "verify_command=ruff check"},
			baseline: unittestFailing(1), verify: unittestFailing(1), // no "$ ruff check": the last never ran
			status: api.RunAborted, reason: "max_iterations:2",
			steps:   "baseline:FAILED implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:FAILED",
			ignored: []string{"test_1"},
		},
		{
			name:     "with several verify_commands, the last one's pre-existing failures are ignored",
			sets:     []string{"verify_baseline=true", "verify_command=ruff check", "verify_command=python3 -m unittest"},
			baseline: unittestFailing(1),
			verify: func() fakeStep {
				f := unittestFailing(1)
				f.output = "\n$ ruff check\nAll checks passed!\n\n$ python3 -m unittest\n" + f.output
				return f
			}(),
			status: api.RunCompleted, reason: "completed:promise+verify",
			steps:   "baseline:FAILED implementation:SUCCEEDED verification:SUCCEEDED",
			ignored: []string{"test_1"},
		},
		{
			name:     "the baseline is no failure: it counts in no streak",
			sets:     []string{"verify_baseline=true", "max_consecutive_verification_failures=1"},
			baseline: unittestFailing(1, 2), verify: unittestFailing(),
			status: api.RunCompleted, reason: "completed:promise+verify",
			steps: "baseline:FAILED implementation:SUCCEEDED verification:SUCCEEDED",
		},
		{
			name:     "a passing baseline changes nothing",
			sets:     []string{"verify_baseline=true"},
			baseline: unittestFailing(), verify: unittestFailing(2),
			status: api.RunAborted, reason: "max_iterations:2",
			steps: "baseline:SUCCEEDED implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:FAILED",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFakeExec(t, func(phase api.Phase, seq int) fakeStep {
				switch phase {
				case api.PhaseBaseline:
					return tt.baseline
				case api.PhaseVerification:
					return tt.verify
				}
				return agent
			})
			h := newHarness(t, fx)
			sets := []string{"agent=command", "agent_command=agent", "max_iterations=2", "completion=promise,verify",
				"max_consecutive_verification_failures=0"}
			if !slices.ContainsFunc(tt.sets, func(s string) bool { return strings.HasPrefix(s, "verify_command=") }) {
				sets = append(sets, "verify_command=python3 -m unittest")
			}
			id := h.start("", append(sets, tt.sets...)...)
			run := h.drive(id, false)
			steps := h.steps(id)
			if got := statuses(steps); run.Status != tt.status || run.Reason != tt.reason || got != tt.steps {
				t.Fatalf("run %s %q (%s)\nsteps %s\nwant  %s %q, steps %s", run.Status, run.Reason, run.Description, got,
					tt.status, tt.reason, tt.steps)
			}
			if steps[0].Phase == api.PhaseBaseline && steps[0].Iteration != 0 {
				t.Errorf("the baseline step is in iteration %d, want 0", steps[0].Iteration)
			}
			last := steps[len(steps)-1]
			var ignored []string
			for _, n := range last.TestsIgnoredNames {
				ignored = append(ignored, n[strings.LastIndexAny(n, ".:")+1:])
			}
			if !slices.Equal(ignored, tt.ignored) {
				t.Errorf("ignored %q, want %v", last.TestsIgnoredNames, tt.ignored)
			}
			if tt.prompt != "" {
				impl := steps[len(steps)-2]
				b, err := os.ReadFile(filepath.Join(filepath.Dir(impl.LogPath), fmt.Sprintf("%04d-implementation.prompt", impl.Seq)))
				if err != nil || !strings.Contains(string(b), tt.prompt) {
					t.Errorf("the next prompt lacks %q (%v):\n%s", tt.prompt, err, b)
				}
			}
		})
	}
}

// A daemon killed while the baseline ran: the lost baseline is
// INTERRUPTED and runs again, and only the one that ended counts.
func TestVerifyBaselineRecovery(t *testing.T) {
	fx := newFakeExec(t, func(phase api.Phase, seq int) fakeStep {
		switch phase {
		case api.PhaseBaseline, api.PhaseVerification:
			return unittestFailing(2)
		}
		return fakeStep{output: "<promise>COMPLETE</promise>\n"}
	})
	h := newHarness(t, fx)
	id := h.start("", "agent=command", "agent_command=agent", "verify_command=python3 -m unittest", "verify_baseline=true",
		"completion=promise,verify", "max_iterations=3")
	st := recoverable(t, h, id, api.PhaseBaseline)
	if st.Phase != api.PhaseBaseline || st.Iteration != 0 {
		t.Fatalf("first step %s iteration %d, want baseline 0", st.Phase, st.Iteration)
	}
	run := h.drive(id, true)
	got := statuses(h.steps(id))
	if want := "baseline:INTERRUPTED baseline:FAILED implementation:SUCCEEDED verification:SUCCEEDED"; run.Status != api.RunCompleted || got != want {
		t.Fatalf("run %s %q, steps %s; want COMPLETED, steps %s", run.Status, run.Reason, got, want)
	}
	// Driven again (a second restart after it ended): no second baseline.
	if n := strings.Count(statuses(h.steps(id)), "baseline:FAILED"); n != 1 {
		t.Fatalf("%d baselines recorded", n)
	}
	if _, err := os.Stat(st.LogPath); err != nil {
		t.Errorf("the interrupted baseline's log: %v", err)
	}
}

// verify_baseline without a verify_command has nothing to run: start
// says so, and the run has no baseline step.
func TestVerifyBaselineWithoutVerification(t *testing.T) {
	fx := newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{} })
	h := newHarness(t, fx)
	run, warnings, err := h.s.CreateRun(t.Context(), api.CreateRunRequest{Workspace: t.TempDir(), Goal: "g",
		Set: []string{"agent=command", "agent_command=agent", "verify_baseline=true", "max_iterations=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "verify_baseline is ignored") }) {
		t.Errorf("warnings = %q, want one for verify_baseline", warnings)
	}
	h.claim(run.ID)
	h.drive(run.ID, false)
	if got := statuses(h.steps(run.ID)); got != "implementation:SUCCEEDED" {
		t.Errorf("steps %s, want one implementation step and no baseline", got)
	}
}

// A test name holding a secret of the env_file is stored redacted, the
// baseline's and the ignored names alike, and still matches.
func TestVerifyBaselineRedactedNames(t *testing.T) {
	out := "FAIL: test_a (t_sk-live-123.T.test_a)\n----------------------------------------------------------------------\n" +
		"Ran 2 tests in 0.001s\n\nFAILED (failures=1)\n"
	fx := newFakeExec(t, func(phase api.Phase, seq int) fakeStep {
		if phase == api.PhaseImplementation {
			return fakeStep{output: "<promise>COMPLETE</promise>\n"}
		}
		return fakeStep{code: 1, output: out}
	})
	h := newHarness(t, fx)
	ws := t.TempDir()
	envFile := filepath.Join(ws, "secrets.env")
	if err := os.WriteFile(envFile, []byte("DEPLOY_TOKEN=sk-live-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id := h.start(ws, "agent=command", "agent_command=agent", "verify_command=python3 -m unittest", "verify_baseline=true",
		"completion=promise,verify", "max_iterations=1", "env_file="+envFile)
	run := h.drive(id, false)
	steps := h.steps(id)
	if run.Status != api.RunCompleted || len(steps) != 3 {
		t.Fatalf("run %s %q, steps %s; want COMPLETED after baseline, implementation, verification", run.Status, run.Reason, statuses(steps))
	}
	want := "t_[REDACTED:DEPLOY_TOKEN].T.test_a"
	if b, v := steps[0].TestsFailedNames, steps[2].TestsIgnoredNames; len(b) != 1 || b[0] != want || len(v) != 1 || v[0] != want {
		t.Fatalf("baseline failing %q, ignored %q; want both %q", b, v, want)
	}
}
