// Package fleet is a node's part in a fleet of loopd nodes over one
// shared PostgreSQL store (docs/fleet.md): its settings (Node), the store
// it opens with the session bounds its leases need (OpenStore), and how it
// hears of what the other nodes commit (Follow). The leases themselves
// are the scheduler's; who may use a node's API is the daemon's.
package fleet

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/storage"
)

// Node is one node of a fleet: a worker that claims and runs runs under
// leases, an API node, or both.
type Node struct {
	Store        string        // postgres://… or a key=value connection string
	Worker       bool          // claim and run runs; false: an API-only node
	WorkerID     string        // stable across restarts
	LeaseTTL     time.Duration // default 30s
	Heartbeat    time.Duration // default LeaseTTL/6
	FenceMargin  time.Duration // default 5s
	DrainTimeout time.Duration // default 5m
	// NotifyClaimTTL is how long the node's claim of a notification it
	// delivers lasts (notify.Claim.TTL; 0: the notifier's default). A
	// node that dies mid-delivery leaves the notification to another
	// node this long after its claim.
	NotifyClaimTTL time.Duration
}

// WithDefaults fills in the defaults of the zero values.
func (n Node) WithDefaults() Node {
	if n.LeaseTTL <= 0 {
		n.LeaseTTL = 30 * time.Second
	}
	if n.Heartbeat <= 0 {
		n.Heartbeat = n.LeaseTTL / 6
	}
	if n.FenceMargin <= 0 {
		n.FenceMargin = 5 * time.Second
	}
	if n.DrainTimeout <= 0 {
		n.DrainTimeout = 5 * time.Minute
	}
	return n
}

// OpenStore opens the fleet's PostgreSQL database, migrated (under the
// advisory lock, so workers starting together migrate one at a time).
func (n Node) OpenStore(ctx context.Context) (*storage.Store, error) {
	// A backend left idle inside a transaction (its worker cut off
	// mid-step) holds its run's row lock, and every claim skips a locked
	// row: a third of the TTL bounds how long a takeover waits for it.
	// Statements and lock waits are bounded by the same amount: a worker
	// that waits longer than that is better off retrying.
	bound := n.WithDefaults().LeaseTTL / 3
	return storage.OpenPostgres(ctx, n.Store, storage.Options{Session: storage.Session{
		IdleInTransaction: bound, Statement: bound, Lock: bound}})
}

// Follow wakes a node's followers (event streams, `loopctl wait`, the
// dashboard, notifications), through publish, on the events other nodes
// commit to the shared store, from seq after on, until ctx ends; poll is
// how often the event log is re-read when no notification came. The
// node's own commits reach publish directly (Store.SetNotifyRuns), as
// with SQLite; a seq published twice wakes nobody twice. On SQLite there
// are no other nodes: it returns at once.
func Follow(ctx context.Context, store *storage.Store, after int64, poll time.Duration, publish func(seq int64, runs []string), log *zap.Logger) error {
	if store.Dialect() != "postgres" {
		return nil
	}
	var last time.Time
	store.SetFollowErrors(func(err error) {
		// At most one line a minute: a database outage fails every poll.
		if time.Since(last) > time.Minute {
			last = time.Now()
			log.Warn("reading the fleet's events failed; retrying", zap.String("error", storage.Explain(err)))
		}
	})
	return store.FollowCommits(ctx, after, poll, publish)
}
