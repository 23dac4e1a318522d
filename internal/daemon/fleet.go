package daemon

import (
	"context"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/notify"
	"github.com/loopd/loopd/internal/scheduler"
	"github.com/loopd/loopd/internal/storage"
)

// Fleet makes the daemon part of a fleet over a shared PostgreSQL store
// (docs/fleet.md): a worker that claims and runs runs under leases, an API
// node, or both. Nil (the default) is the embedded daemon on SQLite.
type Fleet struct {
	Store        string        // postgres://… or a key=value connection string
	Worker       bool          // claim and run runs; false: an API-only node
	WorkerID     string        // stable across restarts
	LeaseTTL     time.Duration // default 30s
	Heartbeat    time.Duration // default LeaseTTL/6
	FenceMargin  time.Duration // default 5s
	DrainTimeout time.Duration // default 5m
}

// withDefaults fills in the defaults of the zero values.
func (f Fleet) withDefaults() Fleet {
	if f.LeaseTTL <= 0 {
		f.LeaseTTL = 30 * time.Second
	}
	if f.Heartbeat <= 0 {
		f.Heartbeat = f.LeaseTTL / 6
	}
	if f.FenceMargin <= 0 {
		f.FenceMargin = 5 * time.Second
	}
	if f.DrainTimeout <= 0 {
		f.DrainTimeout = 5 * time.Minute
	}
	return f
}

// openStore opens the daemon's store: LOOPD_HOME's SQLite database, or
// the fleet's PostgreSQL database, migrated (under the advisory lock, so
// workers starting together migrate one at a time).
func (d *Daemon) openStore(ctx context.Context) (*storage.Store, error) {
	if d.opts.Fleet == nil {
		return storage.Open(ctx, filepath.Join(d.opts.Home, "loopd.db"), storage.Options{})
	}
	f := d.opts.Fleet.withDefaults()
	// A backend left idle inside a transaction (its worker cut off
	// mid-step) holds its run's row lock, and every claim skips a locked
	// row: a third of the TTL bounds how long a takeover waits for it.
	// Statements and lock waits are bounded by the same amount: a worker
	// that waits longer than that is better off retrying.
	bound := f.LeaseTTL / 3
	return storage.OpenPostgres(ctx, f.Store, storage.Options{Session: storage.Session{
		IdleInTransaction: bound, Statement: bound, Lock: bound}})
}

// schedulerFleet is the scheduler's lease settings: nil unless the daemon
// is a fleet worker.
func (d *Daemon) schedulerFleet() *scheduler.Fleet {
	if d.opts.Fleet == nil || !d.opts.Fleet.Worker {
		return nil
	}
	f := d.opts.Fleet.withDefaults()
	return &scheduler.Fleet{WorkerID: f.WorkerID, TTL: f.LeaseTTL, Heartbeat: f.Heartbeat, FenceMargin: f.FenceMargin,
		DeadlineFile: scheduler.DeadlineFile(d.opts.Home)}
}

// notifyClaim is how the notifier claims what it delivers: nil for the
// embedded daemon; for every node of a fleet (worker or API node, which
// all enqueue and all deliver) a claim under the node's id.
func (d *Daemon) notifyClaim() *notify.Claim {
	if d.opts.Fleet == nil {
		return nil
	}
	return &notify.Claim{Owner: d.opts.Fleet.WorkerID}
}

// runsSteps reports whether this daemon claims and runs runs: the
// embedded daemon and a fleet worker do, an API-only node does not.
func (d *Daemon) runsSteps() bool { return d.opts.Fleet == nil || d.opts.Fleet.Worker }

// drain is a fleet worker's shutdown: the running steps finish (at most
// the drain timeout) and the leases are released for other workers.
func (d *Daemon) drain() {
	if d.opts.Fleet == nil || !d.opts.Fleet.Worker {
		return
	}
	f := d.opts.Fleet.withDefaults()
	d.log.Info("draining", zap.Duration("drain_timeout", f.DrainTimeout))
	d.sched.Drain(context.Background(), f.DrainTimeout)
}

// fleetInfo adds the fleet's part of `loopctl daemon status --json`.
func (d *Daemon) fleetInfo(info *api.DaemonInfo) {
	if d.opts.Fleet == nil {
		return
	}
	info.Store = storage.RedactStore(d.opts.Fleet.Store)
	info.Worker = d.sched.WorkerID()
	info.Leases = d.sched.Leases()
	if info.Leases == nil && info.Worker != "" {
		info.Leases = []string{}
	}
}
