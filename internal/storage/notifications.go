package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Notification states.
const (
	NotificationPending = "pending" // due at NextAt
	NotificationSent    = "sent"    // delivered
	NotificationFailed  = "failed"  // given up: the last attempt failed for good
)

// Notification is a row of the notification outbox: one channel's
// delivery of one event.
type Notification struct {
	ID        int64  `db:"id"`
	RunID     string `db:"run_id"`
	EventSeq  int64  `db:"event_seq"`
	EventType string `db:"event_type"`
	Channel   string `db:"channel"`
	State     string `db:"state"`
	Attempts  int    `db:"attempts"`
	NextAt    int64  `db:"next_at"`
	CreatedAt int64  `db:"created_at"`
	DoneAt    *int64 `db:"done_at"`
	LastError string `db:"last_error"`
	// ClaimOwner and ClaimEpoch are the claim a fleet node delivers the
	// row under (ClaimNotifications); zero for the embedded daemon, which
	// never claims.
	ClaimOwner string `db:"claim_owner"`
	ClaimEpoch int64  `db:"claim_epoch"`
}

// notificationColumns are the columns of a Notification, in the order of
// its fields.
const notificationColumns = `id, run_id, event_seq, event_type, channel, state, attempts, next_at, created_at,
	done_at, last_error, claim_owner, claim_epoch`

// EventHook is called inside the transaction of every event, right after
// the event is inserted: what it writes commits or rolls back with the
// event and the state change beside it. It must be fast and must not use
// the Store (only tx): the writer's one connection is held.
type EventHook func(tx *Tx, ev Event) error

// SetEventHook installs the hook; used once at daemon start, before any
// write.
func (s *Store) SetEventHook(fn EventHook) { s.hook = fn }

// RunConfig returns a run's frozen config JSON, read in the transaction.
func (t *Tx) RunConfig(runID string) (string, error) {
	var cfg string
	if err := t.get(&cfg, `SELECT config FROM runs WHERE id = ?`, runID); err != nil {
		return "", fmt.Errorf("read run %s config: %w", runID, err)
	}
	return cfg, nil
}

// EnqueueNotification adds a pending notification for one channel of an
// event, due now. A second one for the same event and channel is ignored.
func (t *Tx) EnqueueNotification(runID string, eventSeq int64, eventType, channel string) error {
	_, err := t.exec(`INSERT INTO notifications (run_id, event_seq, event_type, channel, next_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (event_seq, channel) DO NOTHING`,
		runID, eventSeq, eventType, channel, t.now, t.now)
	if err != nil {
		return fmt.Errorf("enqueue %s notification: %w", channel, err)
	}
	return nil
}

// RecordNotificationAttempt records the end of attempt number attempts
// (1-based) of notification row: still pending and due again at nextAt, or
// sent, or failed for good. It is a compare-and-set on the attempt count
// and on the row's claim (ClaimOwner, ClaimEpoch: a fleet node's), so an
// attempt recorded twice, or by a node whose claim expired and was taken
// by another, is refused with ErrConflict. The claim ends with the record:
// a retry is anyone's to claim when it is due.
func (t *Tx) RecordNotificationAttempt(row Notification, attempts int, state string, nextAt int64, lastError string) error {
	var doneAt *int64
	if state != NotificationPending {
		doneAt = &t.now
	}
	res, err := t.exec(`UPDATE notifications SET state = ?, attempts = ?, next_at = ?, done_at = ?, last_error = ?,
		claim_owner = '', claim_expires_at = 0
		WHERE id = ? AND state = 'pending' AND attempts = ? AND claim_owner = ? AND claim_epoch = ?`,
		state, attempts, nextAt, doneAt, lastError, row.ID, attempts-1, row.ClaimOwner, row.ClaimEpoch)
	if err != nil {
		return fmt.Errorf("record notification attempt: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("notification %d attempt %d: %w", row.ID, attempts, ErrConflict)
	}
	return nil
}

// Notifications returns a run's notifications in the order they were
// enqueued.
func (s *Store) Notifications(ctx context.Context, runID string) ([]Notification, error) {
	var ns []Notification
	err := s.sel(ctx, &ns, `SELECT `+notificationColumns+` FROM notifications WHERE run_id = ? ORDER BY id`, runID)
	return ns, err
}

// EventBySeq returns one event.
func (s *Store) EventBySeq(ctx context.Context, seq int64) (Event, error) {
	var ev Event
	err := s.get(ctx, &ev, `SELECT `+eventColumns+` FROM events WHERE seq = ?`, seq)
	if errors.Is(err, sql.ErrNoRows) {
		return Event{}, fmt.Errorf("event %d: %w", seq, ErrNotFound)
	}
	return ev, err
}

// PendingNotifications returns up to limit pending notifications, the
// earliest due first.
func (s *Store) PendingNotifications(ctx context.Context, limit int) ([]Notification, error) {
	var ns []Notification
	err := s.sel(ctx, &ns, `SELECT `+notificationColumns+` FROM notifications WHERE state = 'pending' ORDER BY next_at, id LIMIT ?`, limit)
	return ns, err
}

// ClaimNotifications claims, for owner, up to limit pending notifications
// due at now (Unix ms; next_at is written on the enqueuing node's clock)
// that no other node holds: unclaimed, or whose claim expired on the
// database's clock. One FOR UPDATE SKIP LOCKED statement, so two nodes
// claiming at once never get the same row; each claim adds 1 to the row's
// claim_epoch and lasts ttl. The claimer sends each row before its claim
// expires (or not at all) and records the attempt with
// RecordNotificationAttempt, fenced by the claim. PostgreSQL only: the
// embedded daemon is its outbox's one sender.
func (s *Store) ClaimNotifications(ctx context.Context, owner string, ttl time.Duration, now int64, limit int) ([]Notification, error) {
	if !s.pg {
		return nil, ErrNotFleet
	}
	if limit <= 0 {
		return nil, nil
	}
	var ns []Notification
	// On the writer's pool, not the lease connection: a claim must never
	// delay a heartbeat.
	err := s.w.SelectContext(ctx, &ns, `WITH c AS (
		SELECT id FROM notifications
		WHERE state = 'pending' AND next_at <= $1 AND (claim_owner = '' OR claim_expires_at <= `+dbNowMS+`)
		ORDER BY next_at, id
		LIMIT $2
		FOR UPDATE SKIP LOCKED)
	UPDATE notifications n SET claim_owner = $3, claim_epoch = n.claim_epoch + 1,
		claim_expires_at = `+dbNowMS+` + $4
	FROM c WHERE n.id = c.id
	RETURNING `+prefixed("n.", notificationColumns),
		now, limit, owner, ttl.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	return ns, nil
}

// NextNotificationAt is when the earliest pending notification no node
// holds is due (Unix ms on the enqueuing node's clock), or 0 for none.
func (s *Store) NextNotificationAt(ctx context.Context) (int64, error) {
	var next sql.NullInt64
	err := s.get(ctx, &next, `SELECT MIN(next_at) FROM notifications WHERE state = 'pending' AND claim_owner = ''`)
	return next.Int64, err
}

// prefixed qualifies each column of a comma list with p.
func prefixed(p, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// WaitingAgain reports whether a run going WAITING at event seq is the
// same wait going on: it went WAITING before, and no step has succeeded
// since (an agent retried after a back-off that hit the same trouble).
func (t *Tx) WaitingAgain(runID string, seq int64) (bool, error) {
	var prev sql.NullInt64
	if err := t.get(&prev, `SELECT MAX(seq) FROM events WHERE run_id = ? AND seq < ? AND type = 'RUN_WAITING'`, runID, seq); err != nil {
		return false, fmt.Errorf("read earlier waits: %w", err)
	}
	if !prev.Valid {
		return false, nil
	}
	var succeeded int
	q := `SELECT COUNT(*) FROM events WHERE run_id = ? AND seq > ? AND seq < ? AND type = 'STEP_FINISHED'
		AND json_extract(payload, '$.status') = 'SUCCEEDED'`
	if t.pg {
		q = `SELECT COUNT(*) FROM events WHERE run_id = ? AND seq > ? AND seq < ? AND type = 'STEP_FINISHED'
		AND payload::jsonb ->> 'status' = 'SUCCEEDED'`
	}
	if err := t.get(&succeeded, q, runID, prev.Int64, seq); err != nil {
		return false, fmt.Errorf("read steps since the last wait: %w", err)
	}
	return succeeded == 0, nil
}
