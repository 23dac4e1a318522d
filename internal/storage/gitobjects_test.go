package storage

import (
	"encoding/json"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

func TestGitObjectsGoneRemovedAndEnded(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		ctx := t.Context()
		for _, id := range []string{"r1", "r2"} {
			r := Run{ID: id, Workspace: "/ws", Config: "{}", Conditions: "{}", Status: api.RunPending,
				Isolation: "worktree", Worktree: "/home/worktrees/" + id, Branch: "loop/" + id, WorktreeState: "present"}
			if err := s.Write(ctx, func(tx *Tx) error {
				if err := tx.InsertRun(r, nil); err != nil {
					return err
				}
				_, err := tx.exec(`INSERT INTO git_objects (run_id, kind, repo, name, created_at) VALUES (?, 'worktree', '/repo/.git', ?, 1),
					(?, 'branch', '/repo/.git', ?, 1)`, id, r.Worktree, id, r.Branch)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		end := func(id string) {
			t.Helper()
			if err := s.Write(ctx, func(tx *Tx) error {
				return tx.TransitionRun(Transition{RunID: id, From: []api.RunStatus{api.RunPending}, To: api.RunCompleted})
			}); err != nil {
				t.Fatal(err)
			}
		}
		end("r1")
		// A worktree recorded but not made yet is not live: it cannot be gone.
		if err := s.Write(ctx, func(tx *Tx) error {
			r := Run{ID: "r0", Workspace: "/ws", Config: "{}", Conditions: "{}", Status: api.RunPending,
				Isolation: "worktree", Worktree: "/home/worktrees/r0", Branch: "loop/r0"}
			if err := tx.InsertRun(r, nil); err != nil {
				return err
			}
			_, err := tx.exec(`INSERT INTO git_objects (run_id, kind, repo, name, created_at) VALUES ('r0', 'worktree', '/repo/.git', ?, 1)`, r.Worktree)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		live, err := s.LiveWorktrees(ctx, "")
		if err != nil || len(live) != 2 || live[0].Kind != "worktree" {
			t.Fatalf("live = %+v, %v", live, err)
		}
		ids, err := s.EndedWorktreeRuns(ctx, s.Now())
		if err != nil || len(ids) != 1 || ids[0] != "r1" {
			t.Fatalf("ended = %v, %v; want only the ended r1", ids, err)
		}
		if ids, _ := s.EndedWorktreeRuns(ctx, s.Now()-1); len(ids) != 0 {
			t.Fatalf("ended before now-1ms = %v; want none (it ended at now)", ids)
		}

		if err := s.Write(ctx, func(tx *Tx) error { return tx.MarkWorktreeGone(live[0]) }); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.Run(ctx, "r1"); r.WorktreeState != "gone" {
			t.Fatalf("r1 state = %q, want gone", r.WorktreeState)
		}
		if live, _ := s.LiveWorktrees(ctx, ""); len(live) != 1 || live[0].RunID != "r2" {
			t.Fatalf("live after gone = %+v", live)
		}
		// A gone worktree is still cleaned (its stale git entry) and then removed.
		if ids, _ := s.EndedWorktreeRuns(ctx, s.Now()); len(ids) != 1 {
			t.Fatalf("a gone worktree is not offered to clean: %v", ids)
		}
		recs, _ := s.RunWorktrees(ctx, "r1")
		if err := s.Write(ctx, func(tx *Tx) error { return tx.MarkWorktreeRemoved(recs[0]) }); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.Run(ctx, "r1"); r.WorktreeState != "removed" {
			t.Fatalf("r1 state = %q, want removed", r.WorktreeState)
		}
		if ids, _ := s.EndedWorktreeRuns(ctx, s.Now()); len(ids) != 0 {
			t.Fatalf("a removed worktree is offered to clean again: %v", ids)
		}
		// Marking a removed one gone changes nothing.
		if err := s.Write(ctx, func(tx *Tx) error { return tx.MarkWorktreeGone(recs[0]) }); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.Run(ctx, "r1"); r.WorktreeState != "removed" {
			t.Fatalf("r1 state = %q after a late gone, want removed", r.WorktreeState)
		}

		payload := map[string]any{"run_id": "r1", "mode": "merge", "verified": true}
		if err := s.Write(ctx, func(tx *Tx) error { return tx.RecordLanded("r1", "abc", payload) }); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.Run(ctx, "r1"); r.LandedCommit != "abc" {
			t.Fatalf("landed_commit = %q", r.LandedCommit)
		}
		evs, _ := s.Events(ctx, "r1", 0, 100)
		last := evs[len(evs)-1]
		var got map[string]any
		_ = json.Unmarshal([]byte(last.Payload), &got)
		if last.Type != events.RunLanded || got["mode"] != "merge" {
			t.Fatalf("last event = %s %s", last.Type, last.Payload)
		}
		if err := s.Write(ctx, func(tx *Tx) error { return tx.RecordLanded("nope", "abc", payload) }); err == nil {
			t.Fatal("RecordLanded of a missing run succeeded")
		}
	})
}
