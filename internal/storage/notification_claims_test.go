package storage

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/events"
)

// Two nodes over one PostgreSQL database claim each due notification
// once, even claiming at the same moment; a claim that expired (its node
// died mid-delivery) is claimed again under a new epoch, and the dead
// node's late record of its attempt is refused.
func TestNotificationClaims(t *testing.T) {
	url := pgDatabase(t)
	a, b := openURL(t, url), openURL(t, url)
	newRun(t, a, "r1")
	const rows = 40
	if err := a.Write(t.Context(), func(tx *Tx) error {
		for range rows {
			seq, err := tx.Event("r1", nil, events.RunWaiting, nil)
			if err != nil {
				return err
			}
			if err := tx.EnqueueNotification("r1", seq, string(events.RunWaiting), "webhook"); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(time.Minute).UnixMilli()
	// Not due yet: nothing claimed.
	if got, err := a.ClaimNotifications(t.Context(), "a", time.Hour, 1, rows); err != nil || len(got) != 0 {
		t.Fatalf("claim before due = %d rows, %v; want none", len(got), err)
	}
	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	for _, n := range []struct {
		s     *Store
		owner string
	}{{a, "a"}, {b, "b"}} {
		wg.Go(func() {
			for {
				got, err := n.s.ClaimNotifications(t.Context(), n.owner, time.Hour, now, 3)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					if prev, dup := seen[r.ID]; dup {
						t.Errorf("notification %d claimed by %s and %s", r.ID, prev, n.owner)
					}
					if r.ClaimOwner != n.owner || r.ClaimEpoch != 1 {
						t.Errorf("claim of %d = %s/%d, want %s/1", r.ID, r.ClaimOwner, r.ClaimEpoch, n.owner)
					}
					seen[r.ID] = n.owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != rows {
		t.Fatalf("%d notifications claimed, want %d", len(seen), rows)
	}

	// One claim that expires at once: its node "died" mid-delivery.
	c := newRunNotification(t, a, "r2")
	first, err := a.ClaimNotifications(t.Context(), "a", time.Millisecond, now, 1)
	if err != nil || len(first) != 1 || first[0].ID != c {
		t.Fatalf("claim = %+v, %v; want notification %d", first, err, c)
	}
	// Claimable again once the 1 ms claim is past on the database's clock.
	var second []Notification
	for deadline := time.Now().Add(5 * time.Second); len(second) == 0 && err == nil && time.Now().Before(deadline); {
		second, err = b.ClaimNotifications(t.Context(), "b", time.Hour, now, 1)
	}
	if err != nil || len(second) != 1 || second[0].ID != c || second[0].ClaimEpoch != 2 {
		t.Fatalf("claim after expiry = %+v, %v; want notification %d under epoch 2", second, err, c)
	}
	record := func(s *Store, row Notification) error {
		return s.Write(t.Context(), func(tx *Tx) error {
			return tx.RecordNotificationAttempt(row, 1, NotificationSent, now, "")
		})
	}
	if err := record(a, first[0]); !errors.Is(err, ErrConflict) {
		t.Fatalf("record under the expired claim: %v, want ErrConflict", err)
	}
	if err := record(b, second[0]); err != nil {
		t.Fatalf("record under the live claim: %v", err)
	}
	if got, _ := a.ClaimNotifications(t.Context(), "a", time.Hour, now, 10); len(got) != 0 {
		t.Fatalf("a sent notification claimed again: %+v", got)
	}
}

// newRunNotification makes a run with one pending webhook notification
// and returns its id.
func newRunNotification(t *testing.T, s *Store, run string) int64 {
	t.Helper()
	newRun(t, s, run)
	if err := s.Write(t.Context(), func(tx *Tx) error {
		seq, err := tx.Event(run, nil, events.RunWaiting, nil)
		if err != nil {
			return err
		}
		return tx.EnqueueNotification(run, seq, string(events.RunWaiting), "webhook")
	}); err != nil {
		t.Fatal(err)
	}
	ns, err := s.Notifications(t.Context(), run)
	if err != nil || len(ns) != 1 {
		t.Fatalf("notifications of %s = %+v, %v", run, ns, err)
	}
	return ns[0].ID
}
