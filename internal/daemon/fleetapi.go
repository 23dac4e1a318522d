package daemon

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/storage"
)

// followFleet wakes this node's followers (event streams, `loopctl wait`,
// the dashboard, notifications) on the events other nodes commit to the
// shared PostgreSQL store, from seq after on, until ctx ends. This node's
// own commits reach the bus directly (Store.SetNotifyRuns), as with
// SQLite; a seq published twice wakes nobody twice.
func (d *Daemon) followFleet(ctx context.Context, after int64) error {
	if d.store.Dialect() != "postgres" {
		return nil
	}
	errLog := d.log.Named("follow")
	var last time.Time
	d.store.SetFollowErrors(func(err error) {
		// At most one line a minute: a database outage fails every poll.
		if time.Since(last) > time.Minute {
			last = time.Now()
			errLog.Warn("reading the fleet's events failed; retrying", zap.String("error", storage.Explain(err)))
		}
	})
	return d.store.FollowCommits(ctx, after, d.opts.FollowPoll, d.bus.PublishRuns)
}
