package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// Leases are how a fleet of workers over one PostgreSQL database keeps
// runs apart (docs/fleet.md). A worker claims runs, not steps: a claim
// sets lease_owner, lease_epoch + 1 and lease_expires_at (database clock);
// a heartbeat renews the worker's leases in one statement; every write a
// runner makes is fenced by its run's owner and epoch (WithFence), so a
// worker whose run was taken over can write nothing more to it. The
// embedded SQLite store never takes a lease: none of this is called there.

// ErrFenced is returned by a fenced write whose run is no longer leased
// to the writer under the same epoch: another worker took the run over.
// Nothing of the transaction was written.
var ErrFenced = errors.New("the run's lease was taken over by another worker")

// ErrNotFleet is returned by the lease methods of an embedded (SQLite)
// store.
var ErrNotFleet = errors.New("leases need the PostgreSQL store (loopd --store postgres://…)")

// Lease is one claim of a run by a worker.
type Lease struct {
	RunID string
	Owner string
	Epoch int64
}

// Claim is a run a worker has just leased, with what it was before.
type Claim struct {
	RunID string `db:"id"`
	Epoch int64  `db:"lease_epoch"`
	// From is the run's status before the claim: PENDING, WAITING, or
	// RUNNING for a takeover of an expired (or released) lease.
	From       api.RunStatus `db:"prev_status"`
	FromReason string        `db:"prev_reason"`
	// FromWorker is the lease's previous owner ("" for none).
	FromWorker string `db:"prev_owner"`
}

type fenceKey struct{}

// WithFence makes every Store.Write with ctx (or a context derived from
// it) begin with the fenced update of l's run: the transaction goes on
// only while the run is still leased to l.Owner under l.Epoch, and holds
// the run's row lock to its commit, so a takeover waits for it or it
// fails with ErrFenced. On an embedded store the fence is ignored.
func WithFence(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, fenceKey{}, l)
}

// dbNowMS is the database's clock in Unix milliseconds: lease times are
// never a worker's clock, which may be off by more than a lease.
const dbNowMS = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT`

// qFence is the first statement of every fenced transaction. It changes
// nothing but takes the run's row lock, and names the lease the
// transaction writes under (announceLease).
const qFence = `UPDATE runs SET lease_epoch = lease_epoch WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3
	RETURNING ` + announceLease

// FencedSetting is the transaction-local PostgreSQL setting in which a
// fenced transaction names the leases it writes under, " run@epoch" each:
// an audit trigger (the fleet chaos test's, or an operator's) compares it
// with the run's lease_epoch at each write, which tells a write under the
// current epoch from one by the same worker under an older epoch — the
// owner alone cannot. Set by the fenced statement itself, so it costs no
// round trip; it ends with the transaction.
const FencedSetting = "loopd.fenced"

// announceLease appends the lease of the runs row at hand (alias-free:
// id and lease_epoch) to FencedSetting.
const announceLease = `set_config('` + FencedSetting + `', COALESCE(current_setting('` + FencedSetting +
	`', true), '') || ' ' || id || '@' || lease_epoch, true)`

// fence runs the fenced update of ctx's lease, if any, in tx.
func (s *Store) fence(ctx context.Context, tx *Tx) error {
	l, ok := ctx.Value(fenceKey{}).(Lease)
	if !ok {
		return nil
	}
	res, err := tx.tx.ExecContext(ctx, qFence, l.RunID, l.Owner, l.Epoch)
	if err != nil {
		return fmt.Errorf("fence run %s: %w", l.RunID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("run %s (epoch %d, worker %s): %w", l.RunID, l.Epoch, l.Owner, ErrFenced)
	}
	return nil
}

// ClaimRuns leases up to limit runs to owner for ttl, oldest first, in one
// FOR UPDATE SKIP LOCKED statement: PENDING runs, WAITING runs whose wait
// is over (not those waiting for an answer), and RUNNING runs whose lease
// expired or was released (a takeover), except those in held: the runs
// the claiming worker executes itself, whose lease it renews (after an
// outage that outlasted the lease, claiming its own run again would leave
// its runner fenced out by its own new epoch). Each becomes RUNNING with
// epoch + 1. The caller adds the events in the same transaction.
func (t *Tx) ClaimRuns(owner string, ttl time.Duration, limit int, held []string) ([]Claim, error) {
	if !t.pg {
		return nil, ErrNotFleet
	}
	if limit <= 0 {
		return nil, nil
	}
	if held == nil {
		held = []string{} // NULL would exclude every run: id = ANY(NULL) is not false
	}
	var claims []Claim
	err := t.tx.SelectContext(t.ctx, &claims, `WITH now AS (SELECT `+dbNowMS+` AS ms),
	c AS (
		SELECT id, status, reason, lease_owner FROM runs, now
		WHERE status = 'PENDING'
		   OR (status = 'WAITING' AND COALESCE(wait_until, 0) <= now.ms AND reason <> '`+ReasonNeedsAnswer+`')
		   OR (status = 'RUNNING' AND (lease_expires_at IS NULL OR lease_expires_at <= now.ms) AND NOT (id = ANY($5::text[])))
		ORDER BY created_at, rowid
		LIMIT $1
		FOR UPDATE OF runs SKIP LOCKED)
	UPDATE runs r SET status = 'RUNNING', reason = '', description = '', condition = '', exit_code = NULL,
		ended_at = NULL, wait_until = NULL, postmortem_at = NULL, postmortem_owner = '', updated_at = $2,
		started_at = COALESCE(r.started_at, $2),
		lease_owner = $3, lease_epoch = r.lease_epoch + 1, lease_expires_at = now.ms + $4
	FROM c, now WHERE r.id = c.id
	RETURNING r.id, r.lease_epoch, c.status AS prev_status, c.reason AS prev_reason, c.lease_owner AS prev_owner`,
		limit, t.now, owner, ttl.Milliseconds(), held)
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	return claims, nil
}

// OwnLeases lists the RUNNING runs leased to owner whose lease has not
// expired: what a restarted worker adopts as its own.
func (s *Store) OwnLeases(ctx context.Context, owner string) ([]Lease, error) {
	if !s.pg {
		return nil, ErrNotFleet
	}
	var rows []struct {
		ID    string `db:"id"`
		Epoch int64  `db:"lease_epoch"`
	}
	err := s.lease.SelectContext(ctx, &rows, `SELECT id, lease_epoch FROM runs
		WHERE status = 'RUNNING' AND lease_owner = $1 AND lease_expires_at > `+dbNowMS+`
		ORDER BY created_at, rowid`, owner)
	if err != nil {
		return nil, fmt.Errorf("read own leases: %w", err)
	}
	out := make([]Lease, len(rows))
	for i, r := range rows {
		out[i] = Lease{RunID: r.ID, Owner: owner, Epoch: r.Epoch}
	}
	return out, nil
}

// Renewal is one lease a heartbeat renewed, with the user's stop request
// on its run as the renewal read it.
type Renewal struct {
	RunID string `db:"id"`
	// StopRequest is "", "graceful" or "now" (runs.stop_request). A stop
	// is recorded on the run's row by whichever node the user reached:
	// through another node, the renewal is how the worker running the run
	// learns of a stop --now while a step runs.
	StopRequest string `db:"stop_request"`
}

// RenewLeases extends the leases of owner's runs in one statement, on a
// connection of its own (a runner's write never delays a renewal), and
// returns the runs it renewed with their stop requests: a run missing
// from the answer is no longer owner's under that epoch (taken over, or
// ended), and its agent must stop now.
func (s *Store) RenewLeases(ctx context.Context, owner string, ttl time.Duration, leases []Lease) ([]Renewal, error) {
	if !s.pg {
		return nil, ErrNotFleet
	}
	if len(leases) == 0 {
		// Still a round trip: the heartbeat is also how a worker knows it
		// can reach the database at all.
		return nil, s.lease.PingContext(ctx)
	}
	ids := make([]string, len(leases))
	epochs := make([]int64, len(leases))
	for i, l := range leases {
		ids[i], epochs[i] = l.RunID, l.Epoch
	}
	var renewed []Renewal
	err := s.lease.SelectContext(ctx, &renewed, `UPDATE runs r SET lease_expires_at = `+dbNowMS+` + $2
		FROM unnest($3::text[], $4::bigint[]) AS l(id, epoch)
		WHERE r.id = l.id AND r.lease_epoch = l.epoch AND r.lease_owner = $1 AND r.status = 'RUNNING'
		RETURNING r.id, r.stop_request`, owner, ttl.Milliseconds(), ids, epochs)
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	return renewed, nil
}

// UsageCheckpoint is a running step's usage so far (what a fleet
// worker's heartbeat parsed from its transcript) and the epoch of the
// lease its worker runs the step's run under.
type UsageCheckpoint struct {
	Step  Step
	Epoch int64
}

// CheckpointUsage records the token usage of owner's RUNNING steps so far,
// on the lease connection, in one transaction, each step's write fenced by
// its run's lease in the same statement: written only while the run is
// still leased to owner under the checkpoint's epoch (the run's row
// locked FOR KEY SHARE, so a takeover's claim cannot slip in between the
// check and the write; the runner's own fenced updates do not wait for
// it). A step that has ended meanwhile, or was INTERRUPTED by a takeover,
// is left alone: its row has its final usage, or another worker's account
// of it.
//
// It returns the ids of the runs whose lease was refused: taken over (or
// ended and claimed again) since the worker's last renewal. Their agents
// must stop, as after any fenced write that found its lease gone. A
// worker that lost a run — frozen, cut off — could otherwise write its
// stale account of a step into the step row while the new owner has not
// yet marked it INTERRUPTED.
func (s *Store) CheckpointUsage(ctx context.Context, owner string, cps []UsageCheckpoint) (refused []string, err error) {
	if !s.pg {
		return nil, ErrNotFleet
	}
	if len(cps) == 0 {
		return nil, nil
	}
	tx, err := s.lease.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("checkpoint usage: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit it does nothing
	for _, cp := range cps {
		st := cp.Step
		var res struct {
			Held    bool   `db:"held"`
			Written bool   `db:"written"`
			RunID   string `db:"run_id"`
		}
		// f is the fence: the step's run, leased to owner under the
		// epoch, locked; only then is the step written (u), and the
		// lease it was written under named (FencedSetting) before the
		// statement's triggers run.
		if err := tx.GetContext(ctx, &res, `WITH f AS (
				SELECT r.id, set_config('`+FencedSetting+`', COALESCE(current_setting('`+FencedSetting+`', true), '')
					|| ' ' || r.id || '@' || r.lease_epoch, true) AS announced
				FROM steps s JOIN runs r ON r.id = s.run_id
				WHERE s.id = $10 AND r.lease_owner = $11 AND r.lease_epoch = $12
				FOR KEY SHARE OF r),
			u AS (
				UPDATE steps SET model = $1, input_tokens = $2, output_tokens = $3, cache_read_tokens = $4,
					cache_write_tokens = $5, reasoning_tokens = $6, usage_found = $7, reported_cost_usd = $8,
					priced_cost_usd = $9
				WHERE id = $10 AND status = 'RUNNING' AND EXISTS (SELECT 1 FROM f)
				RETURNING id)
			SELECT EXISTS (SELECT 1 FROM f) AS held, EXISTS (SELECT 1 FROM u) AS written,
				COALESCE((SELECT run_id FROM steps WHERE id = $10), '') AS run_id`,
			st.Model, st.InputTokens, st.OutputTokens, st.CacheReadTokens, st.CacheWriteTokens, st.ReasoningTokens,
			boolInt(st.UsageFound), st.ReportedCostUSD, st.PricedCostUSD, st.ID, owner, cp.Epoch); err != nil {
			return nil, fmt.Errorf("checkpoint usage of step %d: %w", st.ID, err)
		}
		if !res.Held {
			refused = append(refused, cmp.Or(res.RunID, st.RunID))
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("checkpoint usage: %w", err)
	}
	return refused, nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// ReleaseLease gives a RUNNING run up at once (a draining worker, between
// two steps): its lease expires now, so any worker's next claim takes it
// over; lease_owner stays, naming the worker it comes from.
func (s *Store) ReleaseLease(ctx context.Context, l Lease) error {
	if !s.pg {
		return ErrNotFleet
	}
	_, err := s.lease.ExecContext(ctx, `UPDATE runs SET lease_expires_at = 0
		WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3`, l.RunID, l.Owner, l.Epoch)
	if err != nil {
		return fmt.Errorf("release lease of %s: %w", l.RunID, err)
	}
	return nil
}

// LeaseHeld reports whether l is still the run's lease and has not
// expired on the database's clock: what a worker checks right before an
// action outside the database that a fenced transaction cannot undo (a
// push of the run's branch).
func (s *Store) LeaseHeld(ctx context.Context, l Lease) (bool, error) {
	if !s.pg {
		return false, ErrNotFleet
	}
	var n int
	err := s.r.GetContext(ctx, &n, `SELECT count(*) FROM runs WHERE id = $1 AND lease_owner = $2
		AND lease_epoch = $3 AND status = 'RUNNING' AND lease_expires_at > `+dbNowMS, l.RunID, l.Owner, l.Epoch)
	if err != nil {
		return false, fmt.Errorf("check the lease of %s: %w", l.RunID, err)
	}
	return n == 1, nil
}

// PostmortemClaim is a fleet worker's claim of an ended run's postmortem:
// writing its report and running its postmortem_command, once.
type PostmortemClaim struct {
	RunID string `db:"id"`
	Epoch int64  `db:"postmortem_epoch"`
	// Written says the report is written already (postmortem_at set):
	// only the postmortem_command is left, its worker lost before it ran
	// it to the end.
	Written bool `db:"written"`
}

// ClaimPostmortem claims the postmortem of ended run id for owner for
// ttl (database clock): the worker that ended a run claims it at once.
// ok is false when the report is written and its command done, the run
// is not ended, or another worker holds an unexpired claim.
func (s *Store) ClaimPostmortem(ctx context.Context, id, owner string, ttl time.Duration) (PostmortemClaim, bool, error) {
	if !s.pg {
		return PostmortemClaim{}, false, ErrNotFleet
	}
	var c []PostmortemClaim
	err := s.w.SelectContext(ctx, &c, `UPDATE runs SET postmortem_owner = $2, postmortem_epoch = postmortem_epoch + 1,
		postmortem_expires_at = `+dbNowMS+` + $3
		WHERE id = $1 AND status IN ('COMPLETED','FAILED','ABORTED','INTERRUPTED')
		AND (postmortem_at IS NULL OR postmortem_owner <> '')
		AND (postmortem_owner = '' OR postmortem_expires_at <= `+dbNowMS+`)
		RETURNING id, postmortem_epoch, postmortem_at IS NOT NULL AS written`, id, owner, ttl.Milliseconds())
	if err != nil || len(c) == 0 {
		if err != nil {
			err = fmt.Errorf("claim the postmortem of %s: %w", id, err)
		}
		return PostmortemClaim{}, false, err
	}
	return c[0], true, nil
}

// ClaimPostmortemsDue claims, for owner, up to limit postmortems that no
// worker is seeing to: of runs that ended (on any worker) more than
// grace before now (Unix ms, the claimer's clock) whose report was never
// written and nobody holds, or whose holder's claim expired — a worker
// that died after it ended a run and before its report and
// postmortem_command were done. One FOR UPDATE SKIP LOCKED statement.
func (s *Store) ClaimPostmortemsDue(ctx context.Context, owner string, ttl time.Duration, now int64, grace time.Duration, limit int) ([]PostmortemClaim, error) {
	if !s.pg {
		return nil, ErrNotFleet
	}
	var cs []PostmortemClaim
	err := s.w.SelectContext(ctx, &cs, `WITH c AS (
		SELECT id FROM runs
		WHERE status IN ('COMPLETED','FAILED','ABORTED','INTERRUPTED')
		  AND (postmortem_at IS NULL OR postmortem_owner <> '')
		  AND (postmortem_owner = '' OR postmortem_expires_at <= `+dbNowMS+`)
		  AND COALESCE(ended_at, 0) <= $1
		ORDER BY ended_at
		LIMIT $2
		FOR UPDATE SKIP LOCKED)
	UPDATE runs r SET postmortem_owner = $3, postmortem_epoch = r.postmortem_epoch + 1,
		postmortem_expires_at = `+dbNowMS+` + $4
	FROM c WHERE r.id = c.id
	RETURNING r.id, r.postmortem_epoch, r.postmortem_at IS NOT NULL AS written`,
		now-grace.Milliseconds(), limit, owner, ttl.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("claim due postmortems: %w", err)
	}
	return cs, nil
}

// ReleasePostmortem ends owner's claim c: the report is written and its
// command has run. A claim that expired and was taken by another worker
// is left alone (false).
func (s *Store) ReleasePostmortem(ctx context.Context, owner string, c PostmortemClaim) (bool, error) {
	if !s.pg {
		return false, ErrNotFleet
	}
	res, err := s.w.ExecContext(ctx, `UPDATE runs SET postmortem_owner = '', postmortem_expires_at = 0
		WHERE id = $1 AND postmortem_owner = $2 AND postmortem_epoch = $3 AND postmortem_at IS NOT NULL`, c.RunID, owner, c.Epoch)
	if err != nil {
		return false, fmt.Errorf("release the postmortem of %s: %w", c.RunID, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RunnableRuns counts the runs a worker could claim now: what an
// autoscaler (KEDA's PostgreSQL scaler) scales the fleet on.
func (s *Store) RunnableRuns(ctx context.Context) (int, error) {
	if !s.pg {
		return 0, ErrNotFleet
	}
	var n int
	err := s.lease.GetContext(ctx, &n, `SELECT count(*) FROM runs
		WHERE status = 'PENDING' OR (status = 'WAITING' AND COALESCE(wait_until, 0) <= `+dbNowMS+` AND reason <> '`+ReasonNeedsAnswer+`')
		OR (status = 'RUNNING' AND (lease_expires_at IS NULL OR lease_expires_at <= `+dbNowMS+`))`)
	return n, err
}
