package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// pythonProject writes a small Python project with five bugs, each caught
// by one unittest test, and an agent script (agent=command) that fixes at
// most fixes bugs per call, announcing completion once none is left. When
// hold is set, the agent's fourth call writes .agent-holding and waits for
// .agent-go before it works.
func pythonProject(e *env, fixes int, hold bool) {
	e.t.Helper()
	var calc, tests strings.Builder
	tests.WriteString("import unittest\nimport calc\n\n\nclass TestCalc(unittest.TestCase):\n")
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&calc, "def f%d():\n    return 0  # BUG\n\n\n", i)
		fmt.Fprintf(&tests, "    def test_f%d(self):\n        self.assertEqual(calc.f%d(), 1)\n\n", i, i)
	}
	tests.WriteString("\nif __name__ == \"__main__\":\n    unittest.main()\n")
	e.writeFile("calc.py", calc.String(), 0o644)
	e.writeFile("test_calc.py", tests.String(), 0o644)
	holdLines := ""
	if hold {
		holdLines = `n=$(cat .agent-calls 2>/dev/null || echo 0); n=$((n+1)); echo $n > .agent-calls
if [ "$n" = 4 ]; then touch .agent-holding; while [ ! -e .agent-go ]; do sleep 0.05; done; fi
`
	}
	e.writeFile("fix.sh", `#!/bin/sh
cat > /dev/null
`+holdLines+`i=0
while [ $i -lt `+fmt.Sprint(fixes)+` ]; do
  sed -i '0,/return 0  # BUG/s//return 1/' calc.py
  i=$((i+1))
done
echo "fixed one bug"
if ! grep -q BUG calc.py; then printf '%s\n' '<promise>COMPLETE</promise>'; fi
`, 0o755)
}

// The headline case of a new user's first day: an agent fixing one failing
// test per iteration (5 → 4 → 3 → 2 → 1) completes with the defaults; an
// agent that fixes nothing still fails after exactly three verifications.
func TestProgressIsNotStuck(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	t.Run("an agent fixing one test per call completes", func(t *testing.T) {
		e := newEnv(t)
		e.startDaemon()
		pythonProject(e, 1, false)
		e.config("agent=command", "agent_command=sh fix.sh", "verify_command=python3 -m unittest test_calc")
		id := e.start("fix the bugs")
		e.wait(id)
		r := e.status(id)
		if r.Status != api.RunCompleted {
			t.Fatalf("run %s %q, want COMPLETED; steps:\n%s", r.Status, r.Reason, e.must("steps", id))
		}
		var failing []int
		for _, s := range e.steps(id) {
			if s.Phase == api.PhaseVerification && s.Tests != nil && s.Tests.Failed != nil {
				failing = append(failing, *s.Tests.Failed)
			}
		}
		if want := []int{4, 3, 2, 1, 0}; !slices.Equal(failing, want) {
			t.Errorf("failing tests per verification = %v, want %v", failing, want)
		}
	})
	t.Run("an agent fixing nothing fails after exactly 3", func(t *testing.T) {
		e := newEnv(t)
		e.startDaemon()
		pythonProject(e, 0, false)
		e.config("agent=command", "agent_command=sh fix.sh", "verify_command=python3 -m unittest test_calc")
		id := e.start("fix the bugs")
		e.wait(id)
		r := e.status(id)
		var verifications int
		for _, s := range e.steps(id) {
			if s.Phase == api.PhaseVerification {
				verifications++
			}
		}
		if r.Status != api.RunFailed || r.Reason != "max_consecutive_failures:verification:3" || verifications != 3 {
			t.Fatalf("run %s %q after %d verifications, want FAILED max_consecutive_failures:verification:3 after 3",
				r.Status, r.Reason, verifications)
		}
		if out := e.must("status", id); !strings.Contains(out, "failing 5 → 5 → 5") {
			t.Errorf("status does not show the trend:\n%s", out)
		}
	})
	t.Run("a daemon killed mid-run keeps the streak and the trend", func(t *testing.T) {
		e := newEnv(t)
		e.startDaemon()
		pythonProject(e, 1, true)
		// The first call fixes one of five: failing 4, 3, 2 after calls 1-3.
		e.config("agent=command", "agent_command=sh fix.sh", "verify_command=python3 -m unittest test_calc")
		id := e.start("fix the bugs")
		eventually(t, "the agent's fourth call", 60*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(e.ws, ".agent-holding"))
			return err == nil
		})
		e.killDaemon()
		e.startDaemon()
		r := e.status(id)
		if r.Counters.Verification != 1 || !slices.Equal(r.FailingTrend, []int{4, 3, 2}) {
			t.Errorf("after a restart: verification streak %d, trend %v; want 1, [4 3 2]", r.Counters.Verification, r.FailingTrend)
		}
		if out := e.must("status", id); !strings.Contains(out, "failing 4 → 3 → 2") {
			t.Errorf("status does not show the trend:\n%s", out)
		}
		e.writeFile(".agent-go", "", 0o644)
		e.wait(id)
		if r := e.status(id); r.Status != api.RunCompleted {
			t.Fatalf("run %s %q, want COMPLETED; steps:\n%s", r.Status, r.Reason, e.must("steps", id))
		}
	})
}

// A command agent that reports its own cost ($0.02 a call, for usage that
// Sonnet's rates would price at $0.105) is charged what it reports: no
// default model prices it, and max_cost enforces the real figure.
func TestCommandAgentCostIsItsOwn(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.writeFile("agent.sh", `#!/bin/sh
cat > /dev/null
echo "call" >> .calls
printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"duration_ms":5,"num_turns":1,"result":"worked on it","session_id":"s1","total_cost_usd":0.02,"usage":{"input_tokens":10000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":5000}}'
`, 0o755)
	e.config("agent=command", "agent_command=sh agent.sh", "max_cost=0.05", "max_iterations=10")
	id := e.start("work")
	e.wait(id)
	r := e.status(id)
	var impl int
	for _, s := range e.steps(id) {
		if s.Phase == api.PhaseImplementation {
			impl++
		}
	}
	// $0.02 a call reaches $0.05 on the third call; priced as Sonnet the
	// first call alone ($0.105) would have ended the run.
	if r.Status != api.RunAborted || r.Reason != "max_cost:0.05" || impl != 3 {
		t.Fatalf("run %s %q after %d agent calls, want ABORTED max_cost:0.05 after 3; usage %+v", r.Status, r.Reason, impl, r.Usage)
	}
	if r.Usage.CostUSD < 0.0599 || r.Usage.CostUSD > 0.0601 || r.Usage.CostUnknown {
		t.Errorf("cost = %v (unknown %v), want the reported 0.06", r.Usage.CostUSD, r.Usage.CostUnknown)
	}
	var cfg struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(r.Config, &cfg); err != nil || cfg.Model != "" {
		t.Errorf("frozen model = %q (%v), want none", cfg.Model, err)
	}
}

// The changes gate through the binaries: an agent that promises completion
// without changing anything does not complete a run with changes in its
// gate; one that changes a file does. Without git the gate is refused.
func TestChangesGateThroughTheBinaries(t *testing.T) {
	for _, tc := range []struct {
		name, agent, status, reason string
	}{
		{"a promise with no change", `cat > /dev/null; echo '<promise>COMPLETE</promise>'`, "ABORTED", "max_iterations:2"},
		{"a promise with a change", `cat > /dev/null; echo fixed > a.txt; echo '<promise>COMPLETE</promise>'`, "COMPLETED", "completed:promise+changes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.startDaemon()
			e.writeFile("a.txt", "base\n", 0o644)
			for _, args := range [][]string{{"init", "-q"}, {"add", "a.txt"},
				{"-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "0"}} {
				cmd := exec.Command("git", args...)
				cmd.Dir = e.ws
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v %s", args, err, out)
				}
			}
			e.writeFile("agent.sh", tc.agent+"\n", 0o755)
			e.config("agent=command", "agent_command=sh agent.sh", "max_iterations=2", "completion=promise,changes")
			id := e.start("work")
			e.wait(id)
			if r := e.status(id); string(r.Status) != tc.status || r.Reason != tc.reason {
				t.Fatalf("run %s %q, want %s %q", r.Status, r.Reason, tc.status, tc.reason)
			}
		})
	}
	t.Run("refused without git", func(t *testing.T) {
		e := newEnv(t)
		e.startDaemon()
		e.config("agent=command", "agent_command=true", "completion=promise,changes")
		e.trust()
		r := e.loopctl("start", "work")
		if r.code != 64 || !strings.Contains(r.stderr, `completion gate "changes" needs a git repository`) {
			t.Fatalf("start: exit %d, stderr %q; want 64 naming the gate", r.code, r.stderr)
		}
	})
}
