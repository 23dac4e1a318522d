package notify

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
)

func openStore(t *testing.T) *storage.Store {
	t.Helper()
	s, err := storage.Open(t.Context(), filepath.Join(t.TempDir(), "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func insertRun(t *testing.T, s *storage.Store, id, config string) {
	t.Helper()
	r := storage.Run{ID: id, Workspace: "/ws", Goal: "goal", Config: config, Conditions: "{}", Status: api.RunPending}
	if err := s.Write(t.Context(), func(tx *storage.Tx) error { return tx.InsertRun(r, map[string]string{"run_id": id}) }); err != nil {
		t.Fatal(err)
	}
}

// The Hook writes the outbox rows in the event's own transaction: they
// commit with it, and vanish with it when the transaction rolls back.
func TestHookEnqueuesInTheEventsTransaction(t *testing.T) {
	s := openStore(t)
	n := New(Options{Store: s})
	s.SetEventHook(n.Hook)
	insertRun(t, s, "both", `{"notify_webhook":"http://127.0.0.1:9/x","notify_command":"true"}`)
	insertRun(t, s, "none", `{}`)
	insertRun(t, s, "failedonly", `{"notify_command":"true","notify_on":["failed"]}`)
	insertRun(t, s, "tasks", `{"notify_command":"true","notify_on":["task_blocked"]}`)

	emit := func(run string, typ events.Type) {
		t.Helper()
		if err := s.Write(t.Context(), func(tx *storage.Tx) error {
			_, err := tx.Event(run, nil, typ, map[string]any{"run_id": run})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	emit("both", events.StepFinished) // not a notifiable change
	emit("both", events.RunCompleted)
	emit("none", events.RunCompleted)       // no channel
	emit("failedonly", events.RunCompleted) // not in notify_on
	emit("failedonly", events.RunFailed)    // in notify_on
	emit("both", events.RunPaused)          // not in the default notify_on
	emit("both", events.RunWaiting)         // in the default notify_on
	emit("both", events.RunWaiting)         // the same wait, retried: once
	emit("both", events.TaskDone)           // not in the default notify_on
	emit("tasks", events.TaskDone)          // not in notify_on
	emit("tasks", events.TaskBlocked)       // in notify_on
	emit("tasks", events.RunFailed)         // not in notify_on
	emitStep := func(status api.StepStatus) {
		t.Helper()
		if err := s.Write(t.Context(), func(tx *storage.Tx) error {
			_, err := tx.Event("both", nil, events.StepFinished, map[string]any{"status": status})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	emitStep(api.StepFailed)
	emit("both", events.RunWaiting) // still the same wait
	emitStep(api.StepSucceeded)
	emit("both", events.RunWaiting) // work went on in between: a new wait
	rolledBack := errors.New("the state change failed")
	err := s.Write(t.Context(), func(tx *storage.Tx) error {
		if _, err := tx.Event("both", nil, events.RunAborted, nil); err != nil {
			return err
		}
		return rolledBack
	})
	if !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}

	want := map[string][]string{
		"both": {"RUN_COMPLETED/command", "RUN_COMPLETED/webhook", "RUN_WAITING/command", "RUN_WAITING/webhook",
			"RUN_WAITING/command", "RUN_WAITING/webhook"},
		"none":       nil,
		"failedonly": {"RUN_FAILED/command"},
		"tasks":      {"TASK_BLOCKED/command"},
	}
	for run, w := range want {
		rows, err := s.Notifications(t.Context(), run)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			if r.State != storage.NotificationPending || r.Attempts != 0 {
				t.Errorf("%s: new row %+v is not pending", run, r)
			}
			got = append(got, r.EventType+"/"+r.Channel)
		}
		if len(got) != len(w) {
			t.Fatalf("%s: outbox %v, want %v", run, got, w)
		}
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("%s: outbox %v, want %v", run, got, w)
			}
		}
	}

	// An attempt is recorded once: a second record of the same attempt is
	// a conflict and changes nothing.
	rows, _ := s.Notifications(t.Context(), "failedonly")
	record := func() error {
		return s.Write(t.Context(), func(tx *storage.Tx) error {
			return tx.RecordNotificationAttempt(rows[0], 1, storage.NotificationSent, 0, "")
		})
	}
	if err := record(); err != nil {
		t.Fatal(err)
	}
	if err := record(); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("second record of attempt 1: %v, want ErrConflict", err)
	}
	if pending, _ := s.PendingNotifications(t.Context(), 10); len(pending) != 7 {
		t.Errorf("%d pending rows, want the 6 of run both and 1 of run tasks", len(pending))
	}
}
