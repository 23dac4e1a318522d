package scheduler

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
)

// backlogWorld is a harness whose scheduler runs for real (claims,
// coordinator passes, lands) over a git checkout, with the fake executor
// standing in for the agent: each step writes what bySpec says into its
// task run's worktree and ends.
type backlogWorld struct {
	*harness
	checkout string
	commits  chan struct{}
	stopped  chan error
	cancel   context.CancelFunc
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func newBacklogWorld(t *testing.T, step func(spec supervise.Spec) fakeStep) *backlogWorld {
	t.Helper()
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_AUTHOR_NAME", "t")
	t.Setenv("GIT_AUTHOR_EMAIL", "t@example.org")
	t.Setenv("GIT_COMMITTER_NAME", "t")
	t.Setenv("GIT_COMMITTER_EMAIL", "t@example.org")
	fx := newFakeExec(t, nil)
	fx.bySpec = step
	h := newHarness(t, fx)
	h.s.SetLander(landing.New(landing.Options{Store: h.store, Home: h.s.opts.Home, Verifier: h.s, Logger: zap.NewNop(),
		Grace: time.Second, PRCommands: h.s, PRTasks: h.s.PRTasks}))
	w := &backlogWorld{harness: h, checkout: filepath.Join(t.TempDir(), "repo"), commits: make(chan struct{}, 1)}
	gitIn(t, filepath.Dir(w.checkout), "init", "-q", "-b", "main", w.checkout)
	if err := os.WriteFile(filepath.Join(w.checkout, "README"), []byte("project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, w.checkout, "add", "-A")
	gitIn(t, w.checkout, "commit", "-q", "-m", "project")
	h.store.SetNotifyRuns(func(int64, []string) {
		select {
		case w.commits <- struct{}{}:
		default:
		}
	})
	return w
}

// run starts the scheduler; it stops at the test's end.
func (w *backlogWorld) run() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.stopped = cancel, make(chan error, 1)
	go func() { w.stopped <- w.s.Run(ctx) }()
	w.t.(*testing.T).Cleanup(func() {
		cancel()
		if err := <-w.stopped; err != nil {
			w.t.Errorf("scheduler: %v", err)
		}
	})
}

// writeTasks writes the task list into the checkout (not committed: the
// list is read once, at start) and returns its path.
func (w *backlogWorld) writeTasks(list string) string {
	w.t.Helper()
	path := filepath.Join(w.checkout, "PLAN.md")
	if err := os.WriteFile(path, []byte(list), 0o644); err != nil {
		w.t.Fatal(err)
	}
	return path
}

func (w *backlogWorld) tasks(id string) map[string]api.Task {
	w.t.Helper()
	run, err := w.store.Run(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	bt, err := w.s.BacklogTasks(context.Background(), run)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]api.Task{}
	for _, task := range bt.Tasks {
		out[task.ID] = task
	}
	return out
}

// waitCompleted waits for the backlog id to end and fails the test
// unless it COMPLETED with every task in done done; it returns the
// backlog and its tasks.
func (w *backlogWorld) waitCompleted(when, id string, done ...string) (storage.Run, map[string]api.Task) {
	w.t.Helper()
	waitEnded(w.t.(*testing.T), w.harness, w.commits, id)
	ended, err := w.store.Run(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	tasks := w.tasks(id)
	if ended.Status != api.RunCompleted {
		w.t.Fatalf("%s: backlog %s (%s), want COMPLETED; tasks %+v", when, ended.Status, ended.Reason, tasks)
	}
	for _, t := range done {
		if tasks[t].State != storage.TaskDone {
			w.t.Errorf("%s: task %s is %s, want done: %+v", when, t, tasks[t].State, tasks[t])
		}
	}
	return ended, tasks
}

// promptOf is the prompt a step was given ("" when none could be read).
func promptOf(spec supervise.Spec) string {
	b, _ := os.ReadFile(envValue(spec.Env, "LOOP_PROMPT_FILE"))
	return string(b)
}

// taskWork is a step that writes a file named after its task run's
// worktree (so no two tasks touch the same file) and promises completion.
func taskWork(spec supervise.Spec) fakeStep {
	return fakeStep{output: "did it\n<promise>COMPLETE</promise>\n",
		files: map[string]string{"work-" + filepath.Base(spec.Dir) + ".txt": "done\n"}}
}

// A backlog runs its ready tasks as task runs, each in a worktree from
// the integration branch; lands each COMPLETED one into that branch (a
// task that waits for another starts only once it landed) and completes
// when every task is done. The integration branch then holds every
// task's work; the user's checkout is untouched.
func TestBacklogRunsLandsAndCompletes(t *testing.T) {
	w := newBacklogWorld(t, taskWork)
	plan := w.writeTasks("- [ ] Add the parser {#parse}\n  Parse it.\n- [ ] Add the printer {#print}\n" +
		"- [ ] Wire them (after #parse, #print) {#wire}\n- [x] Set up the repository {#setup}\n")
	run, _, err := w.s.CreateRun(context.Background(), api.CreateRunRequest{Workspace: w.checkout, TasksFile: plan,
		Set: []string{"agent=command", "agent_command=agent", "max_iterations=3"}})
	if err != nil {
		t.Fatalf("create the backlog: %v", err)
	}
	if run.Kind != storage.KindBacklog || run.Isolation != "worktree" {
		t.Fatalf("backlog run: kind %q isolation %q; want a backlog in a worktree", run.Kind, run.Isolation)
	}
	w.run()
	ended, tasks := w.waitCompleted("the backlog", run.ID, "parse", "print", "wire", "setup")
	// Every task's work is on the integration branch, one file a task run.
	files := gitIn(t, w.checkout, "ls-tree", "--name-only", ended.Branch)
	if n := strings.Count(files, "work-"); n != 3 {
		t.Errorf("the integration branch %s holds %d tasks' work, want 3:\n%s", ended.Branch, n, files)
	}
	if got := gitIn(t, w.checkout, "status", "--porcelain", "--untracked-files=no"); got != "" {
		t.Errorf("the user's checkout changed: %s", got)
	}
	// wire started after both of its dependencies landed.
	var wireRun storage.Run
	if wireRun, err = w.store.Run(context.Background(), tasks["wire"].Run); err != nil {
		t.Fatalf("wire's task run: %v", err)
	}
	for _, dep := range []string{"parse", "print"} {
		depRun, err := w.store.Run(context.Background(), tasks[dep].Run)
		if err != nil {
			t.Fatal(err)
		}
		if depRun.CreatedAt > wireRun.CreatedAt {
			t.Errorf("wire's task run was created before %s's", dep)
		}
	}
	// A task run is refused a land of its own; a backlog names itself.
	if err := w.s.TaskRunRefusal(context.Background(), wireRun.ID, "land", "`loopctl land BACKLOG`"); !api.IsCode(err, api.CodeConflict) ||
		!strings.Contains(err.Error(), "loopctl land "+run.ID) {
		t.Errorf("TaskRunRefusal of a task run = %v; want a conflict naming the backlog", err)
	}
	if err := w.s.TaskRunRefusal(context.Background(), run.ID, "land", "x"); err != nil {
		t.Errorf("TaskRunRefusal of the backlog itself = %v", err)
	}
	if b, err := w.s.BacklogOf(context.Background(), wireRun); err != nil || b.ID != run.ID {
		t.Errorf("BacklogOf(a task run) = %s, %v; want the backlog", b.ID, err)
	}
}

// A task whose run fails is blocked and the task that waits for it is
// skipped; the backlog ends once nothing can run. A retry (with a setting
// changed) re-opens both and resumes the backlog, which then completes.
func TestBacklogBlockedTaskRetried(t *testing.T) {
	var fixed atomic.Bool
	w := newBacklogWorld(t, func(spec supervise.Spec) fakeStep {
		if !fixed.Load() && strings.Contains(promptOf(spec), "Add the parser") {
			return fakeStep{code: 1, output: "cannot parse\n"}
		}
		return taskWork(spec)
	})
	plan := w.writeTasks("- [ ] Add the parser {#parse}\n- [ ] Wire it (after #parse) {#wire}\n- [ ] Docs {#docs}\n")
	run, _, err := w.s.CreateRun(context.Background(), api.CreateRunRequest{Workspace: w.checkout, TasksFile: plan,
		Set: []string{"agent=command", "agent_command=agent", "max_iterations=2"}})
	if err != nil {
		t.Fatalf("create the backlog: %v", err)
	}
	w.run()
	waitEnded(t, w.harness, w.commits, run.ID)
	tasks := w.tasks(run.ID)
	if tasks["parse"].State != storage.TaskBlocked || tasks["wire"].State != storage.TaskSkipped || tasks["docs"].State != storage.TaskDone {
		t.Fatalf("after parse failed: parse %s, wire %s, docs %s; want blocked, skipped, done", tasks["parse"].State,
			tasks["wire"].State, tasks["docs"].State)
	}
	if tasks["parse"].Why == "" || !strings.Contains(tasks["wire"].Why, "parse") {
		t.Errorf("why: parse %q, wire %q; want reasons, wire's naming parse", tasks["parse"].Why, tasks["wire"].Why)
	}
	ended, _ := w.store.Run(context.Background(), run.ID)
	if ended.Status == api.RunCompleted {
		t.Fatalf("a backlog with a blocked task COMPLETED")
	}
	// Refusals change nothing.
	if _, err := w.s.RetryTask(context.Background(), run.ID, "docs", nil); err == nil || !strings.Contains(err.Error(), "not blocked") {
		t.Errorf("retry of a done task = %v; want a refusal", err)
	}
	if _, err := w.s.RetryTask(context.Background(), run.ID, "nosuch", nil); err == nil || !strings.Contains(err.Error(), "its tasks are") {
		t.Errorf("retry of an unknown task = %v; want a refusal listing the tasks", err)
	}
	if _, err := w.s.RetryTask(context.Background(), run.ID, "parse", []string{"no_such_key=1"}); err == nil {
		t.Error("retry with an unknown setting was accepted")
	}
	if _, err := w.s.RetryTask(context.Background(), tasks["docs"].Run, "parse", nil); err == nil || !strings.Contains(err.Error(), "not a backlog run") {
		t.Errorf("retry on a task run = %v; want a refusal", err)
	}
	fixed.Store(true)
	bt, err := w.s.RetryTask(context.Background(), run.ID, "parse", []string{"max_iterations=3"})
	if err != nil {
		t.Fatalf("retry parse: %v", err)
	}
	for _, task := range bt.Tasks {
		if (task.ID == "parse" || task.ID == "wire") && task.State != storage.TaskPending {
			t.Errorf("after the retry %s is %s, want pending", task.ID, task.State)
		}
	}
	w.waitCompleted("after the retry", run.ID, "parse", "wire", "docs")
}

// A stop of the backlog holds its running task runs: they are stopped
// (at once with now) and the backlog is INTERRUPTED; a resume of the
// backlog resumes the task runs it held, and the backlog completes.
func TestBacklogStopHoldsItsTaskRunsAndResumeContinuesThem(t *testing.T) {
	var released atomic.Bool
	w := newBacklogWorld(t, func(spec supervise.Spec) fakeStep {
		if !released.Load() {
			return fakeStep{hold: true}
		}
		return taskWork(spec)
	})
	plan := w.writeTasks("- [ ] One {#one}\n- [ ] Two {#two}\n")
	run, _, err := w.s.CreateRun(context.Background(), api.CreateRunRequest{Workspace: w.checkout, TasksFile: plan,
		Set: []string{"agent=command", "agent_command=agent", "max_iterations=3", "max_parallel_tasks=2"}})
	if err != nil {
		t.Fatalf("create the backlog: %v", err)
	}
	w.run()
	for range 2 { // both task runs are in their step
		select {
		case <-w.fx.held:
		case <-t.Context().Done():
			t.Fatal("the task runs did not start")
		}
	}
	if err := w.s.Stop(context.Background(), run.ID, true); err != nil {
		t.Fatalf("stop the backlog: %v", err)
	}
	waitEnded(t, w.harness, w.commits, run.ID)
	ended, _ := w.store.Run(context.Background(), run.ID)
	if ended.Status != api.RunInterrupted || ended.Reason != "user_stop" {
		t.Fatalf("stopped backlog: %s (%s), want INTERRUPTED (user_stop)", ended.Status, ended.Reason)
	}
	tasks := w.tasks(run.ID)
	waitEnded(t, w.harness, w.commits, tasks["one"].Run, tasks["two"].Run)
	for _, id := range []string{"one", "two"} {
		k, _ := w.store.Run(context.Background(), tasks[id].Run)
		if k.Status != api.RunInterrupted {
			t.Errorf("task run of %s after the backlog's stop: %s, want INTERRUPTED", id, k.Status)
		}
	}
	held := map[string]string{"one": tasks["one"].Run, "two": tasks["two"].Run}
	released.Store(true)
	if err := w.s.Resume(context.Background(), run.ID, nil); err != nil {
		t.Fatalf("resume the backlog: %v", err)
	}
	_, tasks = w.waitCompleted("after the resume", run.ID, "one", "two")
	// The task runs resumed were the ones the stop held: no new ones.
	for _, id := range []string{"one", "two"} {
		k, err := w.store.Run(context.Background(), tasks[id].Run)
		if tasks[id].Run != held[id] || err != nil || k.Status != api.RunCompleted {
			t.Errorf("task %s: run %s (%v, %s); want its held run %s, COMPLETED", id, tasks[id].Run, err, k.Status, held[id])
		}
	}
}

// A task whose run changed nothing is done with nothing to land; the
// pull request's task list names every task with its state, and a run
// that is not a backlog has none.
func TestBacklogTaskThatChangesNothing(t *testing.T) {
	w := newBacklogWorld(t, func(spec supervise.Spec) fakeStep {
		if strings.Contains(promptOf(spec), "Leave the files as they are.") {
			return fakeStep{output: "nothing to do\n<promise>COMPLETE</promise>\n"}
		}
		return taskWork(spec)
	})
	plan := w.writeTasks("- [ ] Check only {#check}\n  Leave the files as they are.\n- [ ] Build it {#build}\n")
	run, _, err := w.s.CreateRun(context.Background(), api.CreateRunRequest{Workspace: w.checkout, TasksFile: plan, Goal: "the release",
		Set: []string{"agent=command", "agent_command=agent", "max_iterations=2"}})
	if err != nil {
		t.Fatalf("create the backlog: %v", err)
	}
	w.run()
	ended, _ := w.waitCompleted("the backlog", run.ID, "check", "build")
	if files := gitIn(t, w.checkout, "ls-tree", "--name-only", ended.Branch); strings.Count(files, "work-") != 1 {
		t.Errorf("the integration branch holds %q; want the build task's work only", files)
	}
	prs, err := w.s.PRTasks(context.Background(), ended)
	if err != nil || len(prs) != 2 {
		t.Fatalf("PRTasks = %+v, %v; want both tasks", prs, err)
	}
	for _, p := range prs {
		if p.State != storage.TaskDone || p.RunID == "" || p.Title == "" {
			t.Errorf("PR task %+v: want done, with its task run and title", p)
		}
	}
	if prs, err := w.s.PRTasks(context.Background(), storage.Run{ID: "x"}); prs != nil || err != nil {
		t.Errorf("PRTasks of a plain run = %+v, %v; want none", prs, err)
	}
}

// Two in-place runs in one workspace would edit the same files: the
// second start is refused, naming the active run, and creates nothing.
func TestSecondInPlaceRunIsRefused(t *testing.T) {
	h := newHarness(t, newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{} }))
	ws := t.TempDir()
	first := h.start(ws, "agent=command", "agent_command=agent", "max_iterations=1")
	_, _, err := h.s.CreateRun(context.Background(), api.CreateRunRequest{Workspace: ws, Goal: "again",
		Set: []string{"agent=command", "agent_command=agent"}})
	var se *StateError
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "already has an active run "+shortOf(first)) || !strings.Contains(se.Msg, "isolation=worktree") {
		t.Fatalf("a second in-place start = %v; want a StateError naming %s and the way out", err, shortOf(first))
	}
	runs, err := h.store.ListRuns(context.Background(), storage.RunFilter{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs after the refusal: %d (%v); want the first only", len(runs), err)
	}
}
