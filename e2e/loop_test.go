package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// verifyDone is a verification that passes once the agent created done.txt
// and prints a test-runner-like failure until then.
const verifyDone = `verify_command=if [ -f done.txt ]; then echo "ok  widget 0.01s"; else echo "--- FAIL: TestWidget (0.00s)"; echo "    widget_test.go:12: done.txt is missing"; exit 1; fi`

func TestCompletesOnIterationNWithVerification(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=3", "FAKE_COST=0.10"), verifyDone)
	id := e.start("make the widget work")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d, want 0", code)
	}
	r := e.status(id)
	if r.Status != api.RunCompleted || r.Reason != "completed:promise+verify" || r.Iteration != 3 {
		t.Errorf("run = %s %q iteration %d; want COMPLETED completed:promise+verify at iteration 3", r.Status, r.Reason, r.Iteration)
	}
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("exit_code = %v", r.ExitCode)
	}
	steps := e.steps(id)
	var phases []string
	for _, s := range steps {
		phases = append(phases, string(s.Phase)+":"+string(s.Status))
	}
	want := "implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:FAILED implementation:SUCCEEDED verification:SUCCEEDED"
	if strings.Join(phases, " ") != want {
		t.Errorf("steps = %s\nwant    %s", strings.Join(phases, " "), want)
	}
	if got := len(e.invocations()); got != 3 {
		t.Errorf("agent ran %d times, want 3", got)
	}
	// Usage: 3 invocations × 1000 input, 200 output; cost as reported
	// (sonnet is priced: 3×(1000×3 + 200×15)/1e6 = $0.018).
	if r.Usage.InputTokens != 3000 || r.Usage.OutputTokens != 600 || reportedCost(r.Usage) < 0.2999 || reportedCost(r.Usage) > 0.3001 {
		t.Errorf("usage = %+v", r.Usage)
	}
	evs := e.events(id)
	if n := countType(evs, "RUN_COMPLETED"); n != 1 {
		t.Errorf("%d RUN_COMPLETED events", n)
	}
	// Nothing is written into the workspace but by the agent and the
	// user's commands: logs, prompts and status files live in LOOPD_HOME.
	for _, s := range steps {
		if !strings.HasPrefix(s.LogPath, e.home) {
			t.Errorf("step log %s is not under LOOPD_HOME", s.LogPath)
		}
	}
	// The run's directory holds its steps' logs and prompts, 0600.
	for _, s := range steps {
		files := []string{s.LogPath}
		if s.Phase == api.PhaseImplementation {
			files = append(files, strings.TrimSuffix(s.LogPath, ".log")+".prompt")
		}
		for _, f := range files {
			if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("step %d: %s: %v %v, want a 0600 file", s.Seq, f, fi, err)
			}
		}
	}
	entries, _ := os.ReadDir(e.ws)
	for _, ent := range entries {
		name := ent.Name()
		ok := name == ".loop" || name == ".env" || name == "done.txt" || strings.HasPrefix(name, "work-") ||
			strings.HasPrefix(name, ".prompt-") || name == ".agent-invocations"
		if !ok {
			t.Errorf("unexpected file in the workspace: %s", name)
		}
	}
}

func TestPromiseInProseDoesNotComplete(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_PROSE_PROMISE=1"), "max_iterations=2")
	id := e.start("goal")
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d, want 2 (ABORTED)", code)
	}
	r := e.status(id)
	if r.Status != api.RunAborted || r.Reason != "max_iterations:2" {
		t.Errorf("run = %s %q, want ABORTED max_iterations:2", r.Status, r.Reason)
	}
	for _, s := range e.steps(id) {
		if s.Promise {
			t.Errorf("step %d counted a promise that was only mentioned in prose", s.Seq)
		}
	}
}

func TestMaxIterationsAbortsAndWaitExits2(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent(), verifyDone, "max_iterations=4", "max_consecutive_verification_failures=0")
	id := e.start("never finishes")
	r := e.loopctl("wait", id)
	if r.code != 2 {
		t.Fatalf("wait exit %d (%s%s), want 2", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "ABORTED") || !strings.Contains(r.stdout, "max_iterations:4") {
		t.Errorf("wait output %q", r.stdout)
	}
	run := e.status(id)
	if run.Reason != "max_iterations:4" || run.Iteration != 4 {
		t.Errorf("run = %q at iteration %d", run.Reason, run.Iteration)
	}
	if got := len(e.invocations()); got != 4 {
		t.Errorf("agent ran %d times, want exactly 4", got)
	}
	evs := e.events(id)
	if n := countType(evs, "RUN_ABORTED"); n != 1 {
		t.Errorf("%d RUN_ABORTED events", n)
	}
	var payload struct {
		RunID       string         `json:"run_id"`
		Reason      string         `json:"reason"`
		Description string         `json:"description"`
		Condition   map[string]any `json:"condition"`
	}
	for _, ev := range evs {
		if ev.Type == "RUN_ABORTED" {
			_ = json.Unmarshal(ev.Payload, &payload)
		}
	}
	if payload.Reason != "max_iterations:4" || payload.Condition["type"] != "max_iterations" || payload.RunID != id {
		t.Errorf("terminal payload = %+v", payload)
	}
}

func TestFailingVerificationReachesNextPrompt(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=2"), verifyDone)
	id := e.start("make the widget work")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	// Step 1 is the first prompt; step 3 is the agent's second prompt.
	first, _ := os.ReadFile(filepath.Join(e.ws, ".prompt-1"))
	second, _ := os.ReadFile(filepath.Join(e.ws, ".prompt-3"))
	if strings.Contains(string(first), "Feedback") {
		t.Errorf("the first prompt has feedback:\n%s", first)
	}
	for _, want := range []string{"make the widget work", "Feedback from iteration 1", "--- FAIL: TestWidget", "done.txt is missing", "<promise>COMPLETE</promise>"} {
		if !strings.Contains(string(second), want) {
			t.Errorf("second prompt lacks %q:\n%s", want, second)
		}
	}
	// The prompt is also in $LOOP_PROMPT_FILE, under LOOPD_HOME.
	matches, _ := filepath.Glob(filepath.Join(e.home, "runs", id, "0003-implementation.prompt"))
	if len(matches) != 1 {
		t.Fatalf("no prompt file for step 3 under LOOPD_HOME")
	}
	onDisk, _ := os.ReadFile(matches[0])
	if string(onDisk) != string(second) {
		t.Error("$LOOP_PROMPT_FILE differs from the prompt on stdin")
	}
}

func TestBadConfigCreatesNothing(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", "agent_command=true", "max_iterations=many", "modle=x")
	r := e.loopctl("start", "goal")
	if r.code != 64 {
		t.Fatalf("exit %d, want 64", r.code)
	}
	cfg := filepath.Join(e.ws, ".loop", "config")
	for _, want := range []string{cfg + ":3: max_iterations:", cfg + `:4: modle: unknown key (did you mean "model"?)`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if out := e.must("list", "--all-workspaces", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("a run was created: %s", out)
	}
	e.config("agent=command", "agent_command=true")
	e.writeFile(".loop/stop.json", `{"conditions":[{"type":"max_iterations","count":3},{"type":"any","conditions":[]}]}`, 0o644)
	r = e.loopctl("start", "goal")
	if r.code != 64 || !strings.Contains(r.stderr, "conditions[1]") {
		t.Errorf("bad stop.json: exit %d\n%s", r.code, r.stderr)
	}
}

func TestRunNames(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"))
	id := e.start("goal")
	e.wait(id)
	for _, ref := range []string{id, id[:6], "last"} {
		if got := e.status(ref).ID; got != id {
			t.Errorf("status %s = %s", ref, got)
		}
	}
	if r := e.loopctl("status", "ffffffffffff"); r.code != 66 {
		t.Errorf("unknown run: exit %d, want 66", r.code)
	}
	if r := e.loopctl("status"); r.code != 64 {
		t.Errorf("missing RUN: exit %d, want 64", r.code)
	}
}
