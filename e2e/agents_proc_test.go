package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// Claude Code refuses --dangerously-skip-permissions as root unless
// IS_SANDBOX=1: the claude preset then ends the run at once, saying what to
// do, instead of failing every step; with IS_SANDBOX=1 in the env file the
// resumed run goes ahead.
func TestClaudePresetAsRootWithoutSandboxAborts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	bin := t.TempDir()
	if err := os.Symlink(scriptedAgent(), filepath.Join(bin, "claude")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH")) // the daemon finds `claude` there
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=claude", "max_iterations=3")
	e.writeFile(".env", "FAKE_DONE_AT=1\n", 0o600)
	id := e.start("goal")
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d, want 2 (ABORTED)", code)
	}
	r := e.status(id)
	if r.Reason != "fatal:agent_refused_root" {
		t.Fatalf("reason %q (%s), want fatal:agent_refused_root", r.Reason, r.Description)
	}
	for _, want := range []string{"IS_SANDBOX=1", "env_file", "normal user", "loopctl resume"} {
		if !strings.Contains(r.Description, want) {
			t.Errorf("description lacks %q: %s", want, r.Description)
		}
	}
	if n := len(e.invocations()); n != 0 {
		t.Errorf("the agent ran %d times", n)
	}
	if steps := e.steps(id); len(steps) != 0 {
		t.Errorf("%d steps recorded, want none", len(steps))
	}

	e.writeFile(".env", "FAKE_DONE_AT=1\nIS_SANDBOX=1\n", 0o600)
	e.trust() // the changed env file is loaded only once trusted again
	e.must("resume", id)
	if code := e.wait(id); code != 0 {
		t.Fatalf("after IS_SANDBOX=1: wait exit %d, want 0; %+v", code, e.status(id))
	}
	if n := len(e.invocations()); n != 1 {
		t.Errorf("the agent ran %d times, want 1", n)
	}
}

// reportedCost is the agent-reported cost of u, 0 when none was reported.
func reportedCost(u api.Usage) float64 {
	v, _ := u.ReportedCost()
	return v
}

// transcriptFixture is the path of a parser fixture (real captured output).
func transcriptFixture(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(repoRoot(), "internal", "transcript", "testdata", name)
}

// A real Claude Code result whose cache writes are 1-hour writes is priced
// at the 1-hour rate (2× input), which is what Claude Code itself charged:
// at the 5-minute rate the step would cost $0.0345 instead of $0.0540.
func TestOneHourCacheWritesArePricedAtTheirRate(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", "agent_command=cat "+transcriptFixture(t, "claude_cache_1h.jsonl"),
		"model=claude-haiku-4-5", "max_iterations=1")
	id := e.start("goal")
	e.wait(id)
	steps := e.steps(id)
	if len(steps) != 1 {
		t.Fatalf("%d steps", len(steps))
	}
	u := steps[0].Usage
	if u.CacheWriteTokens != 25919 || u.CacheReadTokens != 13963 || u.InputTokens != 10 || u.OutputTokens != 150 {
		t.Fatalf("usage %+v", u)
	}
	if !near4(u.CostUSD, 0.0539943) || !near4(reportedCost(u), 0.0539943) {
		t.Errorf("cost $%.7f priced, $%.7f reported; want $0.0539943 for both", u.CostUSD, reportedCost(u))
	}
}

func near4(a, b float64) bool { return a-b < 1e-7 && b-a < 1e-7 }

// max_cost with a model loopd cannot price only counts what the agent
// reports: `start` says so (stderr, RUN_CREATED), and a priced model or an
// alias says nothing.
func TestStartWarnsWhenMaxCostCannotBePriced(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	cases := []struct {
		model string
		warn  bool
	}{
		{"my-local-model", true},
		{"gpt-5.1-codex", false},
		{"sonnet", false},
		{"gemini-2.5-flash", false},
	}
	for _, tc := range cases {
		e.config("agent=command", "agent_command=true", "model="+tc.model, "max_cost=5", "max_iterations=1")
		e.trust()
		r := e.loopctl("start", "goal")
		if r.code != 0 {
			t.Fatalf("%s: start exit %d: %s", tc.model, r.code, r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		warned := strings.Contains(r.stderr, "warning: max_cost is set but the model "+tc.model+" cannot be priced")
		if warned != tc.warn {
			t.Errorf("%s: warned %v, want %v; stderr:\n%s", tc.model, warned, tc.warn, r.stderr)
		}
		var payload struct {
			Warnings []string `json:"warnings"`
		}
		for _, ev := range e.events(id) {
			if ev.Type == "RUN_CREATED" {
				if err := json.Unmarshal(ev.Payload, &payload); err != nil {
					t.Fatal(err)
				}
			}
		}
		// (Other warnings may stand beside it: no verify_command here.)
		if got := slices.ContainsFunc(payload.Warnings, func(w string) bool { return strings.Contains(w, "price."+tc.model+"=") }); got != tc.warn {
			t.Errorf("%s: RUN_CREATED warnings %q, want a warning: %v", tc.model, payload.Warnings, tc.warn)
		}
		e.wait(id)
	}
	// Without max_cost there is nothing to warn about.
	e.config("agent=command", "agent_command=true", "model=my-local-model", "max_iterations=1")
	e.trust()
	if r := e.loopctl("start", "goal"); strings.Contains(r.stderr, "cannot be priced") {
		t.Errorf("warned without max_cost: %s", r.stderr)
	} else {
		e.wait(strings.TrimSpace(r.stdout))
	}
}

// An agent that reports no cost has a reported_cost_usd of null, not 0, in
// step and run JSON, and `status` does not show "$0.00" for it.
func TestUnreportedCostIsNull(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	// Codex prints usage without a cost.
	e.config("agent=command", "agent_command=cat "+transcriptFixture(t, "codex_exec.jsonl"), "model=gpt-5-codex", "max_iterations=1")
	id := e.start("goal")
	e.wait(id)
	for _, out := range []string{e.must("steps", id, "--json"), e.must("status", id, "--json")} {
		if !strings.Contains(out, `"reported_cost_usd": null`) && !strings.Contains(out, `"reported_cost_usd":null`) {
			t.Errorf("reported_cost_usd is not null:\n%s", out)
		}
	}
	st := e.steps(id)[0].Usage
	if st.ReportedCostUSD != nil || st.CostUSD <= 0 {
		t.Errorf("step usage %+v: want a priced cost and no reported one", st)
	}
	text := e.must("status", id)
	if strings.Contains(text, "agent-reported $0.00") || !strings.Contains(text, "no agent-reported cost") {
		t.Errorf("status:\n%s", text)
	}
}

// `daemon stop --kill-steps` signals every step before it waits for any:
// steps that ignore SIGTERM then spend their grace periods side by side,
// not one after another. Each step's TERM handler records that it got TERM
// and waits to see all four steps get it within its grace; stopped one
// after another, only the last would.
func TestDaemonStopKillStepsSignalsAllFirst(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	marks := t.TempDir()
	agent := filepath.Join(e.ws, "agent.sh")
	e.writeFile("agent.sh", `marks=$1
trap 'touch "$marks/term-$$"; i=0
  while [ "$(ls "$marks" | grep -c "^term-")" -lt 4 ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
  [ $i -lt 400 ] && touch "$marks/all-$$"' TERM
touch "$marks/up-$$"
while :; do sleep 0.05; done
`, 0o755)
	for i := range 4 {
		dir := filepath.Join(e.ws, "w"+strconv.Itoa(i))
		if err := os.MkdirAll(filepath.Join(dir, ".loop"), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := "agent=command\nagent_command=sh " + agent + " " + marks + "\nmax_iterations=1\n"
		if err := os.WriteFile(filepath.Join(dir, ".loop", "config"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		e.start("-C", dir, "goal")
	}
	eventually(t, "four steps running", 30*time.Second, func() bool { return len(globIn(marks, "up-*")) == 4 })
	e.must("daemon", "stop", "--kill-steps")
	<-e.exited
	if got := globIn(marks, "term-*"); len(got) != 4 {
		t.Fatalf("%d steps got SIGTERM, want 4", len(got))
	}
	if got := globIn(marks, "all-*"); len(got) != 4 {
		t.Errorf("%d of 4 steps saw every step get SIGTERM within their grace: the steps were stopped one after another", len(got))
	}
}

func globIn(dir, pattern string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	return m
}
