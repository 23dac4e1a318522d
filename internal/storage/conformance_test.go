package storage

import (
	"errors"
	"slices"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

// The store's reads and writes not covered by the other tests, per
// dialect: each is a statement PostgreSQL could spell, type or order
// differently from SQLite.

// Flags round-trip as booleans (stored 0/1 in both dialects), requests
// apply only to live runs, and a config update is compare-and-set.
func TestRunFlagsAndRequests(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "r1")
		write := func(fn func(tx *Tx) error) {
			t.Helper()
			if err := s.Write(t.Context(), fn); err != nil {
				t.Fatal(err)
			}
		}
		write(func(tx *Tx) error {
			if err := tx.SetPauseRequest("r1", true); err != nil {
				return err
			}
			if err := tx.SetUserSignal("r1"); err != nil {
				return err
			}
			return tx.SetStopRequest("r1", StopGraceful)
		})
		f, err := s.RunFlags(t.Context(), "r1")
		if err != nil || !f.PauseRequest || !f.UserSignal || f.StopRequest != StopGraceful || f.Status != api.RunPending {
			t.Fatalf("flags = %+v, %v; want pause, signal, graceful stop, PENDING", f, err)
		}
		write(func(tx *Tx) error {
			if err := tx.SetPauseRequest("r1", false); err != nil {
				return err
			}
			if err := tx.ClearUserSignal("r1"); err != nil {
				return err
			}
			if err := tx.UpdateConfig("r1", `{"x":1}`, `{"y":2}`); err != nil {
				return err
			}
			f, err := tx.Flags("r1")
			if err == nil && (f.PauseRequest || f.UserSignal) {
				t.Errorf("flags in the transaction = %+v, want both lowered", f)
			}
			return err
		})
		r, err := s.Run(t.Context(), "r1")
		if err != nil || r.PauseRequest || r.UserSignal || r.Config != `{"x":1}` || r.Conditions != `{"y":2}` {
			t.Fatalf("run = %+v, %v", r, err)
		}
		if _, err := s.RunFlags(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("flags of a missing run: %v, want ErrNotFound", err)
		}
	})
}

// Runs created in the same millisecond keep their insertion order (SQLite's
// rowid; a rowid identity column in PostgreSQL).
func TestRunOrderAndClaim(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d) // a fixed clock: every run has the same created_at
		for _, id := range []string{"c", "a", "d", "b"} {
			newRun(t, s, id)
		}
		list, err := s.ListRuns(t.Context(), RunFilter{})
		if got := runIDs(list); err != nil || !slices.Equal(got, []string{"b", "d", "a", "c"}) {
			t.Fatalf("ListRuns = %v, %v; want newest first b d a c", got, err)
		}
		list, err = s.ListRuns(t.Context(), RunFilter{Status: api.RunPending, Workspace: "/ws", Limit: 2})
		if got := runIDs(list); err != nil || !slices.Equal(got, []string{"b", "d"}) {
			t.Fatalf("ListRuns limit 2 = %v, %v", got, err)
		}
		wait := int64(5_000)
		if err := s.Write(t.Context(), func(tx *Tx) error {
			for _, id := range []string{"c", "a"} {
				if err := tx.TransitionRun(Transition{RunID: id, From: []api.RunStatus{api.RunPending}, To: api.RunWaiting,
					WaitUntil: &wait, Event: events.RunWaiting}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		waiting, err := s.RunsInStatus(t.Context(), api.RunWaiting, api.RunCompleted)
		if got := runIDs(waiting); err != nil || !slices.Equal(got, []string{"c", "a"}) {
			t.Fatalf("RunsInStatus = %v, %v; want oldest first c a", got, err)
		}
		if at, err := s.NextWakeUp(t.Context()); err != nil || at != wait {
			t.Fatalf("NextWakeUp = %d, %v; want %d", at, err, wait)
		}
		if r, err := s.Claimable(t.Context(), wait-1); err != nil || r.ID != "d" {
			t.Fatalf("Claimable before the reset = %q, %v; want the oldest PENDING d", r.ID, err)
		}
		if r, err := s.Claimable(t.Context(), wait); err != nil || r.ID != "c" {
			t.Fatalf("Claimable at the reset = %q, %v; want c", r.ID, err)
		}
		since, err := s.WaitingSince(t.Context())
		if err != nil || len(since) != 2 {
			t.Fatalf("WaitingSince = %v, %v", since, err)
		}
	})
}

func runIDs(rs []Run) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

// Run aggregates: upserted, read back per run through the JSON-array
// queries (json_each / jsonb_array_elements_text), and current only while
// the step they were computed after is the newest.
func TestRunStatsAndViews(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "r1")
		newRun(t, s, "r2")
		st1 := &Step{RunID: "r1", Seq: 1, Phase: api.PhaseImplementation, Iteration: 1, LogPath: "/l/1"}
		if err := s.Write(t.Context(), func(tx *Tx) error {
			if err := tx.InsertStep(st1, nil); err != nil {
				return err
			}
			st1.Status = api.StepSucceeded
			if err := tx.FinishStep(st1, events.StepFinished, map[string]any{"status": st1.Status}); err != nil {
				return err
			}
			if err := tx.SetRunStats("r1", RunStats{LastSeq: 1, LastStatus: api.StepFailed, Iteration: 7}); err != nil {
				return err
			}
			// The upsert replaces; the if-missing insert then changes nothing.
			if err := tx.SetRunStats("r1", RunStats{LastSeq: 1, LastStatus: api.StepSucceeded, Iteration: 1}); err != nil {
				return err
			}
			if err := tx.SetRunStatsIfMissing("r1", RunStats{LastSeq: 1, LastStatus: api.StepSucceeded, Iteration: 99}); err != nil {
				return err
			}
			for i := range 3 {
				if err := tx.InsertEvaluation(Evaluation{RunID: "r1", StepID: &st1.ID, Iteration: i + 1, Results: `[]`}, false); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if st, err := s.RunStats(t.Context(), "r1"); err != nil || st.Iteration != 1 {
			t.Fatalf("RunStats = %+v, %v; want iteration 1", st, err)
		}
		if _, err := s.RunStats(t.Context(), "r2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("RunStats of a run without: %v", err)
		}
		views, err := s.RunViews(t.Context(), []string{"r1", "r2", "missing"})
		if err != nil || len(views) != 1 || views["r1"].Last.ID != st1.ID || views["r1"].Stats.Iteration != 1 {
			t.Fatalf("RunViews = %+v, %v; want r1 only, after step %d", views, err, st1.ID)
		}
		last, err := s.LastStep(t.Context(), "r1")
		if err != nil || last.ID != st1.ID {
			t.Fatalf("LastStep = %+v, %v", last, err)
		}
		evs, err := s.LastEvaluations(t.Context(), []string{"r1", "r2"})
		if err != nil || len(evs) != 1 || evs["r1"].Iteration != 3 {
			t.Fatalf("LastEvaluations = %+v, %v; want r1's third", evs, err)
		}
		if e, err := s.LastEvaluation(t.Context(), "r1"); err != nil || e.Iteration != 3 {
			t.Fatalf("LastEvaluation = %+v, %v", e, err)
		}
		// A newer step makes the aggregates stale: the view is derived instead.
		if err := s.Write(t.Context(), func(tx *Tx) error {
			return tx.InsertStep(&Step{RunID: "r1", Seq: 2, Phase: api.PhaseReview, Iteration: 1, LogPath: "/l/2"}, nil)
		}); err != nil {
			t.Fatal(err)
		}
		if views, err := s.RunViews(t.Context(), []string{"r1"}); err != nil || len(views) != 0 {
			t.Fatalf("RunViews after a newer step = %+v, %v; want none", views, err)
		}
		if ids, err := s.RunsWithoutStats(t.Context(), 10); err != nil || len(ids) != 0 {
			t.Fatalf("RunsWithoutStats = %v, %v; want none (r2 has no steps)", ids, err)
		}
		steps, err := s.StepsBetween(t.Context(), "r1", 1, 2)
		if err != nil || len(steps) != 2 || steps[1].Phase != api.PhaseReview {
			t.Fatalf("StepsBetween = %+v, %v", steps, err)
		}
	})
}

// The notification outbox: one row per event and channel, attempts
// recorded compare-and-set, and a wait that repeats without a successful
// step in between (read from the events' JSON payloads).
func TestNotificationsAndWaits(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "r1")
		var waitSeq int64
		if err := s.Write(t.Context(), func(tx *Tx) error {
			var err error
			if waitSeq, err = tx.Event("r1", nil, events.RunWaiting, nil); err != nil {
				return err
			}
			if err := tx.EnqueueNotification("r1", waitSeq, string(events.RunWaiting), "webhook"); err != nil {
				return err
			}
			return tx.EnqueueNotification("r1", waitSeq, string(events.RunWaiting), "webhook") // ignored
		}); err != nil {
			t.Fatal(err)
		}
		ns, err := s.PendingNotifications(t.Context(), 10)
		if err != nil || len(ns) != 1 || ns[0].EventSeq != waitSeq || ns[0].Channel != "webhook" {
			t.Fatalf("PendingNotifications = %+v, %v; want one", ns, err)
		}
		record := func(attempts int, state string) error {
			return s.Write(t.Context(), func(tx *Tx) error {
				return tx.RecordNotificationAttempt(ns[0], attempts, state, 9, "boom")
			})
		}
		if err := record(1, NotificationPending); err != nil {
			t.Fatal(err)
		}
		if err := record(1, NotificationSent); !errors.Is(err, ErrConflict) {
			t.Fatalf("attempt 1 recorded twice: %v, want ErrConflict", err)
		}
		if err := record(2, NotificationSent); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Notifications(t.Context(), "r1"); err != nil || len(got) != 1 || got[0].State != NotificationSent || got[0].DoneAt == nil {
			t.Fatalf("Notifications = %+v, %v", got, err)
		}
		if ev, err := s.EventBySeq(t.Context(), waitSeq); err != nil || ev.Type != events.RunWaiting {
			t.Fatalf("EventBySeq = %+v, %v", ev, err)
		}
		again := func(finished api.StepStatus) bool {
			t.Helper()
			var got bool
			if err := s.Write(t.Context(), func(tx *Tx) error {
				if _, err := tx.Event("r1", nil, events.StepFinished, map[string]any{"status": finished}); err != nil {
					return err
				}
				seq, err := tx.Event("r1", nil, events.RunWaiting, nil)
				if err != nil {
					return err
				}
				got, err = tx.WaitingAgain("r1", seq)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return got
		}
		if !again(api.StepFailed) {
			t.Error("a wait after a failed step is not the same wait")
		}
		if again(api.StepSucceeded) {
			t.Error("a wait after a successful step counts as the same wait")
		}
		if _, err := s.LastTerminalEvent(t.Context(), "r1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("LastTerminalEvent of a live run: %v", err)
		}
		if err := s.Write(t.Context(), func(tx *Tx) error {
			return tx.TransitionRun(Transition{RunID: "r1", From: []api.RunStatus{api.RunPending}, To: api.RunCompleted,
				Reason: "test", Event: events.RunCompleted})
		}); err != nil {
			t.Fatal(err)
		}
		last, _ := s.LastEventSeq(t.Context())
		if seq, err := s.LastTerminalEvent(t.Context(), "r1"); err != nil || seq != last {
			t.Errorf("LastTerminalEvent = %d, %v; want %d", seq, err, last)
		}
		if ids, after, err := s.ChangedRuns(t.Context(), 0, 100); err != nil || !slices.Equal(ids, []string{"r1"}) || after != last {
			t.Errorf("ChangedRuns = %v, %d, %v", ids, after, err)
		}
		if due, err := s.PostmortemsDue(t.Context()); err != nil || !slices.Equal(due, []string{"r1"}) {
			t.Errorf("PostmortemsDue = %v, %v", due, err)
		}
	})
}

// A baseline step (verify_baseline: phase baseline, iteration 0) is
// accepted by both dialects' phase CHECK and keeps its failing tests; a
// verification step keeps the tests it ignored as pre-existing. An
// unknown phase is still refused.
func TestBaselineStepAndIgnoredTests(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "r1")
		one := 1
		base := &Step{RunID: "r1", Seq: 1, Phase: api.PhaseBaseline, Iteration: 0, LogPath: "/l/1"}
		verify := &Step{RunID: "r1", Seq: 2, Phase: api.PhaseVerification, Iteration: 1, LogPath: "/l/2"}
		err := s.Write(t.Context(), func(tx *Tx) error {
			for _, st := range []*Step{base, verify} {
				if err := tx.InsertStep(st, nil); err != nil {
					return err
				}
			}
			base.Status, base.TestsFailed, base.TestsFailedNames = api.StepFailed, &one, Strings{"t.test_a"}
			verify.Status, verify.TestsFailed, verify.TestsFailedNames = api.StepSucceeded, &one, Strings{"t.test_a"}
			verify.TestsIgnoredNames = Strings{"t.test_a"}
			for _, st := range []*Step{base, verify} {
				if err := tx.FinishStep(st, events.StepFinished, nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		steps, err := s.Steps(t.Context(), "r1")
		if err != nil || len(steps) != 2 {
			t.Fatalf("steps = %+v, %v", steps, err)
		}
		if b := steps[0]; b.Phase != api.PhaseBaseline || b.Iteration != 0 || !slices.Equal(b.TestsFailedNames, Strings{"t.test_a"}) ||
			len(b.TestsIgnoredNames) != 0 {
			t.Errorf("baseline step = %+v", b)
		}
		if v := steps[1]; !slices.Equal(v.TestsIgnoredNames, Strings{"t.test_a"}) {
			t.Errorf("ignored tests = %q", v.TestsIgnoredNames)
		}
		err = s.Write(t.Context(), func(tx *Tx) error {
			return tx.InsertStep(&Step{RunID: "r1", Seq: 3, Phase: "warmup", Iteration: 1, LogPath: "/l/3"}, nil)
		})
		if err == nil {
			t.Error("a step of phase warmup was accepted")
		}
	})
}
