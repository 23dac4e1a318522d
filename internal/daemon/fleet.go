package daemon

import (
	"context"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/notify"
	"github.com/loopd/loopd/internal/scheduler"
	"github.com/loopd/loopd/internal/storage"
)

// openStore opens the daemon's store: LOOPD_HOME's SQLite database, or
// the fleet's PostgreSQL database.
func (d *Daemon) openStore(ctx context.Context) (*storage.Store, error) {
	if d.opts.Fleet == nil {
		return storage.Open(ctx, filepath.Join(d.opts.Home, "loopd.db"), storage.Options{})
	}
	return d.opts.Fleet.OpenStore(ctx)
}

// schedulerFleet is the scheduler's lease settings: nil unless the daemon
// is a fleet worker.
func (d *Daemon) schedulerFleet() *scheduler.Fleet {
	if d.opts.Fleet == nil || !d.opts.Fleet.Worker {
		return nil
	}
	f := d.opts.Fleet.WithDefaults()
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
	return &notify.Claim{Owner: d.opts.Fleet.WorkerID, TTL: d.opts.Fleet.NotifyClaimTTL}
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
	f := d.opts.Fleet.WithDefaults()
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
