package main

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"sync"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// fakeDaemon is a scripted daemon for watch: a run, its event history,
// and the output of its steps. Followed streams wait for changes, as the
// real daemon's do.
type fakeDaemon struct {
	mu         sync.Mutex
	run        api.Run
	history    []api.Event
	ended      bool          // followed event streams end after the history
	changed    chan struct{} // closed on every change, to wake followers
	cutAfter   int           // > 0: the next followed stream breaks after this many events
	runErrs    []error       // errors for the next GetRun calls
	streamErrs []error       // errors for the next Events calls
	output     map[int][]string
	outputEnd  map[int]bool // the step ended: its log stream ends after its output
	afters     []int64      // the after of every Events call
}

func newFakeDaemon(run api.Run) *fakeDaemon {
	return &fakeDaemon{run: run, changed: make(chan struct{}), output: map[int][]string{}, outputEnd: map[int]bool{}}
}

// change applies f under the lock and wakes every follower.
func (d *fakeDaemon) change(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f()
	close(d.changed)
	d.changed = make(chan struct{})
}

// add appends events; their seqs continue the history's.
func (d *fakeDaemon) add(evs ...api.Event) {
	d.change(func() {
		for _, ev := range evs {
			ev.Seq = int64(len(d.history) + 1)
			d.history = append(d.history, ev)
		}
	})
}

// end ends the run with its terminal event.
func (d *fakeDaemon) end(run api.Run, ev api.Event) {
	d.add(ev)
	d.change(func() { d.run, d.ended = run, true })
}

func (d *fakeDaemon) setRun(run api.Run) { d.change(func() { d.run = run }) }
func (d *fakeDaemon) write(seq int, chunks ...string) {
	d.change(func() { d.output[seq] = append(d.output[seq], chunks...) })
}
func (d *fakeDaemon) endOutput(seq int) { d.change(func() { d.outputEnd[seq] = true }) }

func (d *fakeDaemon) GetRun(ctx context.Context, ref api.RunRef, _ bool) (api.Run, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.runErrs) > 0 {
		err := d.runErrs[0]
		d.runErrs = d.runErrs[1:]
		return api.Run{}, err
	}
	if ref.Ref != d.run.ID {
		return api.Run{}, api.Errorf(api.CodeNotFound, "run %q: not found", ref.Ref)
	}
	return d.run, ctx.Err()
}

func (d *fakeDaemon) Events(ctx context.Context, ref api.RunRef, after int64, follow bool) iter.Seq2[api.Event, error] {
	return func(yield func(api.Event, error) bool) {
		d.mu.Lock()
		d.afters = append(d.afters, after)
		var err error
		if len(d.streamErrs) > 0 {
			err, d.streamErrs = d.streamErrs[0], d.streamErrs[1:]
		} else if ref.Ref != d.run.ID {
			err = api.Errorf(api.CodeNotFound, "run %q: not found", ref.Ref)
		}
		cut := 0
		if follow {
			cut, d.cutAfter = d.cutAfter, 0
		}
		d.mu.Unlock()
		if err != nil {
			yield(api.Event{}, err)
			return
		}
		sent := 0
		for {
			d.mu.Lock()
			evs := d.history[min(after, int64(len(d.history))):]
			ended, changed := d.ended, d.changed
			d.mu.Unlock()
			for _, ev := range evs {
				if cut > 0 && sent == cut {
					return // the daemon went away mid-stream
				}
				if !yield(ev, nil) {
					return
				}
				after, sent = ev.Seq, sent+1
			}
			if !follow || ended {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}
}

func (d *fakeDaemon) Logs(ctx context.Context, _ api.RunRef, opts api.LogsOptions) (io.ReadCloser, error) {
	return &fakeLog{ctx: ctx, d: d, seq: opts.Step}, nil
}

// fakeLog streams a step's output as the daemon's NDJSON log form.
type fakeLog struct {
	ctx  context.Context
	d    *fakeDaemon
	seq  int
	next int
	buf  []byte
}

func (l *fakeLog) Read(p []byte) (int, error) {
	for len(l.buf) == 0 {
		l.d.mu.Lock()
		chunks, done, changed := l.d.output[l.seq], l.d.outputEnd[l.seq], l.d.changed
		l.d.mu.Unlock()
		switch {
		case l.next < len(chunks):
			b, _ := json.Marshal(logChunk{Seq: l.seq, Text: chunks[l.next]})
			l.buf, l.next = append(b, '\n'), l.next+1
			continue
		case done:
			return 0, io.EOF
		}
		select {
		case <-changed:
		case <-l.ctx.Done():
			return 0, l.ctx.Err()
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}

func (l *fakeLog) Close() error { return nil }

// fakeScreen records the frames the live view draws.
type fakeScreen struct {
	mu         sync.Mutex
	w, h       int
	last       []viewLine
	draws, all int // frames drawn, and how many of them in full
	events     chan screenEvent
}

func newFakeScreen(w, h int) *fakeScreen {
	return &fakeScreen{w: w, h: h, events: make(chan screenEvent, 1)}
}

func (s *fakeScreen) Size() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w, s.h
}

func (s *fakeScreen) Draw(frame []viewLine, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = frame
	s.draws++
	if full {
		s.all++
	}
}

func (s *fakeScreen) Events() <-chan screenEvent { return s.events }

func (s *fakeScreen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return render(s.last)
}

// now is the fake clock inside a synctest bubble.
func now() api.Time { return api.Time{Time: time.Now()} }

func stepEvent(typ string, seq int, phase api.Phase, iteration int, status api.StepStatus) api.Event {
	p := map[string]any{"seq": seq, "phase": phase, "iteration": iteration}
	if status != "" {
		p["status"] = status
	}
	ev := event(0, typ, time.Now(), p)
	ev.TS = now()
	return ev
}
