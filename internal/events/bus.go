package events

import (
	"context"
	"errors"
	"sync"
)

// Bus broadcasts the newest committed event seq to any number of waiters.
//
// It is a condition variable with a context: Publish never blocks and holds
// nothing per waiter, so a follower that stops reading cannot slow the
// daemon or make it hold memory.
//
// Waiters interested in one run (a follower of its events, a `loopctl
// wait`) Watch that run instead, and are woken only by commits that wrote
// one of its events: with many runs, a commit does not wake every
// follower of every other run.
type Bus struct {
	mu     sync.Mutex
	seq    int64
	wake   chan struct{} // closed and replaced on every Publish
	closed bool
	runs   map[string]*runWake // per-run wake-ups, only while watched
}

// runWake is a run's wake-up channel and how many watch it.
type runWake struct {
	ch       chan struct{}
	watchers int
}

// NewBus returns a Bus whose log starts at seq.
func NewBus(seq int64) *Bus {
	return &Bus{seq: seq, wake: make(chan struct{}), runs: map[string]*runWake{}}
}

// PublishRuns is Publish for a commit that wrote events of runs: it also
// wakes the watchers of those runs.
func (b *Bus) PublishRuns(seq int64, runs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if seq > b.seq {
		b.seq = seq
		close(b.wake)
		b.wake = make(chan struct{})
	}
	for _, id := range runs {
		if w, ok := b.runs[id]; ok {
			close(w.ch)
			delete(b.runs, id) // the next Watch starts a new one
		}
	}
}

// Watch registers interest in a run's next commit. It returns a channel
// closed by the next commit that writes an event of the run (or when the
// bus closes), and a release function to call once done waiting on it.
// Register before reading the run's state, then wait: a commit in
// between is not missed.
func (b *Bus) Watch(runID string) (<-chan struct{}, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.wake, func() {} // closed: never blocks
	}
	w, ok := b.runs[runID]
	if !ok {
		w = &runWake{ch: make(chan struct{})}
		b.runs[runID] = w
	}
	w.watchers++
	return w.ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		w.watchers--
		if cur, ok := b.runs[runID]; ok && cur == w && w.watchers == 0 {
			delete(b.runs, runID) // nobody waits: hold nothing for the run
		}
	}
}

// Closed reports whether the bus was closed (the daemon is stopping).
func (b *Bus) Closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Publish records that the event log now reaches seq and wakes every waiter.
// Publishing an older seq than already seen is a no-op.
func (b *Bus) Publish(seq int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if seq <= b.seq || b.closed {
		return
	}
	b.seq = seq
	close(b.wake)
	b.wake = make(chan struct{})
}

// Seq returns the newest published seq.
func (b *Bus) Seq() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// Wait blocks until the log reaches beyond after, the bus is closed, or ctx
// is done. It returns the newest seq, and ctx's error or ErrClosed.
func (b *Bus) Wait(ctx context.Context, after int64) (int64, error) {
	for {
		b.mu.Lock()
		seq, wake, closed := b.seq, b.wake, b.closed
		b.mu.Unlock()
		if seq > after {
			return seq, nil
		}
		if closed {
			return seq, ErrClosed
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return seq, ctx.Err()
		}
	}
}

// Close wakes every waiter for good; used when the daemon shuts down so
// that streams end promptly.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.wake)
		for id, w := range b.runs {
			close(w.ch)
			delete(b.runs, id)
		}
	}
}

// ErrClosed is returned by Wait after Close.
var ErrClosed = errors.New("event bus closed: daemon shutting down")
