package follow

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
)

// eventSink collects what Events sends.
type eventSink struct {
	mu   sync.Mutex
	seqs []int64
	typs []events.Type
	got  chan struct{} // a value per event
}

func newEventSink() *eventSink { return &eventSink{got: make(chan struct{}, 10_000)} }

func (s *eventSink) send(e storage.Event) error {
	s.mu.Lock()
	s.seqs, s.typs = append(s.seqs, e.Seq), append(s.typs, e.Type)
	s.mu.Unlock()
	s.got <- struct{}{}
	return nil
}

func (s *eventSink) types() []events.Type {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]events.Type(nil), s.typs...)
}

// wait waits for the next event sent.
func (s *eventSink) wait(t *testing.T) {
	t.Helper()
	select {
	case <-s.got:
	case <-time.After(10 * time.Second):
		t.Fatalf("no event came; so far %v", s.types())
	}
}

// busWorld is a world whose commits wake a bus, as the daemon's do.
func busWorld(t *testing.T) (*world, *events.Bus) {
	w := newWorld(t)
	seq, err := w.store.LastEventSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bus := events.NewBus(seq)
	w.store.SetNotifyRuns(bus.PublishRuns)
	return w, bus
}

// The stored events are sent in order, each once, across pages; after
// skips what the client has.
func TestEventsReplaysStoredEventsPageByPage(t *testing.T) {
	w, bus := busWorld(t)
	n := eventPage + 20
	w.write(func(tx *storage.Tx) error {
		for i := range n {
			if _, err := tx.Event("r1", nil, events.RunResumed, map[string]any{"i": i}); err != nil {
				return err
			}
		}
		return nil
	})
	sink := newEventSink()
	var out buffer
	Events(t.Context(), w.store, bus, "r1", 0, false, &out, sink.send)
	if len(sink.seqs) != n+1 || sink.typs[0] != events.RunCreated {
		t.Fatalf("%d events, first %v; want RUN_CREATED and %d more", len(sink.seqs), sink.typs[:1], n)
	}
	for i := 1; i < len(sink.seqs); i++ {
		if sink.seqs[i] <= sink.seqs[i-1] {
			t.Fatalf("seq %d after %d", sink.seqs[i], sink.seqs[i-1])
		}
	}
	if out.flushes != 2 {
		t.Errorf("%d flushes, want one per page (2)", out.flushes)
	}
	after := sink.seqs[n-5]
	rest := newEventSink()
	Events(t.Context(), w.store, bus, "r1", after, false, &buffer{}, rest.send)
	if len(rest.seqs) != 5 || rest.seqs[0] != sink.seqs[n-4] {
		t.Errorf("after %d: %v", after, rest.seqs)
	}
}

// A followed stream sends each new event as it commits and ends with the
// run's terminal event.
func TestEventsFollowsUntilTheRunEnds(t *testing.T) {
	w, bus := busWorld(t)
	sink := newEventSink()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Events(t.Context(), w.store, bus, "r1", 0, true, &buffer{}, sink.send)
	}()
	sink.wait(t) // RUN_CREATED, replayed
	w.step(1, api.PhaseImplementation, "", false)
	sink.wait(t)
	sink.wait(t) // the step's start and finish, live
	w.end()
	sink.wait(t)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the followed stream did not end with the run")
	}
	want := []events.Type{events.RunCreated, events.StepStarted, events.StepFinished, events.RunInterrupted}
	if got := sink.types(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// A followed stream ends when the daemon shuts down (the bus closes) or
// the client stops taking events.
func TestEventsFollowEndsWithTheBusOrTheClient(t *testing.T) {
	w, bus := busWorld(t)
	done := make(chan struct{})
	sink := newEventSink()
	go func() {
		defer close(done)
		Events(t.Context(), w.store, bus, "r1", 0, true, &buffer{}, sink.send)
	}()
	sink.wait(t)
	bus.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end when the bus closed")
	}

	w2, bus2 := busWorld(t)
	gone := errors.New("client gone")
	calls := 0
	Events(t.Context(), w2.store, bus2, "r1", 0, true, &buffer{}, func(storage.Event) error { calls++; return gone })
	if calls != 1 {
		t.Errorf("send called %d times after it failed, want 1", calls)
	}
}

// Until checks again after each commit of the run, and gives up when the
// client goes away or the daemon shuts down; done's error ends it.
func TestUntil(t *testing.T) {
	w, bus := busWorld(t)
	ended := func() (bool, error) {
		run, err := w.store.Run(t.Context(), "r1")
		return err == nil && run.Status.Terminal(), err
	}
	result := make(chan bool, 1)
	go func() {
		ok, err := Until(t.Context(), bus, "r1", ended)
		if err != nil {
			t.Error(err)
		}
		result <- ok
	}()
	w.end()
	select {
	case ok := <-result:
		if !ok {
			t.Error("Until did not see the run end")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Until missed the commit that ended the run")
	}

	never := func() (bool, error) { return false, nil }
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if ok, err := Until(ctx, bus, "r1", never); ok || err != nil {
		t.Errorf("Until past its deadline = %v, %v", ok, err)
	}
	boom := errors.New("boom")
	if _, err := Until(t.Context(), bus, "r1", func() (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("Until with a failing check = %v", err)
	}
	bus.Close() // closing while a follower waits: TestEventsFollowEndsWithTheBusOrTheClient
	if ok, err := Until(t.Context(), bus, "r1", never); ok || err != nil {
		t.Errorf("Until when the bus closed = %v, %v", ok, err)
	}
}
