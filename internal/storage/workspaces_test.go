package storage

import (
	"errors"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

func TestActiveInPlaceRun(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		ctx := t.Context()
		active := func(ws, except string) (string, error) {
			var id string
			err := s.Write(ctx, func(tx *Tx) error {
				r, err := tx.ActiveInPlaceRun(ws, except)
				id = r.ID
				return err
			})
			return id, err
		}
		if _, err := active("/ws", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("empty database: %v", err)
		}
		newRun(t, s, "a") // PENDING, in place, in /ws
		wt := Run{ID: "w", Workspace: "/ws", Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunPending, Isolation: "worktree"}
		if err := s.Write(ctx, func(tx *Tx) error { return tx.InsertRun(wt, nil) }); err != nil {
			t.Fatal(err)
		}
		if id, err := active("/ws", ""); err != nil || id != "a" {
			t.Fatalf("active in /ws: %q %v, want a", id, err)
		}
		if _, err := active("/ws", "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the run itself is excepted, the worktree run never counts: %v", err)
		}
		if _, err := active("/other", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another workspace: %v", err)
		}
		// An ended run no longer holds the workspace.
		err := s.Write(ctx, func(tx *Tx) error {
			return tx.TransitionRun(Transition{RunID: "a", From: []api.RunStatus{api.RunPending}, To: api.RunInterrupted,
				Reason: "user_stop", Event: events.RunInterrupted})
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := active("/ws", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after the run ended: %v", err)
		}
	})
}

func TestRecordGitObjectOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		ctx := t.Context()
		newRun(t, s, "r")
		o := GitObject{RunID: "r", Kind: GitWorktree, Repo: "/repo/.git", Name: "/home/worktrees/r"}
		for range 2 {
			if err := s.Write(ctx, func(tx *Tx) error { return tx.RecordGitObject(o) }); err != nil {
				t.Fatal(err)
			}
		}
		b := GitObject{RunID: "r", Kind: GitBranch, Repo: "/repo/.git", Name: "loop/r"}
		if err := s.Write(ctx, func(tx *Tx) error { return tx.RecordGitObject(b) }); err != nil {
			t.Fatal(err)
		}
		got, err := s.GitObjects(ctx, "r")
		if err != nil || len(got) != 2 || got[0].Kind != GitWorktree || got[1].Name != "loop/r" || got[0].RemovedAt != nil {
			t.Fatalf("git objects: %+v %v", got, err)
		}
		if err := s.Write(ctx, func(tx *Tx) error { return tx.SetWorktreeState("r", "present") }); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.Run(ctx, "r"); r.WorktreeState != "present" {
			t.Fatalf("worktree_state %q", r.WorktreeState)
		}
		if err := s.Write(ctx, func(tx *Tx) error { return tx.SetWorktreeState("nope", "gone") }); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown run: %v", err)
		}
	})
}
