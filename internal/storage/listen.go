package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventsChannel is the PostgreSQL notification channel of committed
// events: every event's insert queues its seq on it, delivered when its
// transaction commits (qInsertEventPG).
const EventsChannel = "loopd_events"

// DefaultFollowPoll is how often FollowCommits re-reads the event log
// without a notification: the bound on a follower's delay when
// notifications are lost (a connection pooler in transaction mode drops
// LISTEN) or the LISTEN connection is down.
const DefaultFollowPoll = time.Second

// followPage bounds the rows one catch-up read returns.
const followPage = 5000

// catchUpTimeout bounds one catch-up, however many pages it reads.
const catchUpTimeout = 30 * time.Second

// pingEvery is how many quiet polls pass between checks that the LISTEN
// connection still answers.
const pingEvery = 10

// FollowCommits tells publish about every event other processes commit to
// a PostgreSQL store (the commits of this Store are told by Notify, at
// once): with the newest seq and the runs whose events arrived, in seq
// order, each seq once. It starts after seq `after` and returns when ctx
// ends.
//
// A LISTEN connection of its own wakes it within milliseconds of a
// commit; it then re-reads `seq > last` from the table rather than
// trusting the notification's payload, which is correct only because seq
// is numbered at commit (a sequence commits out of order, and a follower
// that bookmarks it misses rows). Every poll it re-reads anyway, and while
// the LISTEN connection is down it reconnects with back-off and goes on
// polling: a lost connection or notification delays events, never loses
// them. SQLite has one process per database: FollowCommits returns an
// error for it.
func (s *Store) FollowCommits(ctx context.Context, after int64, poll time.Duration, publish func(seq int64, runs []string)) error {
	if !s.pg {
		return errors.New("follow commits: only a PostgreSQL store has writers in other processes")
	}
	if poll <= 0 {
		poll = DefaultFollowPoll
	}
	f := &commitFollower{s: s, last: after, publish: publish}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	backoff := 50 * time.Millisecond
	idle := 0 // polls that timed out, for pingEvery
	for ctx.Err() == nil {
		if conn == nil {
			c, err := s.listen(ctx)
			if err != nil {
				// Poll while the connection is down; retry sooner than a
				// poll at first, then back off to it.
				if err := f.catchUp(ctx); err != nil && ctx.Err() == nil {
					s.followErr(err)
				}
				sleep(ctx, min(backoff, poll))
				backoff = min(2*backoff, poll)
				continue
			}
			conn, backoff = c, 50*time.Millisecond
			// Events committed while it was not listening.
			if err := f.catchUp(ctx); err != nil && ctx.Err() == nil {
				s.followErr(err)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, poll)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			// A commit this follower has already read past (its own
			// catch-up saw it) costs no query.
			if seq, perr := strconv.ParseInt(n.Payload, 10, 64); perr == nil && seq <= f.last {
				continue
			}
		case errors.Is(err, context.DeadlineExceeded):
			// The poll: re-read below. Waiting only reads, so a
			// connection whose server went away without a word (a
			// restart behind a partition) would look quiet forever:
			// every pingEvery polls it is asked to answer.
			if idle++; idle%pingEvery == 0 {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if err := conn.Ping(pctx); err != nil && ctx.Err() == nil {
					_ = conn.Close(context.Background())
					conn = nil
				}
				cancel()
			}
		default:
			// The connection is lost (the server restarted, a network
			// cut): reconnect, and read what was missed meanwhile.
			_ = conn.Close(context.Background())
			conn = nil
		}
		if err := f.catchUp(ctx); err != nil && ctx.Err() == nil {
			s.followErr(err)
		}
	}
	return nil
}

// listen opens a connection of its own (LISTEN needs a session; the pools
// hand connections around) and listens on EventsChannel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(cctx, s.pgcfg.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := c.Exec(cctx, "LISTEN "+EventsChannel); err != nil {
		_ = c.Close(context.Background())
		return nil, err
	}
	return c, nil
}

// followErr is where FollowCommits reports a failed read; it goes on.
func (s *Store) followErr(err error) {
	if s.onFollowErr != nil {
		s.onFollowErr(err)
	}
}

// SetFollowErrors sets where FollowCommits reports the reads it failed
// (it retries them at the next wake-up or poll); set once, before
// FollowCommits starts.
func (s *Store) SetFollowErrors(fn func(error)) { s.onFollowErr = fn }

// commitFollower is FollowCommits' cursor.
type commitFollower struct {
	s       *Store
	last    int64
	publish func(seq int64, runs []string)
}

// catchUp reads the events after last, page by page, and publishes each
// page's newest seq with its runs.
func (f *commitFollower) catchUp(ctx context.Context) error {
	// A read stuck on a cut connection must not stop the follower: it
	// gives up and the next poll tries again.
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	for {
		var rows []struct {
			Seq   int64  `db:"seq"`
			RunID string `db:"run_id"`
		}
		if err := f.s.sel(ctx, &rows, `SELECT seq, run_id FROM events WHERE seq > ? ORDER BY seq LIMIT ?`,
			f.last, followPage); err != nil {
			return fmt.Errorf("read events after %d: %w", f.last, err)
		}
		if len(rows) == 0 {
			return nil
		}
		var runs []string
		seen := map[string]bool{}
		for _, r := range rows {
			if r.RunID != "" && !seen[r.RunID] {
				seen[r.RunID] = true
				runs = append(runs, r.RunID)
			}
		}
		f.last = rows[len(rows)-1].Seq
		f.publish(f.last, runs)
		if len(rows) < followPage {
			return nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
