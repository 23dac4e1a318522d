package main

import (
	"context"
	"errors"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// outageLimit is how long a follower (wait, events --follow) waits for
// an unreachable daemon before it gives up with exit 69: long enough for
// a restart (an upgrade, a crash and relaunch by systemd), short enough
// that a daemon that is gone for good is said so.
const outageLimit = time.Minute

// reachRun connects to the daemon and reads the run named by arg, riding
// out a daemon that is down or shutting down at this first request just
// as the follower rides out a restart later on: retried every second for
// up to limit, then the last error (exit 69). A daemon loopctl may start
// is started, as by every command (LOOPCTL_NO_AUTOSTART=1: only waited
// for); an answer such as "no such run" is final at once, and so is a
// daemon that loopctl started and that exited.
func (g *globalOptions) reachRun(ctx context.Context, arg string, limit time.Duration) (*api.Client, api.Run, error) {
	ref, err := g.ref(arg)
	if err != nil {
		return nil, api.Run{}, err
	}
	var failingSince time.Time
	for {
		c, err := g.client(ctx)
		if err == nil {
			var run api.Run
			if run, err = c.GetRun(ctx, ref, false); err == nil {
				return c, run, nil
			}
		}
		if !rideable(err) || ctx.Err() != nil {
			return nil, api.Run{}, err
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		} else if time.Since(failingSince) > limit {
			return nil, api.Run{}, err
		}
		select {
		case <-ctx.Done():
			return nil, api.Run{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// rideable reports whether a failed first request may be retried: the
// daemon is away or going away (retryable), and not for a reason that
// waiting cannot change (a socket of another user's, a daemon loopctl
// started that exited).
func rideable(err error) bool {
	var ee *exitError
	var se *autostartError
	return retryable(err) && !errors.As(err, &ee) && !errors.As(err, &se)
}

// autostartError is a daemon loopctl started that could not come up:
// its reason (from the daemon's log) is final, not an outage.
type autostartError struct{ err error }

func (e *autostartError) Error() string { return e.err.Error() }
func (e *autostartError) Unwrap() error { return e.err }
