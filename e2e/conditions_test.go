package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// Each agent run costs exactly $0.21 at claude-opus-4-5 list prices:
// 2,000 input × $5 + 1,000 output × $25 + 100,000 cache reads × $0.50 +
// 20,000 cache writes × $6.25, per million. With max_cost=0.80 the priced
// total crosses the budget on the 4th run ($0.84), not before ($0.63).
func TestMaxCostStopsWhereThePricedCostCrosses(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_MODEL=claude-opus-4-5-20251101", "FAKE_INPUT=2000", "FAKE_OUTPUT=1000",
		"FAKE_CACHE_READ=100000", "FAKE_CACHE_WRITE=20000", "FAKE_COST=0.01", "FAKE_PARALLEL=3"), "max_cost=0.80")
	id := e.start("goal")
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d, want 2", code)
	}
	r := e.status(id)
	if r.Reason != "max_cost:0.80" {
		t.Errorf("reason %q, want max_cost:0.80", r.Reason)
	}
	if n := len(e.invocations()); n != 4 {
		t.Errorf("the agent ran %d times, want exactly 4", n)
	}
	u := r.Usage
	// Parallel tool calls repeat one message three times with the same
	// usage: it is counted once per message id.
	if u.InputTokens != 8000 || u.OutputTokens != 4000 || u.CacheReadTokens != 400000 || u.CacheWriteTokens != 80000 {
		t.Errorf("tokens = %+v; want 4 × (2000, 1000, 100000, 20000)", u)
	}
	if u.CostUSD < 0.8399 || u.CostUSD > 0.8401 || reportedCost(u) < 0.0399 || reportedCost(u) > 0.0401 {
		t.Errorf("cost = $%.4f priced, $%.4f reported; want $0.84 and $0.04", u.CostUSD, reportedCost(u))
	}
	var found bool
	for _, c := range r.Conditions {
		if c.Type == "max_cost" {
			found = true
			if !c.Met || c.Kind != "limit" || c.Progress == nil || *c.Progress != 1 {
				t.Errorf("max_cost condition = %+v", c)
			}
		}
	}
	if !found {
		t.Error("status does not list the max_cost condition")
	}
}

func TestUnknownModelCostIsReportedNotZero(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_MODEL=acme-coder-1"), "max_cost=1", "max_iterations=2")
	id := e.start("goal")
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d", code)
	}
	r := e.status(id)
	if r.Reason != "max_iterations:2" || !r.Usage.CostUnknown {
		t.Errorf("run = %q, cost_unknown %v", r.Reason, r.Usage.CostUnknown)
	}
	if !strings.Contains(strings.Join(r.Warnings, "\n"), "acme-coder-1") {
		t.Errorf("warnings %q do not name the unpriced model", r.Warnings)
	}
	var unmeasured int
	for _, ev := range e.events(id) {
		if ev.Type == "CONDITION_PROGRESSED" && strings.Contains(string(ev.Payload), `"unmeasurable":true`) {
			unmeasured++
		}
	}
	if unmeasured == 0 {
		t.Error("no event says the cost could not be measured")
	}
	if out := e.must("status", id); !strings.Contains(out, "warning:") || !strings.Contains(out, "+?") {
		t.Errorf("human status does not show the unknown cost:\n%s", out)
	}
}

// Quick steps and a cache: the run stops at exactly max_iterations.
func TestMaxIterationsIsExactWithFastSteps(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", "agent_command=true", "max_iterations=7")
	id := e.start("goal")
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d", code)
	}
	if r := e.status(id); r.Reason != "max_iterations:7" || r.Steps != 7 || r.Iteration != 7 {
		t.Errorf("run = %q after %d steps, iteration %d", r.Reason, r.Steps, r.Iteration)
	}
}

func TestStopFileConditions(t *testing.T) {
	tests := []struct {
		name       string
		stopJSON   string
		flag       bool // pass it with --stop-file instead of .loop/stop.json
		wantCode   int
		wantReason string
		wantIter   int
	}{
		{"success: file created", `{"success_conditions":[{"type":"file_created","path":"work-2.txt"}]}`, false, 0, "condition:file_created", 2},
		{"failure: output pattern", `{"failure_conditions":[{"type":"output_pattern","pattern":"Iteration 3:"}]}`, false, 1, "condition:output_pattern", 3},
		{"limit: composite all", `{"conditions":[{"type":"all","conditions":[{"type":"max_iterations","count":2},{"type":"file_created","path":"work-2.txt"}]}]}`, false, 2, "condition:all", 2},
		{"success: custom script via --stop-file", `{"success_conditions":[{"type":"custom_script","script":"check.sh","args":["work-3.txt"]}]}`, true, 0, "condition:custom_script", 3},
		{"failure beats success in the same evaluation", `{"success_conditions":[{"type":"file_created","path":"work-2.txt"}],"failure_conditions":[{"type":"file_contains","path":"work-2.txt","content":"2"}]}`, false, 1, "condition:file_contains", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.startDaemon()
			e.config("agent=command", e.fakeAgent())
			e.writeFile("check.sh", "#!/bin/sh\ntest -f \"$1\" && echo \"found $1\"\n", 0o755)
			args := []string{"goal"}
			if tt.flag {
				e.writeFile("conditions.json", tt.stopJSON, 0o644)
				args = append(args, "--stop-file", "conditions.json")
			} else {
				e.writeFile(".loop/stop.json", tt.stopJSON, 0o644)
			}
			id := e.start(args...)
			if code := e.wait(id); code != tt.wantCode {
				t.Fatalf("wait exit %d, want %d", code, tt.wantCode)
			}
			r := e.status(id)
			if r.Reason != tt.wantReason || r.Iteration != tt.wantIter {
				t.Errorf("run = %q at iteration %d; want %q at %d", r.Reason, r.Iteration, tt.wantReason, tt.wantIter)
			}
		})
	}
}

func TestUserSignal(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=2"))
	e.writeFile(".loop/stop.json", `{"success_conditions":[{"type":"user_signal"}]}`, 0o644)
	id := e.start("goal")
	e.runningStep(id, 2)
	if out := e.must("signal", id); !strings.Contains(out, "user_signal") {
		t.Errorf("signal said %q", out)
	}
	e.release("go-2")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	if r := e.status(id); r.Reason != "condition:user_signal" || r.Steps != 2 {
		t.Errorf("run = %q after %d steps; want condition:user_signal right after the running step", r.Reason, r.Steps)
	}
}

func TestStatusShowsConditionsAndDebugHistory(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent(), "max_iterations=3", "max_tokens=100000", "max_duration=1h")
	id := e.start("goal")
	e.wait(id)
	var r api.Run
	if err := json.Unmarshal([]byte(e.must("status", id, "--json", "--debug")), &r); err != nil {
		t.Fatal(err)
	}
	types := map[string]api.Condition{}
	for _, c := range r.Conditions {
		types[c.Type] = c
	}
	for _, want := range []string{"max_iterations", "max_tokens", "max_duration", "max_consecutive_failures", "completion"} {
		c, ok := types[want]
		if !ok {
			t.Errorf("no %s condition in status", want)
			continue
		}
		if c.Kind == "" || c.Description == "" {
			t.Errorf("%s: %+v lacks kind or description", want, c)
		}
	}
	if c := types["max_tokens"]; c.Progress == nil || *c.Progress < 0.0359 || *c.Progress > 0.0361 {
		t.Errorf("max_tokens progress = %v, want 0.036 (3 × 1200 of 100000)", c.Progress)
	}
	if len(r.Evaluations) != 3 {
		t.Errorf("--debug shows %d evaluations, want 3 (one per step)", len(r.Evaluations))
	}
	for _, ev := range r.Evaluations {
		if len(ev.Results) != 5 || ev.StepID == 0 {
			t.Errorf("evaluation %+v: want 5 results and its step", ev)
		}
	}
	human := e.must("status", id, "--debug")
	for _, want := range []string{"stop conditions:", "after 3 iterations", "[####################] 100%", "evaluations"} {
		if !strings.Contains(human, want) {
			t.Errorf("status lacks %q:\n%s", want, human)
		}
	}
}

// specific_tests_pass completes a run as soon as the named tests pass,
// read from real `go test -v` output, before the rest of the suite does.
func TestSpecificTestsPassCompletesTheRun(t *testing.T) {
	for _, tc := range []struct{ name, tests string }{
		{"exact names", `["TestAdd", "TestSub"]`},
		{"glob", `["TestAdd", "TestSu*"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			copyQuickstartProject(t, e.ws)
			gocache, _ := exec.Command("go", "env", "GOCACHE").Output()
			e.writeFile(".env", "GOCACHE="+strings.TrimSpace(string(gocache))+"\nGOFLAGS=-count=1\n", 0o600)
			e.startDaemon()
			e.writeFile(".loop/stop.json", `{"success_conditions":[{"type":"specific_tests_pass","tests":`+tc.tests+`}]}`, 0o644)
			id := e.start()
			if code := e.wait(id); code != 0 {
				t.Fatalf("wait exit %d", code)
			}
			r := e.status(id)
			if r.Reason != "condition:specific_tests_pass" || r.Iteration != 2 {
				t.Errorf("run = %q at iteration %d; want condition:specific_tests_pass at 2 (Add, then Sub fixed)", r.Reason, r.Iteration)
			}
			steps := e.steps(id)
			last := steps[len(steps)-1]
			if last.Tests == nil || *last.Tests.Passed != 2 || *last.Tests.Failed != 2 {
				t.Errorf("last verification tests = %+v; want 2 passed, 2 failed", last.Tests)
			}
			out := e.must("steps", id)
			if !strings.Contains(out, "2 passed, 2 failed (TestMul, TestMax)") {
				t.Errorf("steps do not show the test summary:\n%s", out)
			}
		})
	}
}

func copyQuickstartProject(t *testing.T, dst string) {
	t.Helper()
	src := filepath.Join(repoRoot(), "examples", "quickstart", "project")
	if out, err := exec.Command("cp", "-R", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy project: %v %s", err, out)
	}
	// The demo agent pauses for a second to be watchable; not here.
	agent := filepath.Join(dst, ".loop", "demo-agent.sh")
	b, _ := os.ReadFile(agent)
	_ = os.WriteFile(agent, []byte(strings.Replace(string(b), "sleep 1", ":", 1)), 0o755)
}

// A test command that exits 0 although its output shows failing tests has
// failed verification.
func TestFailingTestsWithExitZeroFailVerification(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent(), "max_iterations=1",
		`verify_command=printf '%s\n' "=== RUN   TestParse" "--- FAIL: TestParse (0.00s)" "=== RUN   TestTable" "--- PASS: TestTable (0.00s)" "FAIL"; exit 0`)
	id := e.start("goal")
	e.wait(id)
	steps := e.steps(id)
	v := steps[len(steps)-1]
	if v.Phase != api.PhaseVerification || v.Status != api.StepFailed || v.ExitCode == nil || *v.ExitCode != 0 ||
		!strings.Contains(v.Error, "exited 0") || v.Tests == nil || *v.Tests.Failed != 1 || v.Tests.FailedNames[0] != "TestParse" {
		t.Errorf("verification = %+v, tests %+v", v, v.Tests)
	}
}

// A resume --set that raises a limit shows the new limit at once, also
// while the run waits in the queue: the evaluation made under the old limit
// (after the step before the pause) is not shown against the new
// conditions. The one slot is held by a run in another workspace, so the
// resumed run stays PENDING and no new evaluation can hide a stale one.
func TestResumeSetShowsTheNewLimitAtOnce(t *testing.T) {
	e := newEnv(t)
	e.startDaemon("--max-concurrent-runs", "1")
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=release-%d"), verifyDone, "max_iterations=3")
	id := e.start("goal")
	e.runningStep(id, 1)
	e.must("pause", id)
	e.release("release-1")
	eventually(t, "the pause", 30*time.Second, func() bool { return e.status(id).Status == api.RunPaused })
	limit := func() api.Condition {
		for _, c := range e.status(id).Conditions {
			if c.Type == "max_iterations" {
				return c
			}
		}
		t.Fatal("status lists no max_iterations condition")
		return api.Condition{}
	}
	count := func(c api.Condition) int {
		var spec struct{ Count int }
		if err := json.Unmarshal(c.Spec, &spec); err != nil {
			t.Fatalf("max_iterations spec %s: %v", c.Spec, err)
		}
		return spec.Count
	}
	if c := limit(); count(c) != 3 || c.Reason != "0/3 done" {
		t.Fatalf("paused: the limit is %d (%q), want 3 evaluated after step 1", count(c), c.Reason)
	}

	other := t.TempDir()
	e.writeFileIn(other, ".env", "FAKE_WAIT_FILE=hold\n")
	e.writeFileIn(other, ".loop/config", "agent=command\nagent_command="+scriptedAgent()+"\nmax_iterations=1\n")
	holder := e.start("-C", other, "hold the slot")
	e.runningStep(holder, 1)

	e.must("resume", id, "--set", "max_iterations=7")
	if st := e.status(id).Status; st != api.RunPending {
		t.Fatalf("resumed behind the holder: %s, want PENDING", st)
	}
	if c := limit(); count(c) != 7 || c.Description != "after 7 iterations" {
		t.Fatalf("right after resume --set max_iterations=7 status shows the limit %d (%q, %q)", count(c), c.Description, c.Reason)
	}
	if out := e.must("status", id); !strings.Contains(out, "after 7 iterations") {
		t.Fatalf("loopctl status does not show the raised limit:\n%s", out)
	}
	// Once the run goes on, its own evaluations of the new set are shown.
	e.writeFileIn(other, "hold", "")
	eventually(t, "an evaluation under the raised limit", 30*time.Second, func() bool {
		return strings.HasSuffix(limit().Reason, "/7 done")
	})
}
