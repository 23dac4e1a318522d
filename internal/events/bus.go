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
type Bus struct {
	mu     sync.Mutex
	seq    int64
	wake   chan struct{} // closed and replaced on every Publish
	closed bool
}

// NewBus returns a Bus whose log starts at seq.
func NewBus(seq int64) *Bus {
	return &Bus{seq: seq, wake: make(chan struct{})}
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
	}
}

// ErrClosed is returned by Wait after Close.
var ErrClosed = errors.New("event bus closed: daemon shutting down")
