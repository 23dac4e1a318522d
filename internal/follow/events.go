package follow

import (
	"context"

	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
)

// eventPage bounds how many events a follower reads per query, so a
// follower far behind costs a bounded amount of memory.
const eventPage = 500

// Events sends a run's events to send, in order: every stored event after
// the seq after, then (with follow) each new one as soon as it commits,
// until the run's terminal event has been sent, ctx ends, the bus closes
// (the daemon shuts down) or send fails. Each follower re-reads the
// database after its last seq on every wake-up, so no event is missed or
// sent twice across the replay/live boundary. out's Stall comes before a
// page of events is sent, its Flush after.
func Events(ctx context.Context, store *storage.Store, bus *events.Bus, runID string, after int64, follow bool,
	out Output, send func(storage.Event) error) {
	_, _ = Until(ctx, bus, runID, func() (bool, error) {
		done, next := eventsPage(ctx, store, runID, after, follow, out, send)
		after = next
		return done, nil
	})
}

// eventsPage sends a run's events after `after`, up to the end of what is
// stored (page by page), and returns the last seq sent and whether the
// stream is done.
func eventsPage(ctx context.Context, store *storage.Store, runID string, after int64, follow bool,
	out Output, send func(storage.Event) error) (bool, int64) {
	for {
		// The run's status is read before its events: a status committed
		// as terminal has its terminal event in the same commit, so the
		// query below is sure to include it.
		cur, err := store.Run(ctx, runID)
		if err != nil {
			return true, after
		}
		// A followed stream ends with the run's (last) terminal event,
		// never sometimes with the events that follow it.
		var end int64
		if follow && cur.Status.Terminal() {
			if end, err = store.LastTerminalEvent(ctx, runID); err != nil {
				return true, after
			}
		}
		evs, err := store.Events(ctx, runID, after, eventPage)
		if err != nil {
			return true, after
		}
		if len(evs) > 0 {
			out.Stall()
		}
		for _, e := range evs {
			if end > 0 && e.Seq > end {
				break
			}
			if err := send(e); err != nil {
				return true, after // the follower went away
			}
			after = e.Seq
		}
		if len(evs) > 0 {
			out.Flush()
		}
		if end > 0 && after >= end {
			return true, after
		}
		if len(evs) == eventPage {
			continue
		}
		return !follow || cur.Status.Terminal(), after
	}
}

// Until waits until done reports true, re-checking it after every commit
// of the run (registered before each check, so none is missed), and
// reports whether it did; false when ctx ends or the bus closes (the
// daemon shuts down) first. An error from done ends the wait with it.
func Until(ctx context.Context, bus *events.Bus, runID string, done func() (bool, error)) (bool, error) {
	for {
		wake, release := bus.Watch(runID)
		ok, err := done()
		if err != nil || ok {
			release()
			return ok, err
		}
		var woken bool
		select {
		case <-wake:
			woken = true
		case <-ctx.Done():
		}
		release()
		if !woken || bus.Closed() {
			return false, nil
		}
	}
}
