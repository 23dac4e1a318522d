package storage

import (
	"errors"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

// A fleet run's land is recorded once: a second record (another clone's
// land) is ErrConflict and adds no RUN_LANDED. Ended fleet runs are
// offered to clean --ended until their clean is recorded; embedded runs
// and active ones never are.
func TestFleetRunLandedOnceAndEndedFleetRuns(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		ctx := t.Context()
		for _, r := range []Run{
			{ID: "f1", RepoURL: "file:///r.git"},
			{ID: "f2", RepoURL: "file:///r.git"},
			{ID: "e1"},
		} {
			r.Workspace, r.Config, r.Conditions, r.Status = "/ws", "{}", "{}", api.RunPending
			if err := s.Write(ctx, func(tx *Tx) error { return tx.InsertRun(r, nil) }); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"f1", "e1"} {
			if err := s.Write(ctx, func(tx *Tx) error {
				return tx.TransitionRun(Transition{RunID: id, From: []api.RunStatus{api.RunPending}, To: api.RunCompleted})
			}); err != nil {
				t.Fatal(err)
			}
		}
		ended := func() []string {
			t.Helper()
			runs, err := s.EndedFleetRuns(ctx, s.Now())
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range runs {
				ids = append(ids, r.ID)
			}
			return ids
		}
		if got := ended(); len(got) != 1 || got[0] != "f1" {
			t.Fatalf("EndedFleetRuns = %v, want [f1]", got)
		}
		if err := s.Write(ctx, func(tx *Tx) error { return tx.SetWorktreeState("f1", "removed") }); err != nil {
			t.Fatal(err)
		}
		if got := ended(); len(got) != 0 {
			t.Fatalf("a cleaned fleet run is offered again: %v", got)
		}

		payload := map[string]any{"run_id": "f1", "mode": "merge"}
		if err := s.Write(ctx, func(tx *Tx) error { return tx.RecordLandedOnce("f1", "abc", payload) }); err != nil {
			t.Fatal(err)
		}
		err := s.Write(ctx, func(tx *Tx) error { return tx.RecordLandedOnce("f1", "def", payload) })
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("a second land record: %v, want ErrConflict", err)
		}
		if r, _ := s.Run(ctx, "f1"); r.LandedCommit != "abc" {
			t.Fatalf("landed_commit = %q, want the first land's", r.LandedCommit)
		}
		evs, _ := s.Events(ctx, "f1", 0, 100)
		n := 0
		for _, ev := range evs {
			if ev.Type == events.RunLanded {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d RUN_LANDED events, want 1", n)
		}
	})
}
