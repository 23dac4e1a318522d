package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// backlogAgent is a fake agent for task runs: it finds its task's id in the
// prompt ("## Your task (<id>): …"), writes task-<id>.txt, lists what its
// worktree holds in seen-<id>.txt, and ends with the completion promise —
// unless its task is in $NEVER (it then never completes). With $REWRITE set
// it overwrites the plan file in the user's checkout and in its worktree
// first, as an agent "marking tasks done" would. When its prompt says its
// land was refused, it writes fixed.txt (the fix check.sh wants). While the
// file $HOLD exists it waits (touching $HOLD.waiting first).
const backlogAgent = `#!/bin/sh
prompt=$(cat "$LOOP_PROMPT_FILE")
task=$(printf '%s\n' "$prompt" | sed -n 's/^## Your task (\([^)]*\)).*/\1/p' | head -n 1)
echo "$task $LOOP_ITERATION" >> "$AGENT_LOG"
[ -n "${AGENT_SLEEP:-}" ] && sleep "$AGENT_SLEEP"
if [ -n "${HOLD:-}" ] && [ -f "$HOLD" ]; then touch "$HOLD.waiting"; while [ -f "$HOLD" ]; do sleep 0.05; done; fi
printf '%s\n' "$prompt" > "$PROMPTS/$task-$LOOP_ITERATION.txt"
if [ -n "${REWRITE:-}" ]; then
  printf -- '- [x] everything is done\n' > "$REWRITE"
  printf -- '- [x] everything is done\n' > PLAN.md
fi
case " ${NEVER:-} " in *" $task "*) echo "I could not do $task"; exit 0 ;; esac
case "$prompt" in *"was refused"*) echo fixed > fixed.txt ;; esac
echo "$task" > "task-$task.txt"
ls > "seen-$task.txt"
printf 'did %s\n<promise>COMPLETE</promise>\n' "$task"
`

// backlogCheck is the project's test: it fails when the combination of
// tasks a and b is there without fixed.txt (two green branches that break
// together).
const backlogCheck = `#!/bin/sh
if [ -f task-a.txt ] && [ -f task-b.txt ] && [ ! -f fixed.txt ]; then
  echo "check failed: task-a.txt and task-b.txt conflict without fixed.txt"; exit 1
fi
echo "check passed"
`

// backlogRepo makes the workspace a git repository on main with the project
// committed and a config for the backlog agent; it returns the agent's log.
func (e *env) backlogRepo(extraConfig ...string) (agentLog, prompts string) {
	e.t.Helper()
	agent := filepath.Join(e.home, "backlog-agent.sh")
	if err := os.WriteFile(agent, []byte(backlogAgent), 0o755); err != nil {
		e.t.Fatal(err)
	}
	agentLog, prompts = filepath.Join(e.home, "agent.log"), filepath.Join(e.home, "prompts")
	if err := os.MkdirAll(prompts, 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.writeFile("check.sh", backlogCheck, 0o755)
	e.writeFile("README", "project\n", 0o644)
	e.writeFile(".gitignore", ".env\n", 0o644)
	e.config(append([]string{"agent=command", "agent_command=" + agent, "verify_command=sh check.sh", "max_iterations=3"},
		extraConfig...)...)
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\n", 0o600)
	e.git("init", "-q", "-b", "main")
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "project")
	return agentLog, prompts
}

func (e *env) tasks(id string) api.BacklogTasks {
	e.t.Helper()
	var out api.BacklogTasks
	s := e.must("tasks", id, "--json")
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		e.t.Fatalf("tasks json: %v\n%s", err, s)
	}
	return out
}

func taskByID(t *testing.T, bt api.BacklogTasks, id string) api.Task {
	t.Helper()
	for _, task := range bt.Tasks {
		if task.ID == id {
			return task
		}
	}
	t.Fatalf("no task %s in %+v", id, bt.Tasks)
	return api.Task{}
}

// agentRuns counts the agent's invocations per task.
func agentRuns(t *testing.T, log string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		task, _, _ := strings.Cut(line, " ")
		out[task]++
	}
	return out
}

// A three-task plan with a dependency completes: each task lands into the
// integration branch, the dependent task starts from its dependencies'
// work, its prompt names them as done, and an agent that rewrites the plan
// file changes nothing. `loopctl land` then lands the backlog into main.
func TestBacklogPlanWithDependency(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	agentLog, prompts := e.backlogRepo()
	plan := "- [ ] Add the parser {#parse}\n  Write the parser.\n- [ ] Add the printer {#print}\n- [ ] Wire them (after #parse, #print) {#wire}\n"
	e.writeFile("PLAN.md", plan, 0o644)
	e.git("add", "PLAN.md")
	e.git("commit", "-q", "-m", "plan")
	base := e.git("rev-parse", "HEAD")
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\nREWRITE="+filepath.Join(e.ws, "PLAN.md")+"\n", 0o600)

	id := e.start("--tasks", "PLAN.md", "build the tool")
	if code := e.wait(id); code != 0 {
		t.Fatalf("backlog exit %d: %+v\n%s", code, e.status(id), e.daemonLog())
	}
	run := e.status(id)
	if run.Status != api.RunCompleted || run.Reason != "completed:tasks:3" || run.Kind != "backlog" {
		t.Fatalf("backlog = %s %s kind %q, want COMPLETED completed:tasks:3", run.Status, run.Reason, run.Kind)
	}
	bt := e.tasks(id)
	if len(bt.Tasks) != 3 {
		t.Fatalf("tasks = %+v, want the plan's three (the agent's rewrite of PLAN.md changes nothing)", bt.Tasks)
	}
	for i, want := range []string{"parse", "print", "wire"} {
		task := bt.Tasks[i]
		if task.ID != want || task.State != "done" || task.LandedCommit == "" || task.Run == "" || task.RunStatus != api.RunCompleted {
			t.Errorf("task %d = %+v, want %s done and landed", i, task, want)
		}
		if child := e.status(task.Run); child.Parent != id || child.BaseBranch != bt.Branch {
			t.Errorf("task run of %s: parent %q base %q, want %s and %s", want, child.Parent, child.BaseBranch, id, bt.Branch)
		}
	}
	if runs := agentRuns(t, agentLog); runs["parse"] != 1 || runs["print"] != 1 || runs["wire"] != 1 {
		t.Errorf("agent runs per task = %v, want one each", runs)
	}
	// The dependent task's worktree held its dependencies' work.
	wire := taskByID(t, bt, "wire")
	seen, err := os.ReadFile(filepath.Join(e.home, "worktrees", wire.Run, "seen-wire.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"task-parse.txt", "task-print.txt"} {
		if !strings.Contains(string(seen), f) {
			t.Errorf("the wire task's worktree lacked %s:\n%s", f, seen)
		}
	}
	prompt, err := os.ReadFile(filepath.Join(prompts, "wire-1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"build the tool", "## Your task (wire): Wire them", "- Add the parser", "- Add the printer"} {
		if !strings.Contains(string(prompt), want) {
			t.Errorf("the wire task's prompt lacks %q:\n%s", want, prompt)
		}
	}
	// The integration branch's history is the recorded lands, in order.
	tip := e.git("rev-parse", bt.Branch)
	if last := bt.Tasks[2].LandedCommit; tip != last {
		t.Errorf("integration tip %s, want the last land %s", tip, last)
	}
	for _, task := range bt.Tasks {
		e.git("merge-base", "--is-ancestor", task.LandedCommit, bt.Branch)
	}
	evs := e.events(id)
	for typ, want := range map[string]int{"TASK_STARTED": 3, "TASK_LANDED": 3, "TASK_DONE": 3, "TASK_BLOCKED": 0, "TASK_SKIPPED": 0} {
		if got := countType(evs, typ); got != want {
			t.Errorf("%d %s events, want %d: %v", got, typ, want, eventTypes(evs))
		}
	}
	if got := e.git("rev-parse", "main"); got != base {
		t.Fatalf("the backlog moved main to %s before land", got)
	}
	if b, _ := os.ReadFile(filepath.Join(e.ws, "PLAN.md")); string(b) == plan {
		t.Fatalf("the fake agent did not rewrite the checkout's PLAN.md: the test proves nothing")
	}
	e.git("checkout", "-q", "--", "PLAN.md")

	res, ref, code := e.landJSON(id)
	if code != 0 || res.Commit != tip || !res.Verified {
		t.Fatalf("land BACKLOG = %+v %+v (exit %d), want a verified land of %s", res, ref, code, tip)
	}
	for _, f := range []string{"task-parse.txt", "task-print.txt", "task-wire.txt"} {
		if _, err := os.Stat(filepath.Join(e.ws, f)); err != nil {
			t.Errorf("main lacks %s after land: %v", f, err)
		}
	}
}

// A task whose run never completes is blocked, the task that depends on it
// is skipped, and an independent one still lands; the backlog FAILS with
// the number of blocked tasks. --retry re-opens the blocked task and its
// skipped dependent.
func TestBacklogBlockedTaskSkipsDependents(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	agentLog, prompts := e.backlogRepo("max_iterations=2")
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\nNEVER=stuck\n", 0o600)
	e.writeFile("tasks.json", `{"tasks":[
  {"id":"stuck","title":"the impossible one"},
  {"id":"after","title":"needs the impossible one","depends_on":["stuck"]},
  {"id":"free","title":"independent"}
]}`, 0o644)
	id := e.start("--tasks", "tasks.json", "three tasks")
	if code := e.wait(id); code != 1 {
		t.Fatalf("backlog exit %d, want 1 (FAILED): %+v", code, e.status(id))
	}
	run := e.status(id)
	if run.Status != api.RunFailed || run.Reason != "tasks_blocked:1" {
		t.Fatalf("backlog = %s %s, want FAILED tasks_blocked:1", run.Status, run.Reason)
	}
	bt := e.tasks(id)
	stuck, after, free := taskByID(t, bt, "stuck"), taskByID(t, bt, "after"), taskByID(t, bt, "free")
	if stuck.State != "blocked" || !strings.Contains(stuck.Why, "ABORTED") || stuck.RunStatus != api.RunAborted || stuck.Iterations != 2 {
		t.Errorf("stuck = %+v, want blocked by its ABORTED run after 2 iterations", stuck)
	}
	if after.State != "skipped" || after.Run != "" || !strings.Contains(after.Why, "stuck") {
		t.Errorf("after = %+v, want skipped, never run", after)
	}
	if free.State != "done" || free.LandedCommit == "" {
		t.Errorf("free = %+v, want done", free)
	}
	if runs := agentRuns(t, agentLog); runs["after"] != 0 || runs["free"] != 1 || runs["stuck"] != 2 {
		t.Errorf("agent runs per task = %v", runs)
	}
	evs := e.events(id)
	if countType(evs, "TASK_BLOCKED") != 1 || countType(evs, "TASK_SKIPPED") != 1 || countType(evs, "TASK_DONE") != 1 {
		t.Errorf("events: %v", eventTypes(evs))
	}
	human := e.must("tasks", id)
	for _, want := range []string{"stuck", "blocked", "skipped", "done", "independent"} {
		if !strings.Contains(human, want) {
			t.Errorf("loopctl tasks lacks %q:\n%s", want, human)
		}
	}

	// Retried (the agent now can): the task and its dependent run and land.
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\n", 0o600)
	e.trust()
	if r := e.loopctl("tasks", id, "--retry", "free"); r.code == 0 || !strings.Contains(r.stderr, "not blocked") {
		t.Errorf("retry of a task that is done: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	e.must("tasks", id, "--retry", "stuck")
	if code := e.wait(id); code != 0 {
		t.Fatalf("backlog after retry: exit %d: %+v\n%s", code, e.tasks(id), e.daemonLog())
	}
	bt = e.tasks(id)
	for _, task := range bt.Tasks {
		if task.State != "done" {
			t.Errorf("after retry: %+v, want done", task)
		}
	}
}

// Bad lists are refused at start with exit 64 naming the file and the
// line or JSON path, and nothing is created.
func TestBacklogBadListsRefused(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.backlogRepo()
	cases := []struct {
		file, content string
		want          []string
	}{
		{"cycle.md", "- [ ] a (after #b) {#a}\n- [ ] b (after #a) {#b}\n", []string{"cycle.md", "cycle"}},
		{"unknown.json", `{"tasks":[{"id":"a","title":"A","depends_on":["zz"]}]}`, []string{"unknown.json", "tasks[0].depends_on[0]", "zz"}},
		{"dup.json", `{"tasks":[{"id":"a","title":"A"},{"id":"a","title":"B"}]}`, []string{"dup.json", "tasks[1].id"}},
		{"empty.md", "# nothing to do\n", []string{"empty.md"}},
		{"broken.json", "{\"tasks\": [\n  {\"id\": \"a\",\n", []string{"broken.json:"}},
		{"badset.json", `{"tasks":[{"id":"a","title":"A","set":{"max_iterations":"lots"}}]}`, []string{"badset.json", "tasks[0].set", "max_iterations"}},
	}
	for _, c := range cases {
		e.writeFile(c.file, c.content, 0o644)
		e.trust()
		r := e.loopctl("start", "--tasks", c.file, "goal")
		if r.code != 64 {
			t.Errorf("%s: exit %d, want 64\n%s%s", c.file, r.code, r.stdout, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: the refusal does not name %q:\n%s", c.file, w, r.stderr)
			}
		}
	}
	if out := e.must("list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("refused starts created runs: %s", out)
	}
	if branches := e.git("branch", "--list", "loop/*"); branches != "" {
		t.Errorf("refused starts made branches: %s", branches)
	}

	// Outside git there is no integration branch: refused too.
	plain := t.TempDir()
	if err := os.WriteFile(filepath.Join(plain, "PLAN.md"), []byte("- [ ] a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.loopctlAt(plain, nil, "start", "--tasks", "PLAN.md", "goal")
	if r.code != 64 || !strings.Contains(r.stderr, "git repository") {
		t.Errorf("backlog outside git: exit %d %s", r.code, r.stderr)
	}
}

// A list that names commands is a workspace file under trust: started
// untrusted it is refused; trusted, its task's verify_command is what the
// task run verifies with.
func TestBacklogListWithCommandsNeedsTrust(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.backlogRepo()
	e.trust()
	e.writeFile("tasks.json", `{"tasks":[{"id":"a","title":"A","verify_command":"test -f task-a.txt && touch \"$CHECKED\""}]}`, 0o644)
	r := e.loopctl("start", "--tasks", "tasks.json", "goal")
	if r.code != 64 || !strings.Contains(r.stderr, "tasks.json: not trusted") || !strings.Contains(r.stderr, "loopctl trust --tasks tasks.json") {
		t.Fatalf("an untrusted list with commands: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out := e.must("list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("the refused start created a run: %s", out)
	}
	show := e.must("trust", "--show", "--tasks", "tasks.json")
	if !strings.Contains(show, "tasks[0].verify_command") {
		t.Errorf("loopctl trust --show does not show the list's command:\n%s", show)
	}
	checked := filepath.Join(e.home, "checked")
	agentLog, prompts := filepath.Join(e.home, "agent.log"), filepath.Join(e.home, "prompts")
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\nCHECKED="+checked+"\n", 0o600)
	e.must("trust", "--tasks", "tasks.json")
	id := strings.TrimSpace(e.must("start", "--tasks", "tasks.json", "goal"))
	if code := e.wait(id); code != 0 {
		t.Fatalf("exit %d: %+v", code, e.tasks(id))
	}
	if _, err := os.Stat(checked); err != nil {
		t.Errorf("the task's own verify_command did not run: %v", err)
	}
}

// Two tasks that are each green but fail the tests together: the second to
// land is tested on top of the first, refused, and goes back to its agent
// with that failure, which fixes it; then it lands, verified.
func TestBacklogCombinationFailureGoesBackToTheAgent(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	agentLog, prompts := e.backlogRepo("max_parallel_tasks=2")
	e.writeFile("PLAN.md", "- [ ] first {#a}\n- [ ] second {#b}\n", 0o644)
	id := e.start("--tasks", "PLAN.md", "two green branches")
	if code := e.wait(id); code != 0 {
		t.Fatalf("exit %d: %+v\n%s", code, e.tasks(id), e.daemonLog())
	}
	bt := e.tasks(id)
	a, b := taskByID(t, bt, "a"), taskByID(t, bt, "b")
	retried := a
	if b.LandAttempts > 0 {
		retried = b
	}
	if a.State != "done" || b.State != "done" || a.LandAttempts+b.LandAttempts != 1 || !retried.Verified {
		t.Fatalf("tasks a %+v, b %+v: want both done, one sent back once, verified", a, b)
	}
	// The retried task's agent was told what failed.
	p, err := os.ReadFile(filepath.Join(prompts, retried.ID+"-2.txt"))
	if err != nil {
		t.Fatalf("the retried task's second prompt: %v (agent log %v)", err, agentRuns(t, agentLog))
	}
	for _, want := range []string{"was refused", "check failed: task-a.txt and task-b.txt conflict"} {
		if !strings.Contains(string(p), want) {
			t.Errorf("the retried prompt lacks %q:\n%s", want, p)
		}
	}
	tree := e.git("ls-tree", "--name-only", bt.Branch)
	for _, f := range []string{"task-a.txt", "task-b.txt", "fixed.txt"} {
		if !slices.Contains(strings.Fields(tree), f) {
			t.Errorf("the integration branch lacks %s: %s", f, tree)
		}
	}
	evs := e.events(id)
	if countType(evs, "TASK_STARTED") != 3 || countType(evs, "TASK_LANDED") != 2 {
		t.Errorf("events: %v", eventTypes(evs))
	}
}

// tasks_command: a command from the trusted .loop/config whose stdout is
// the list — here a stand-in for `gh issue list --label loop --json
// number,title,body,labels` printing gh's own output — is read once at
// start; the issues become tasks #<number>. A failing command is refused
// with its stderr and nothing is created.
func TestBacklogTasksCommand(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	agentLog, _ := e.backlogRepo()
	fixture, err := os.ReadFile(filepath.Join(repoRoot(), "internal", "backlog", "testdata", "gh_issues.json"))
	if err != nil {
		t.Fatal(err)
	}
	issues := filepath.Join(e.home, "issues.json")
	if err := os.WriteFile(issues, fixture, 0o644); err != nil {
		t.Fatal(err)
	}
	gh := filepath.Join(e.home, "gh")
	// A stand-in for gh: it records its arguments and prints gh's output,
	// once; a second call fails (the list is read once).
	if err := os.WriteFile(gh, []byte("#!/bin/sh\necho \"$@\" >> \""+gh+".calls\"\n[ -f \""+gh+".calls2\" ] && { echo 'gh: called twice' >&2; exit 1; }\ntouch \""+gh+".calls2\"\ncat \""+issues+"\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join(e.ws, ".loop", "config"))
	e.writeFile(".loop/config", string(cfg)+"tasks_command="+gh+" issue list --label loop --json number,title,body,labels\n", 0o644)
	id := e.start("work through the loop issues")
	if code := e.wait(id); code != 0 {
		t.Fatalf("exit %d: %+v", code, e.tasks(id))
	}
	bt := e.tasks(id)
	if len(bt.Tasks) != 2 || bt.Tasks[0].ID != "#14529" || bt.Tasks[1].ID != "#14530" || bt.Tasks[0].Title != "gh issue artifact: attach files to issues" {
		t.Fatalf("tasks = %+v", bt.Tasks)
	}
	for _, task := range bt.Tasks {
		if task.State != "done" {
			t.Errorf("%+v, want done", task)
		}
	}
	calls, _ := os.ReadFile(gh + ".calls")
	if string(calls) != "issue list --label loop --json number,title,body,labels\n" {
		t.Errorf("gh was called with %q, want once with the recipe's arguments", calls)
	}
	if runs := agentRuns(t, agentLog); runs["#14529"] != 1 || runs["#14530"] != 1 {
		t.Errorf("agent runs = %v", runs)
	}

	// The command fails now (it was already called): refused, its stderr
	// named, nothing created.
	before := e.must("list", "--json")
	r := e.loopctl("start", "again")
	if r.code != 64 || !strings.Contains(r.stderr, "tasks_command") || !strings.Contains(r.stderr, "gh: called twice") {
		t.Errorf("a failing tasks_command: exit %d %s", r.code, r.stderr)
	}
	if after := e.must("list", "--json"); after != before {
		t.Errorf("a refused start created a run:\n%s", after)
	}
}
