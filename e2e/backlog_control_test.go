package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
	var types []string
	for _, c := range r.Conditions {
		types = append(types, c.Type)
		if c.Type == "max_cost" && (!c.Met || c.Description != "when its task runs cost $0.70 together") {
			t.Errorf("the backlog's max_cost condition = %+v", c)
		}
	}
	if strings.Join(types, ",") != "max_cost,completion" {
		t.Errorf("the backlog's conditions are %v, want its budget and its completion", types)
	}
	if r.Usage.CostUSD < 0.7 || r.Usage.InputTokens != 300000 {
		t.Errorf("backlog usage = %+v, want its three task runs' ($0.909, 300,000 input tokens)", r.Usage)
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
	// No verify_command: the backlog's branch lands as any such run does,
	// said to be untested.
	if res, ref, code := e.landJSON(id); code != 0 || res.Verified || !strings.Contains(res.Note, "no verify_command") {
		t.Errorf("land of a backlog without verify_command: exit %d, %+v, refusal %+v", code, res, ref)
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

// A graceful stop lets the task run finish its step; a backlog resumed
// before that step ends does not take the task run's INTERRUPTED for a
// failure: it resumes the task run once it has stopped, and the task lands.
func TestBacklogResumedBeforeItsTaskRunStopped(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	agentLog, prompts := e.backlogRepo()
	hold := filepath.Join(e.home, "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\nHOLD="+hold+"\n", 0o600)
	e.writeFile("PLAN.md", "- [ ] only {#only}\n", 0o644)
	id := e.start("--tasks", "PLAN.md", "stop me gently")
	eventually(t, "the task run's agent", 30*time.Second, func() bool { _, err := os.Stat(hold + ".waiting"); return err == nil })
	task := taskByID(t, e.tasks(id), "only")
	e.must("stop", id)
	if code := e.wait(id); code != 3 {
		t.Fatalf("stopped backlog: exit %d, want 3", code)
	}
	if r := e.status(task.Run); r.Status != api.RunRunning || r.StopRequested != "graceful" {
		t.Fatalf("task run %s %q, want RUNNING with a graceful stop asked", r.Status, r.StopRequested)
	}
	e.must("resume", id)
	eventually(t, "the backlog RUNNING", 30*time.Second, func() bool { return e.status(id).Status == api.RunRunning })
	os.Remove(hold) // the step ends; the task run stops, then goes on
	if code := e.wait(id); code != 0 {
		t.Fatalf("resumed backlog: exit %d: %+v", code, e.tasks(id))
	}
	if got := taskByID(t, e.tasks(id), "only"); got.State != "done" || got.Run != task.Run {
		t.Errorf("%+v, want done by task run %s", got, task.Run)
	}
	evs := e.events(task.Run)
	if countType(evs, "RUN_INTERRUPTED") != 1 || countType(evs, "RUN_RESUMED") != 1 {
		t.Errorf("task run events: %v, want it interrupted once and resumed once", eventTypes(evs))
	}
}

// A task run that waits for its agent's usage limit makes its task
// waiting; it goes on by itself and the task lands.
func TestBacklogTaskWaits(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.git("init", "-q", "-b", "main")
	e.writeFile("README", "project\n", 0o644)
	e.writeFile(".gitignore", ".env\n.agent-invocations\n.prompt-*\n.rate-limited\n", 0o644)
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "project")
	agent := e.fakeAgent("FAKE_DONE_AT=1", "FAKE_RATE_LIMIT_ONCE=3")
	e.writeFile("PLAN.md", "- [ ] limited {#limited}\n", 0o644)
	id := e.start("--tasks", "PLAN.md", "--set", agent, "wait for the limit")
	eventually(t, "the task waiting", 30*time.Second, func() bool { return taskByID(t, e.tasks(id), "limited").State == "waiting" })
	if r := e.status(taskByID(t, e.tasks(id), "limited").Run); r.Status != api.RunWaiting {
		t.Errorf("task run %s, want WAITING", r.Status)
	}
	if code := e.wait(id); code != 0 {
		t.Fatalf("exit %d: %+v", code, e.tasks(id))
	}
	if got := taskByID(t, e.tasks(id), "limited"); got.State != "done" {
		t.Errorf("%+v, want done", got)
	}
	// Into waiting, then out of it: back to running, or straight to
	// landing when the run completed before the backlog's next pass.
	changes := taskStates(t, e.events(id))
	if !slices.Contains(changes, "limited running>waiting") ||
		!(slices.Contains(changes, "limited waiting>running") || slices.Contains(changes, "limited waiting>landing")) ||
		!(slices.Contains(changes, "limited running>landing") || slices.Contains(changes, "limited waiting>landing")) {
		t.Errorf("TASK_STATE events %v, want the task into waiting, out of it, and into landing", changes)
	}
}

// Every task change is followed through events: pending to ready and
// running to landing carry TASK_STATE, landing before the task's land.
func TestBacklogTaskStateEvents(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.backlogRepo()
	e.writeFile("PLAN.md", "- [ ] first {#first}\n- [ ] then (after #first) {#then}\n", 0o644)
	id := e.start("--tasks", "PLAN.md", "two in a row")
	if code := e.wait(id); code != 0 {
		t.Fatalf("backlog: exit %d: %+v", code, e.tasks(id))
	}
	evs := e.events(id)
	changes := taskStates(t, evs)
	for _, want := range []string{"then pending>ready", "first running>landing", "then running>landing"} {
		if !slices.Contains(changes, want) {
			t.Errorf("TASK_STATE events %v, want %q among them", changes, want)
		}
	}
	// The order a follower sees: first lands (landing, then TASK_LANDED)
	// before then is ready.
	var order []string
	for _, ev := range evs {
		var p struct{ Task, From, To string }
		_ = json.Unmarshal(ev.Payload, &p)
		switch {
		case ev.Type == "TASK_STATE":
			order = append(order, p.Task+" "+p.To)
		case ev.Type == "TASK_LANDED":
			order = append(order, p.Task+" landed")
		}
	}
	want := []string{"first landing", "first landed", "then ready", "then landing", "then landed"}
	if got := strings.Join(order, ", "); !strings.Contains(got, strings.Join(want, ", ")) {
		t.Errorf("task events in order %q, want %q within", got, strings.Join(want, ", "))
	}
}

// taskStates lists a backlog's TASK_STATE events as "task from>to".
func taskStates(t *testing.T, evs []api.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Type != "TASK_STATE" {
			continue
		}
		var p struct{ Task, From, To string }
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatalf("TASK_STATE payload %s: %v", ev.Payload, err)
		}
		out = append(out, p.Task+" "+p.From+">"+p.To)
	}
	return out
}

// A task run is landed, resumed and paused only through its backlog: land
// (with or without --push), resume (with or without --onto-base) and pause
// of the task run itself are refused with exit 64, naming the command to
// use instead, and change nothing: not the checkout, not the task run, not
// the backlog's tasks.
func TestBacklogTaskRunRefusesDirectControl(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.backlogRepo()
	e.writeFile("PLAN.md", "- [ ] only {#only}\n", 0o644)
	e.git("add", "PLAN.md")
	e.git("commit", "-q", "-m", "plan")
	id := e.start("--tasks", "PLAN.md", "refuse direct control")
	if code := e.wait(id); code != 0 {
		t.Fatalf("backlog: exit %d: %+v", code, e.tasks(id))
	}
	task := taskByID(t, e.tasks(id), "only")
	before, run, evs := e.checkoutState(), e.status(task.Run), len(e.events(task.Run))
	for _, c := range []struct {
		args    []string
		instead string
	}{
		{[]string{"land", task.Run}, "loopctl land " + id},
		{[]string{"land", task.Run, "--push"}, "loopctl land " + id},
		{[]string{"resume", task.Run}, "loopctl resume " + id},
		{[]string{"resume", task.Run, "--onto-base"}, "loopctl resume " + id},
		{[]string{"pause", task.Run}, "loopctl pause " + id},
	} {
		r := e.loopctl(c.args...)
		if r.code != 64 || !strings.Contains(r.stderr, "task run of backlog "+id) || !strings.Contains(r.stderr, c.instead) {
			t.Errorf("loopctl %v: exit %d, stderr %q; want 64 naming backlog %s and %q", c.args, r.code, r.stderr, id, c.instead)
		}
	}
	if e.checkoutState() != before {
		t.Error("a refused command changed the checkout")
	}
	if after := e.status(task.Run); after.Status != run.Status || after.Iteration != run.Iteration {
		t.Errorf("task run after the refusals: %s iteration %d, want %s iteration %d", after.Status, after.Iteration, run.Status, run.Iteration)
	}
	if n := len(e.events(task.Run)); n != evs {
		t.Errorf("task run has %d events after the refusals, want %d", n, evs)
	}
	if got := taskByID(t, e.tasks(id), "only"); got.State != "done" || got.Run != task.Run {
		t.Errorf("task after the refusals: %+v, want done by %s", got, task.Run)
	}
	// The backlog itself still lands.
	e.must("land", id)
}

// A blocked task's run, which `loopctl resume` would otherwise restart
// behind its backlog's back, is re-opened only by `tasks --retry`: resume
// of it is refused and it stays ended, its task blocked.
func TestBacklogBlockedTaskRunNotResumedDirectly(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	agentLog, prompts := e.backlogRepo("max_iterations=1")
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\nNEVER=stuck\n", 0o600)
	e.writeFile("PLAN.md", "- [ ] stuck {#stuck}\n", 0o644)
	id := e.start("--tasks", "PLAN.md", "block it")
	if code := e.wait(id); code == 0 {
		t.Fatalf("backlog completed, want it to end with its task blocked: %+v", e.tasks(id))
	}
	task := taskByID(t, e.tasks(id), "stuck")
	if task.State != "blocked" {
		t.Fatalf("task %+v, want blocked", task)
	}
	run, runs := e.status(task.Run), agentRuns(t, agentLog)["stuck"]
	for _, args := range [][]string{{"resume", task.Run}, {"resume", task.Run, "--set", "max_iterations=3"}} {
		r := e.loopctl(args...)
		if r.code != 64 || !strings.Contains(r.stderr, "loopctl tasks "+id+" --retry ID") {
			t.Errorf("loopctl %v: exit %d, stderr %q; want 64 naming loopctl tasks %s --retry ID", args, r.code, r.stderr, id)
		}
	}
	if after := e.status(task.Run); after.Status != run.Status || after.Reason != run.Reason {
		t.Errorf("blocked task run after the refusals: %s (%s), want %s (%s)", after.Status, after.Reason, run.Status, run.Reason)
	}
	if got := agentRuns(t, agentLog)["stuck"]; got != runs {
		t.Errorf("the agent ran %d times after the refusals, want %d", got, runs)
	}
	if got := taskByID(t, e.tasks(id), "stuck"); got.State != "blocked" || got.Run != task.Run {
		t.Errorf("task after the refusals: %+v, want blocked with run %s", got, task.Run)
	}
}

// stop of a task run itself stops that one run: it ends INTERRUPTED and
// its task is blocked, to be re-opened with `tasks --retry`.
func TestBacklogTaskRunStoppedDirectlyBlocksItsTask(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	agentLog, prompts := e.backlogRepo()
	hold := filepath.Join(e.home, "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\nHOLD="+hold+"\n", 0o600)
	e.writeFile("PLAN.md", "- [ ] only {#only}\n", 0o644)
	id := e.start("--tasks", "PLAN.md", "stop one task run")
	eventually(t, "the task run's agent", 30*time.Second, func() bool { _, err := os.Stat(hold + ".waiting"); return err == nil })
	task := taskByID(t, e.tasks(id), "only")
	e.must("stop", task.Run, "--now")
	eventually(t, "the task blocked", 30*time.Second, func() bool { return taskByID(t, e.tasks(id), "only").State == "blocked" })
	if r := e.status(task.Run); r.Status != api.RunInterrupted {
		t.Errorf("stopped task run %s, want INTERRUPTED", r.Status)
	}
	os.Remove(hold)
	e.wait(id)
	e.must("tasks", id, "--retry", "only")
	if code := e.wait(id); code != 0 {
		t.Fatalf("after --retry: exit %d: %+v", code, e.tasks(id))
	}
	if got := taskByID(t, e.tasks(id), "only"); got.State != "done" || got.Run == task.Run {
		t.Errorf("after --retry: %+v, want done by a new task run", got)
	}
}
