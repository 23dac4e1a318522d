package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// errWatchQuit means the user left the view with q or Ctrl+C.
var errWatchQuit = errors.New("watch: quit")

// watchTick is how often the view refreshes the run and redraws, so the
// elapsed times move on between events.
const watchTick = time.Second

// Messages from the feeds to the TUI's loop.
type (
	msgEvent struct{ ev api.Event }
	msgRun   struct {
		run api.Run
		at  time.Time // when it was requested
	}
	msgOutput struct {
		gen  int
		text string
	}
	msgOutputEnd struct {
		gen int
		at  time.Time
	}
	msgNote struct{ note string }
	msgEnd  struct {
		run api.Run
		err error
	}
)

// tailRequest asks the output feeder to follow step seq as generation gen.
type tailRequest struct{ seq, gen int }

// tui is the full-screen view. Its loop owns the model; feeds run in
// goroutines that the loop starts and waits for, and talk to it only
// through msgs, so the model needs no lock.
type tui struct {
	screen   liveScreen
	client   watchClient
	follower *runFollower
	ref      api.RunRef
	model    *watchModel
	now      func() time.Time
	msgs     chan any
	raw      bool // show the step's output as written, not as a transcript
}

// watchTUI runs the live view on screen until the run ends (its final
// state is returned), the user quits (errWatchQuit) or ctx ends. The
// caller owns the screen: it opened it and closes it.
func watchTUI(ctx context.Context, screen liveScreen, c watchClient, ref api.RunRef, run api.Run) (api.Run, error) {
	return watchTUIOutput(ctx, screen, c, ref, run, false)
}

// watchTUIOutput is watchTUI showing the step's output as written when raw,
// else as a readable transcript of the agent's messages and tool calls.
func watchTUIOutput(ctx context.Context, screen liveScreen, c watchClient, ref api.RunRef, run api.Run, raw bool) (api.Run, error) {
	t := &tui{screen: screen, client: c, follower: newRunFollower(c, ref), ref: ref,
		model: newWatchModel(run, time.Now()), now: time.Now, msgs: make(chan any, 256), raw: raw}
	return t.run(ctx)
}

func (t *tui) run(ctx context.Context) (api.Run, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		// Stop every feed and wait for it: nothing outlives the view.
		cancel()
		wg.Wait()
	}()
	kick := make(chan struct{}, 1)
	wg.Go(func() { t.refresh(ctx, kick) })
	tails := make(chan tailRequest, 1)
	wg.Go(func() { t.feedOutput(ctx, tails) })
	wg.Go(func() {
		run, err := t.follower.follow(ctx,
			func(ev api.Event) { t.send(ctx, msgEvent{ev}) },
			func(err error) { t.send(ctx, msgNote{"daemon unreachable, retrying: " + err.Error()}) })
		t.send(ctx, msgEnd{run, err})
	})

	tick := time.NewTicker(watchTick)
	defer tick.Stop()
	t.followStep(tails)
	t.draw(false)
	for {
		full := false
		select {
		case <-ctx.Done():
			return api.Run{}, ctx.Err()
		case ev := <-t.screen.Events():
			if ev == screenQuit {
				return api.Run{}, errWatchQuit
			}
			full = true
		case <-tick.C:
			poke(kick)
		case msg := <-t.msgs:
			// Take what is already queued before drawing: a replay of a long
			// history then costs a few redraws, not one per event. The batch
			// is bounded so that keys are still read under a flood of output.
			refresh := false
			for n := 0; msg != nil; n++ {
				if end, ok := msg.(msgEnd); ok {
					return end.run, end.err
				}
				refresh = t.apply(msg) || refresh
				msg = nil
				if n < maxBatch {
					select {
					case msg = <-t.msgs:
					default:
					}
				}
			}
			if refresh {
				poke(kick)
			}
		}
		t.followStep(tails)
		t.draw(full)
	}
}

// maxBatch bounds how many messages the loop applies between two redraws.
const maxBatch = 1000

// followStep (re)starts the output feed when the model wants it.
func (t *tui) followStep(tails chan tailRequest) {
	if t.model.wantTail() {
		req := tailRequest{seq: t.model.step.Seq}
		req.gen = t.model.startTail(req.seq)
		replace(tails, req)
	}
}

// apply hands a message to the model; it reports whether the run should
// be refreshed.
func (t *tui) apply(msg any) bool {
	switch m := msg.(type) {
	case msgEvent:
		t.model.applyEvent(m.ev)
		return true
	case msgRun:
		t.model.setRun(m.run, m.at)
	case msgOutput:
		t.model.appendOutput(m.gen, m.text)
	case msgOutputEnd:
		t.model.outputEnded(m.gen, m.at)
	case msgNote:
		t.model.note = m.note
	}
	return false
}

// send queues a message for the loop, unless the view is closing.
func (t *tui) send(ctx context.Context, msg any) bool {
	select {
	case t.msgs <- msg:
		return true
	case <-ctx.Done():
		return false
	}
}

// refresh fetches the run whenever it is kicked. One request at a time,
// and kicks that come meanwhile fold into one.
func (t *tui) refresh(ctx context.Context, kick <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		at := t.now()
		run, err := t.client.GetRun(ctx, t.ref, false)
		if err != nil {
			continue // the event follower reports an unreachable daemon
		}
		if !t.send(ctx, msgRun{run, at}) {
			return
		}
	}
}

// feedOutput follows the output of the step last asked for, stopping the
// previous feed first.
func (t *tui) feedOutput(ctx context.Context, reqs <-chan tailRequest) {
	var wg sync.WaitGroup
	stop := func() {}
	defer func() { stop(); wg.Wait() }()
	for {
		var req tailRequest
		select {
		case <-ctx.Done():
			return
		case req = <-reqs:
		}
		stop()
		wg.Wait()
		fctx, cancel := context.WithCancel(ctx)
		stop = cancel
		wg.Go(func() {
			_ = followOutput(fctx, t.client, t.ref, req.seq, t.raw, func(text string) bool {
				return t.send(fctx, msgOutput{req.gen, text})
			})
			// Errors are not shown: the event follower reports an
			// unreachable daemon, and the feed restarts when needed.
			t.send(fctx, msgOutputEnd{req.gen, t.now()})
		})
	}
}

// draw renders the model on the screen.
func (t *tui) draw(full bool) {
	w, h := t.screen.Size()
	t.screen.Draw(t.model.view(t.now(), w, h), full)
}

// poke wakes a goroutine waiting on ch, without blocking: a wake-up
// already pending covers this one.
func poke(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// replace puts v in ch (capacity 1), dropping a value not yet taken: only
// the latest request matters.
func replace[T any](ch chan T, v T) {
	select {
	case <-ch:
	default:
	}
	ch <- v
}
