package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// legacyProject writes a Python project whose test_legacy fails before any
// run (pre-existing) and whose test_f1 fails on the bug the goal is about;
// test_f2 passes. The agent (agent=command) fixes f1 and promises
// completion; with breakF2 it breaks f2 as well, a failure of its own.
func legacyProject(e *env, breakF2 bool) {
	e.t.Helper()
	e.writeFile("calc.py", "def f1():\n    return 0  # BUG\n\n\ndef f2():\n    return 2\n\n\ndef legacy():\n    return -1  # old, not ours\n", 0o644)
	e.writeFile("test_calc.py", `import unittest
import calc


class TestCalc(unittest.TestCase):
    def test_f1(self):
        self.assertEqual(calc.f1(), 1)

    def test_f2(self):
        self.assertEqual(calc.f2(), 2)

    def test_legacy(self):
        self.assertEqual(calc.legacy(), 1)


if __name__ == "__main__":
    unittest.main()
`, 0o644)
	breaks := ""
	if breakF2 {
		breaks = "sed -i 's/return 2/return 3/' calc.py\n"
	}
	e.writeFile("fix.sh", "#!/bin/sh\ncat > /dev/null\nsed -i 's/return 0  # BUG/return 1/' calc.py\n"+breaks+
		"echo 'fixed f1'\nprintf '%s\\n' '<promise>COMPLETE</promise>'\n", 0o755)
}

func baselineSteps(steps []api.Step) (counted, all int) {
	for _, s := range steps {
		if s.Phase != api.PhaseBaseline {
			continue
		}
		all++
		if s.Status == api.StepSucceeded || s.Status == api.StepFailed {
			counted++
		}
	}
	return counted, all
}

// verify_baseline through the binaries: a test failing before the run does
// not keep a run that fixed its bug from completing, the same project
// without verify_baseline does not complete, and a failure the agent
// caused still fails the gate.
func TestVerifyBaselineThroughTheBinaries(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	common := []string{"agent=command", "agent_command=sh fix.sh", "verify_command=python3 -m unittest test_calc",
		"max_iterations=2", "completion=promise,verify"}
	t.Run("a pre-existing failure with verify_baseline=true completes", func(t *testing.T) {
		e := newEnv(t)
		e.startDaemon()
		legacyProject(e, false)
		e.config(append(common, "verify_baseline=true")...)
		id := e.start("fix f1")
		e.wait(id)
		r := e.status(id)
		if r.Status != api.RunCompleted || r.Reason != "completed:promise+verify" || r.Iteration != 1 {
			t.Fatalf("run %s %q in iteration %d, want COMPLETED completed:promise+verify in 1; steps:\n%s",
				r.Status, r.Reason, r.Iteration, e.must("steps", id))
		}
		steps := e.steps(id)
		if len(steps) != 3 || steps[0].Phase != api.PhaseBaseline || steps[0].Iteration != 0 || steps[0].Status != api.StepFailed {
			t.Fatalf("steps = %s, want the baseline (FAILED, iteration 0), then iteration 1", e.must("steps", id))
		}
		v := steps[2]
		if v.Phase != api.PhaseVerification || v.Status != api.StepSucceeded || v.Tests == nil ||
			len(v.Tests.IgnoredNames) != 1 || !strings.Contains(v.Tests.IgnoredNames[0], "test_legacy") {
			t.Fatalf("verification %s %+v, want SUCCEEDED ignoring test_legacy", v.Status, v.Tests)
		}
		if b := r.Baseline; b == nil || b.Seq != 1 || !b.Known || len(b.Failing) != 2 || b.IgnoredSeq != 3 || len(b.Ignored) != 1 {
			t.Errorf("status baseline = %+v, want step 1 failing 2 (f1, legacy), step 3 ignoring 1", b)
		}
		out := e.must("status", id)
		if !strings.Contains(out, "baseline") || !strings.Contains(out, "step #1: 2 failing before the run") ||
			!strings.Contains(out, "step #3 ignored 1 pre-existing") || !strings.Contains(out, "test_legacy") {
			t.Errorf("status does not show the baseline:\n%s", out)
		}
		if out := e.must("steps", id); !strings.Contains(out, "1 pre-existing ignored:") {
			t.Errorf("steps do not show the ignored test:\n%s", out)
		}
		if r.Counters.Verification != 0 {
			t.Errorf("verification streak %d after a baseline that failed, want 0", r.Counters.Verification)
		}
	})
	t.Run("the same project with verify_baseline=false does not complete", func(t *testing.T) {
		e := newEnv(t)
		e.startDaemon()
		legacyProject(e, false)
		e.config(append(common, "verify_baseline=false")...)
		id := e.start("fix f1")
		e.wait(id)
		r := e.status(id)
		if r.Status == api.RunCompleted {
			t.Fatalf("run COMPLETED %q with test_legacy failing and no baseline", r.Reason)
		}
		if counted, all := baselineSteps(e.steps(id)); all != 0 {
			t.Errorf("%d baseline steps (%d counted) without verify_baseline", all, counted)
		}
		if r.Baseline != nil {
			t.Errorf("status baseline = %+v without verify_baseline", r.Baseline)
		}
	})
	t.Run("a new failure not in the baseline still fails the gate", func(t *testing.T) {
		e := newEnv(t)
		e.startDaemon()
		legacyProject(e, true)
		e.config(append(common, "verify_baseline=true")...)
		id := e.start("fix f1")
		e.wait(id)
		r := e.status(id)
		if r.Status == api.RunCompleted {
			t.Fatalf("run COMPLETED %q although the agent broke test_f2", r.Reason)
		}
		steps := e.steps(id)
		last := steps[len(steps)-1]
		if last.Phase != api.PhaseVerification || last.Status != api.StepFailed || last.Tests == nil ||
			len(last.Tests.IgnoredNames) != 1 || len(last.Tests.FailedNames) != 2 {
			t.Fatalf("last step %s %s %+v, want a FAILED verification with test_f2 new and test_legacy ignored", last.Phase, last.Status, last.Tests)
		}
		if r.Counters.Verification != 2 {
			t.Errorf("verification streak %d, want 2 (the new failure counts)", r.Counters.Verification)
		}
	})
}

// A daemon killed with kill -9 while the baseline step runs: a baseline
// still running is adopted and recorded once; one whose process died with
// the daemon (its outcome lost) is INTERRUPTED and runs again. Either way
// exactly one baseline counts and the run completes.
func TestVerifyBaselineSurvivesKill9(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	for _, killStep := range []bool{false, true} {
		name := "the baseline keeps running and is adopted"
		if killStep {
			name = "the baseline dies with the daemon and runs again"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.startDaemon()
			legacyProject(e, false)
			// The first baseline holds until .baseline-go, after writing
			// its process group (whole: the test reads it at once).
			e.writeFile("verify.sh", `#!/bin/sh
if [ "$LOOP_PHASE" = baseline ] && [ ! -e .baseline-once ]; then
  touch .baseline-once
  ps -o pgid= $$ | tr -d ' ' > .baseline-pgid.tmp && mv .baseline-pgid.tmp .baseline-pgid
  while [ ! -e .baseline-go ]; do sleep 0.05; done
fi
exec python3 -m unittest test_calc
`, 0o755)
			e.config("agent=command", "agent_command=sh fix.sh", "verify_command=sh verify.sh", "max_iterations=2",
				"completion=promise,verify", "verify_baseline=true")
			id := e.start("fix f1")
			pgidFile := filepath.Join(e.ws, ".baseline-pgid")
			eventually(t, "the baseline step to hold", 60*time.Second, func() bool {
				_, err := os.Stat(pgidFile)
				return err == nil
			})
			e.killDaemon()
			if killStep {
				b, err := os.ReadFile(pgidFile)
				pgid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil || pgid <= 1 {
					t.Fatalf("baseline pgid %q: %v", b, err)
				}
				if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
					t.Fatalf("kill the baseline's process group: %v", err)
				}
			}
			e.writeFile(".baseline-go", "", 0o644)
			e.startDaemon()
			e.wait(id)
			r := e.status(id)
			if r.Status != api.RunCompleted {
				t.Fatalf("run %s %q, want COMPLETED; steps:\n%s", r.Status, r.Reason, e.must("steps", id))
			}
			steps := e.steps(id)
			counted, all := baselineSteps(steps)
			wantAll := 1
			if killStep {
				wantAll = 2
				if steps[0].Status != api.StepInterrupted {
					t.Errorf("the lost baseline is %s, want INTERRUPTED", steps[0].Status)
				}
			}
			if counted != 1 || all != wantAll {
				t.Fatalf("%d baseline steps, %d counted; want %d, 1 counted:\n%s", all, counted, wantAll, e.must("steps", id))
			}
			if r.Iteration != 1 {
				t.Errorf("iteration %d, want 1 (the baseline is no iteration)", r.Iteration)
			}
		})
	}
}
