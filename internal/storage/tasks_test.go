package storage

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// A backlog's tasks round-trip in list order, a task run names its parent,
// and a task changes state only from the states its change expects (the
// compare-and-set that keeps a task from starting or landing twice).
func TestBacklogTasks(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		backlog := Run{ID: "b1", Workspace: "/ws", Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunPending, Kind: KindBacklog}
		child := Run{ID: "c1", Workspace: "/ws", Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunPending, Parent: "b1"}
		err := s.Write(t.Context(), func(tx *Tx) error {
			if err := tx.InsertRun(backlog, nil); err != nil {
				return err
			}
			for i, id := range []string{"t2", "t1", "t3"} {
				task := Task{Backlog: "b1", ID: id, Position: i + 1, Title: "do " + id, State: TaskPending}
				if id == "t3" {
					task.DependsOn, task.Settings, task.Priority = `["t1","t2"]`, `{"max_iterations":"3"}`, 1
				}
				if err := tx.InsertTask(task); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Tasks(t.Context(), "b1")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, task := range got {
			ids = append(ids, task.ID)
		}
		if !slices.Equal(ids, []string{"t2", "t1", "t3"}) {
			t.Fatalf("tasks = %v, want list order t2 t1 t3", ids)
		}
		if deps := got[2].Deps(); !slices.Equal(deps, []string{"t1", "t2"}) || got[2].Set()["max_iterations"] != "3" || got[2].Priority != 1 {
			t.Fatalf("t3 = %+v (deps %v)", got[2], deps)
		}
		if len(got[0].Deps()) != 0 || len(got[0].Set()) != 0 || got[0].State != TaskPending {
			t.Fatalf("t2 = %+v", got[0])
		}
		run := "c1"
		err = s.Write(t.Context(), func(tx *Tx) error {
			if err := tx.InsertRun(child, nil); err != nil {
				return err
			}
			return tx.ChangeTask(TaskChange{Backlog: "b1", ID: "t2", From: []string{TaskPending, TaskReady}, To: TaskRunning, TaskRun: &run})
		})
		if err != nil {
			t.Fatal(err)
		}
		// A second start of the same task is refused: it is running.
		err = s.Write(t.Context(), func(tx *Tx) error {
			return tx.ChangeTask(TaskChange{Backlog: "b1", ID: "t2", From: []string{TaskPending, TaskReady}, To: TaskRunning, TaskRun: &run})
		})
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("second start: %v, want ErrConflict", err)
		}
		err = s.Write(t.Context(), func(tx *Tx) error {
			return tx.ChangeTask(TaskChange{Backlog: "b1", ID: "nope", From: []string{TaskPending}, To: TaskRunning})
		})
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing task: %v, want ErrNotFound", err)
		}
		base, landed, yes := "aaa", "bbb", true
		err = s.Write(t.Context(), func(tx *Tx) error {
			if err := tx.ChangeTask(TaskChange{Backlog: "b1", ID: "t2", From: []string{TaskRunning}, To: TaskLanding, LandBase: &base, LandAttempt: true}); err != nil {
				return err
			}
			return tx.ChangeTask(TaskChange{Backlog: "b1", ID: "t2", From: []string{TaskLanding}, To: TaskDone, Landed: &landed, Verified: &yes})
		})
		if err != nil {
			t.Fatal(err)
		}
		task, err := s.TaskOfRun(t.Context(), "c1")
		if err != nil || task.ID != "t2" || task.State != TaskDone || task.LandBase != "aaa" || task.LandedCommit != "bbb" ||
			!task.Verified || task.LandAttempts != 1 {
			t.Fatalf("task of c1 = %+v, %v", task, err)
		}
		if _, err := s.TaskOfRun(t.Context(), "b1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("task of the backlog itself: %v, want ErrNotFound", err)
		}
		kids, err := s.ChildRuns(t.Context(), "b1")
		if err != nil || len(kids) != 1 || kids[0].ID != "c1" || kids[0].Parent != "b1" {
			t.Fatalf("child runs = %+v, %v", kids, err)
		}
		if b, err := s.Run(t.Context(), "b1"); err != nil || b.Kind != KindBacklog || b.Parent != "" {
			t.Fatalf("backlog run = %+v, %v", b, err)
		}
		// A task list that names commands is trusted as kind tasks.
		sum := strings.Repeat("a", 64)
		if err := s.Write(t.Context(), func(tx *Tx) error {
			return tx.TrustFiles("/ws", []TrustedFile{{Path: "/ws/tasks.json", Kind: "tasks", SHA256: sum, Summary: "{}"}})
		}); err != nil {
			t.Fatalf("trust a task list: %v", err)
		}
	})
}
