package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// stop of a backlog stops its running task run and ends the backlog
// INTERRUPTED; resume continues both, and the task lands.
func TestBacklogStopAndResume(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	agentLog, prompts := e.backlogRepo()
	hold := filepath.Join(e.home, "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\nHOLD="+hold+"\n", 0o600)
	e.writeFile("PLAN.md", "- [ ] only {#only}\n", 0o644)
	id := e.start("--tasks", "PLAN.md", "stop me")
	eventually(t, "the task run's agent", 30*time.Second, func() bool { _, err := os.Stat(hold + ".waiting"); return err == nil })
	task := taskByID(t, e.tasks(id), "only")
	e.must("stop", id, "--now")
	if code := e.wait(id); code != 3 {
		t.Fatalf("stopped backlog: exit %d, want 3 (INTERRUPTED)", code)
	}
	eventually(t, "the task run to end", 30*time.Second, func() bool { return e.status(task.Run).Status == api.RunInterrupted })
	if r := e.status(id); r.Reason != "user_stop" {
		t.Errorf("backlog reason %q, want user_stop", r.Reason)
	}
	os.Remove(hold)
	e.must("resume", id)
	if code := e.wait(id); code != 0 {
		t.Fatalf("resumed backlog: exit %d: %+v", code, e.tasks(id))
	}
	bt := e.tasks(id)
	if got := taskByID(t, bt, "only"); got.State != "done" || got.Run != task.Run {
		t.Errorf("after resume: %+v, want done by the same task run %s", got, task.Run)
	}
}

// pause of a backlog pauses its running task run after its step and the
// backlog; resume continues both.
func TestBacklogPauseAndResume(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	agentLog, prompts := e.backlogRepo("max_iterations=5")
	hold := filepath.Join(e.home, "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\nHOLD="+hold+"\n", 0o600)
	e.writeFile("PLAN.md", "- [ ] only {#only}\n- [ ] next (after #only) {#next}\n", 0o644)
	id := e.start("--tasks", "PLAN.md", "pause me")
	eventually(t, "the task run's agent", 30*time.Second, func() bool { _, err := os.Stat(hold + ".waiting"); return err == nil })
	task := taskByID(t, e.tasks(id), "only")
	e.must("pause", id)
	eventually(t, "the backlog PAUSED", 30*time.Second, func() bool { return e.status(id).Status == api.RunPaused })
	os.Remove(hold) // the step ends; the task run pauses after it
	eventually(t, "the task run PAUSED", 30*time.Second, func() bool { return e.status(task.Run).Status == api.RunPaused })
	if bt := e.tasks(id); taskByID(t, bt, "next").Run != "" {
		t.Fatalf("a task started while the backlog was paused: %+v", bt.Tasks)
	}
	e.must("resume", id)
	if code := e.wait(id); code != 0 {
		t.Fatalf("resumed backlog: exit %d: %+v", code, e.tasks(id))
	}
	for _, task := range e.tasks(id).Tasks {
		if task.State != "done" {
			t.Errorf("%+v, want done", task)
		}
	}
}

// The backlog's max_cost counts every task run: spent, the backlog is
// ABORTED and its task runs stopped. max_task_cost aborts one task run and
// blocks its task.
func TestBacklogBudgets(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.git("init", "-q", "-b", "main")
	e.writeFile("README", "project\n", 0o644)
	e.writeFile(".gitignore", ".env\n.agent-invocations\n.prompt-*\n", 0o644)
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "project")
	// 100,000 input and 200 output tokens of claude-sonnet-4-5 an
	// invocation: $0.303.
	agent := e.fakeAgent("FAKE_DONE_AT=1", "FAKE_INPUT=100000")
	var plan strings.Builder
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		plan.WriteString("- [ ] task " + id + " {#" + id + "}\n")
	}
	e.writeFile("PLAN.md", plan.String(), 0o644)
	id := e.start("--tasks", "PLAN.md", "--set", agent, "--set", "max_cost=0.7", "spend")
	if code := e.wait(id); code != 2 {
		t.Fatalf("backlog: exit %d, want 2 (ABORTED): %+v", code, e.status(id))
	}
	r := e.status(id)
	if r.Status != api.RunAborted || r.Reason != "max_cost:0.70" {
		t.Fatalf("backlog = %s %s, want ABORTED max_cost:0.70", r.Status, r.Reason)
	}
	// One task at a time: the third task run's $0.909 is over the budget
	// before a fourth starts.
	if started := countType(e.events(id), "TASK_STARTED"); started != 3 {
		t.Errorf("%d tasks started, want 3", started)
	}
	for _, task := range e.tasks(id).Tasks {
		if task.Run != "" {
			eventually(t, "task run "+task.Run+" to end", 30*time.Second, func() bool { return e.status(task.Run).Status.Terminal() })
		}
	}

	// Per task: an agent that never completes spends $0.303 an iteration.
	agent = e.fakeAgent("FAKE_DONE_AT=0", "FAKE_INPUT=100000")
	e.writeFile("PLAN.md", "- [ ] endless {#endless}\n- [ ] after (after #endless) {#after}\n", 0o644)
	id = e.start("--tasks", "PLAN.md", "--set", agent, "--set", "max_task_cost=0.5", "--set", "max_iterations=10", "per task")
	if code := e.wait(id); code != 1 {
		t.Fatalf("backlog: exit %d, want 1 (FAILED): %+v", code, e.tasks(id))
	}
	bt := e.tasks(id)
	endless := taskByID(t, bt, "endless")
	if endless.State != "blocked" || endless.RunStatus != api.RunAborted || !strings.Contains(endless.Why, "max_cost:0.50") || endless.Iterations != 2 {
		t.Errorf("endless = %+v, want blocked by its run ABORTED max_cost:0.50 after 2 iterations", endless)
	}
	if after := taskByID(t, bt, "after"); after.State != "skipped" {
		t.Errorf("after = %+v, want skipped", after)
	}
}
