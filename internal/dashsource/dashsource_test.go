package dashsource

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/dashboard"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/scheduler"
	"github.com/loopd/loopd/internal/storage"
	"go.uber.org/zap"
)

// A page about a run that is not there says what loopctl would (the API's
// not_found), and an empty store lists nothing and has no step.
func TestSourceAnswersAsTheAPI(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	store, err := storage.Open(ctx, filepath.Join(home, "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sched := scheduler.New(scheduler.Options{Store: store, Home: home, Logger: zap.NewNop()})
	s := New(store, sched, events.NewBus(0))

	var ae *api.Error
	if _, err := s.Run(ctx, "0123abcd"); !errors.As(err, &ae) || ae.Code != api.CodeNotFound {
		t.Errorf("Run of an unknown id: %v, want the API's %s", err, api.CodeNotFound)
	}
	runs, err := s.Runs(ctx, dashboard.RunFilter{Limit: 10})
	if err != nil || len(runs) != 0 {
		t.Errorf("Runs of an empty store: %v %v, want none", runs, err)
	}
	if st, err := s.LastStep(ctx, "0123abcd"); st != nil || err != nil {
		t.Errorf("LastStep before any step: %v %v, want nil, nil", st, err)
	}
	if got := s.Seq(); got != 0 {
		t.Errorf("Seq of a new bus: %d, want 0", got)
	}
}

// The runs page lists top-level runs: a backlog's task runs, however many
// and however new, neither take its places nor show up on their own; they
// come through TaskRuns, and the tasks through Tasks.
func TestSourceListsBacklogsAndTheirTaskRuns(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	store, err := storage.Open(ctx, filepath.Join(home, "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sched := scheduler.New(scheduler.Options{Store: store, Home: home, Logger: zap.NewNop()})
	s := New(store, sched, events.NewBus(0))

	run := func(id, kind, parent string) storage.Run {
		return storage.Run{ID: id, Kind: kind, Parent: parent, Workspace: "/ws", Goal: "g " + id, Config: "{}", Conditions: "{}",
			Status: api.RunRunning}
	}
	first := run("kid000", "", "backlog")
	first.Name = "t1" // a task run is named after its task
	const kids = 250
	err = store.Write(ctx, func(tx *storage.Tx) error {
		for _, r := range []storage.Run{run("plain1", "", ""), run("plain2", "", ""), run("backlog", "backlog", "")} {
			if err := tx.InsertRun(r, nil); err != nil {
				return err
			}
		}
		if err := tx.InsertRun(first, nil); err != nil {
			return err
		}
		for i := 1; i < kids; i++ {
			if err := tx.InsertRun(run(fmt.Sprintf("kid%03d", i), "", "backlog"), nil); err != nil {
				return err
			}
		}
		return tx.InsertTask(storage.Task{Backlog: "backlog", ID: "t1", Position: 1, Title: "the task", State: storage.TaskRunning,
			TaskRun: "kid000"})
	})
	if err != nil {
		t.Fatal(err)
	}

	top, err := s.Runs(ctx, dashboard.RunFilter{Limit: 2, TopLevel: true})
	if err != nil || len(top) != 2 || top[0].ID != "backlog" || top[1].ID != "plain2" || top[0].Kind != "backlog" {
		t.Fatalf("top-level runs, limit 2: %v %v, want backlog and plain2 (the 250 newer task runs left out)", ids(top), err)
	}
	all, err := s.Runs(ctx, dashboard.RunFilter{Limit: 2})
	if err != nil || len(all) != 2 || all[0].Parent != "backlog" {
		t.Fatalf("all runs, limit 2: %v %v, want the newest two task runs", ids(all), err)
	}
	group, err := s.TaskRuns(ctx, "backlog")
	got := group.Runs
	if err != nil || len(got) != kids || got[0].ID != "kid000" || got[kids-1].ID != fmt.Sprintf("kid%03d", kids-1) || got[0].Config != nil {
		t.Fatalf("TaskRuns: %d runs (%v), want all %d oldest first, without config", len(got), err, kids)
	}
	// Titled by the task named as the run is; the backlog has one task.
	if got[0].Title != "the task" || got[1].Title != "" || group.Tasks != 1 || group.Done != 0 {
		t.Errorf("TaskRuns: kid000 titled %q, kid001 %q, %d/%d tasks done; want the task's title, none, 0/1",
			got[0].Title, got[1].Title, group.Done, group.Tasks)
	}
	bt, err := s.Tasks(ctx, "backlog")
	if err != nil || len(bt.Tasks) != 1 || bt.Tasks[0].Run != "kid000" || bt.Tasks[0].RunStatus != api.RunRunning {
		t.Fatalf("Tasks: %+v %v, want t1 with its task run", bt, err)
	}
	var ae *api.Error
	if _, err := s.Tasks(ctx, "plain1"); !errors.As(err, &ae) || ae.Code != api.CodeBadRequest || !strings.Contains(ae.Message, "not a backlog") {
		t.Errorf("Tasks of a plain run: %v, want the API's bad_request saying it is not a backlog", err)
	}
	if _, err := s.Tasks(ctx, "nope"); !errors.As(err, &ae) || ae.Code != api.CodeNotFound {
		t.Errorf("Tasks of an unknown run: %v, want not_found", err)
	}
}

func ids(runs []api.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// A task is shown in the state the backlog will record from what the
// database already holds, since those changes carry no event of their own.
func TestSettleShowsTheStateTheBacklogWillRecord(t *testing.T) {
	task := func(id, state string, run api.RunStatus, deps ...string) api.Task {
		return api.Task{ID: id, State: state, RunStatus: run, DependsOn: deps}
	}
	tests := []struct {
		name string
		in   api.Task
		want string
	}{
		{"dependencies done: ready", task("x", "pending", "", "done1"), "ready"},
		{"no dependency: ready", task("x", "pending", ""), "ready"},
		{"a dependency not done: pending", task("x", "pending", "", "done1", "running1"), "pending"},
		{"its run waits: waiting", task("x", "running", api.RunWaiting), "waiting"},
		{"its run goes on: running", task("x", "waiting", api.RunRunning), "running"},
		{"its run completed: landing", task("x", "running", api.RunCompleted), "landing"},
		{"its run failed: left to TASK_BLOCKED", task("x", "running", api.RunFailed), "running"},
		{"its run paused: running", task("x", "running", api.RunPaused), "running"},
		{"blocked stays blocked", task("x", "blocked", api.RunCompleted), "blocked"},
		{"done stays done", task("x", "done", api.RunCompleted), "done"},
		{"skipped stays skipped", task("x", "skipped", "", "done1"), "skipped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tasks := []api.Task{task("done1", "done", api.RunCompleted), task("running1", "running", api.RunRunning), tt.in}
			settle(tasks)
			if got := tasks[2].State; got != tt.want {
				t.Errorf("state %q, want %q", got, tt.want)
			}
		})
	}
}

// BenchmarkBacklogReads reads what a backlog's page shows (its tasks with
// their task runs' numbers, and its task runs) from a real SQLite store,
// for 5 tasks and 200.
func BenchmarkBacklogReads(b *testing.B) {
	for _, n := range []int{5, 200} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			ctx := context.Background()
			home := b.TempDir()
			store, err := storage.Open(ctx, filepath.Join(home, "loopd.db"), storage.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			s := New(store, scheduler.New(scheduler.Options{Store: store, Home: home, Logger: zap.NewNop()}), events.NewBus(0))
			err = store.Write(ctx, func(tx *storage.Tx) error {
				if err := tx.InsertRun(storage.Run{ID: "backlog", Kind: "backlog", Workspace: "/ws", Goal: "g", Config: "{}",
					Conditions: "{}", Status: api.RunRunning}, nil); err != nil {
					return err
				}
				for i := range n {
					id, run := fmt.Sprintf("t%d", i), fmt.Sprintf("kid%04d", i)
					if err := tx.InsertRun(storage.Run{ID: run, Name: id, Parent: "backlog", Workspace: "/ws", Goal: "g", Config: "{}",
						Conditions: "{}", Status: api.RunCompleted}, nil); err != nil {
						return err
					}
					if err := tx.InsertTask(storage.Task{Backlog: "backlog", ID: id, Position: i + 1, Title: "task " + id,
						State: storage.TaskDone, TaskRun: run}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if bt, err := s.Tasks(ctx, "backlog"); err != nil || len(bt.Tasks) != n {
					b.Fatalf("Tasks: %d, %v", len(bt.Tasks), err)
				}
				if g, err := s.TaskRuns(ctx, "backlog"); err != nil || len(g.Runs) != n {
					b.Fatalf("TaskRuns: %d, %v", len(g.Runs), err)
				}
			}
		})
	}
}
