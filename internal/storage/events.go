package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/loopd/loopd/internal/events"
)

// Event is a row of the events table.
type Event struct {
	Seq     int64       `db:"seq"`
	RunID   string      `db:"run_id"`
	StepID  *int64      `db:"step_id"`
	Type    events.Type `db:"type"`
	TS      int64       `db:"ts"`
	Payload string      `db:"payload"`
}

// eventColumns are the columns of an Event, in the order of its fields.
const eventColumns = `seq, run_id, step_id, type, ts, payload`

// Event appends an event in the transaction and returns its seq. payload is
// marshalled to JSON (nil becomes {}).
func (t *Tx) Event(runID string, stepID *int64, typ events.Type, payload any) (int64, error) {
	body := []byte("{}")
	if payload != nil {
		var err error
		if raw, ok := payload.(json.RawMessage); ok {
			body = raw
		} else if body, err = json.Marshal(payload); err != nil {
			return 0, fmt.Errorf("encode %s payload: %w", typ, err)
		}
	}
	var seq int64
	if t.pg {
		if err := t.get(&seq, qInsertEventPG, runID, stepID, typ, t.now, string(body)); err != nil {
			return 0, fmt.Errorf("insert %s event: %w", typ, err)
		}
	} else {
		res, err := t.exec(qInsertEvent,
			runID, stepID, typ, t.now, string(body))
		if err != nil {
			return 0, fmt.Errorf("insert %s event: %w", typ, err)
		}
		if seq, err = res.LastInsertId(); err != nil {
			return 0, err
		}
	}
	t.lastSeq = seq
	if !slices.Contains(t.runs, runID) {
		t.runs = append(t.runs, runID)
	}
	if t.hook != nil {
		if err := t.hook(t, Event{Seq: seq, RunID: runID, StepID: stepID, Type: typ, TS: t.now, Payload: string(body)}); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

// Events returns up to limit events of a run (every run when runID is "")
// with seq > after, in order.
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = 1000
	}
	var evs []Event
	var err error
	if runID == "" {
		err = s.sel(ctx, &evs, `SELECT `+eventColumns+` FROM events
			WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	} else {
		err = s.sel(ctx, &evs, `SELECT `+eventColumns+` FROM events
			WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`, runID, after, limit)
	}
	return evs, err
}

// EventsOfType returns a run's events of one type, in order.
func (s *Store) EventsOfType(ctx context.Context, runID string, typ events.Type) ([]Event, error) {
	var evs []Event
	err := s.sel(ctx, &evs, `SELECT `+eventColumns+` FROM events
		WHERE run_id = ? AND type = ? ORDER BY seq`, runID, typ)
	return evs, err
}

// EventEnds returns a run's first n and last n events, in order and each
// once, and how many events the run has in all: what a report of a run
// with a million events shows, without loading them.
func (s *Store) EventEnds(ctx context.Context, runID string, n int) ([]Event, int, error) {
	var total int
	if err := s.get(ctx, &total, `SELECT COUNT(*) FROM events WHERE run_id = ?`, runID); err != nil {
		return nil, 0, err
	}
	var head, tail []Event
	if err := s.sel(ctx, &head, `SELECT `+eventColumns+` FROM events
		WHERE run_id = ? ORDER BY seq LIMIT ?`, runID, n); err != nil {
		return nil, 0, err
	}
	if err := s.sel(ctx, &tail, `SELECT `+eventColumns+` FROM events
		WHERE run_id = ? ORDER BY seq DESC LIMIT ?`, runID, n); err != nil {
		return nil, 0, err
	}
	evs := head
	var last int64
	if len(head) > 0 {
		last = head[len(head)-1].Seq
	}
	for i := len(tail) - 1; i >= 0; i-- {
		if tail[i].Seq > last {
			evs = append(evs, tail[i])
		}
	}
	return evs, total, nil
}

// LastEventSeq returns the newest event seq (0 when there is none).
func (s *Store) LastEventSeq(ctx context.Context) (int64, error) {
	var seq int64
	err := s.get(ctx, &seq, `SELECT COALESCE(MAX(seq), 0) FROM events`)
	return seq, err
}

// LastTerminalEvent returns the seq of a run's newest terminal event, or
// ErrNotFound.
func (s *Store) LastTerminalEvent(ctx context.Context, runID string) (int64, error) {
	var seq sql.NullInt64
	err := s.get(ctx, &seq, `SELECT MAX(seq) FROM events WHERE run_id = ? AND type IN (?, ?, ?, ?)`,
		runID, events.RunCompleted, events.RunFailed, events.RunAborted, events.RunInterrupted)
	if err != nil {
		return 0, err
	}
	if !seq.Valid {
		return 0, ErrNotFound
	}
	return seq.Int64, nil
}

// Statements of the step path, prepared when the store opens (hotWrites).
const qInsertEvent = `INSERT INTO events (run_id, step_id, type, ts, payload) VALUES (?, ?, ?, ?, ?)`

// qInsertEventPG numbers the event from the one-row counter (see the
// PostgreSQL migration 0001): the counter's row stays locked until the
// transaction ends, so events commit in seq order, gap-free, as SQLite's
// single writer guarantees. In the same round trip it queues a
// notification on EventsChannel with the seq, which PostgreSQL delivers
// when the transaction commits (never for a rollback): other nodes'
// FollowCommits wake on it. n is joined so that it runs: a CTE nobody
// reads is not evaluated.
const qInsertEventPG = `WITH c AS (UPDATE event_counter SET last = last + 1 WHERE id = 1 RETURNING last),
	n AS (SELECT pg_notify('` + EventsChannel + `', c.last::text) FROM c)
	INSERT INTO events (seq, run_id, step_id, type, ts, payload)
	SELECT c.last, ?::text, ?::bigint, ?::text, ?::bigint, ?::text FROM c, n RETURNING seq`
