package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/views"
)

func contextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// eventPage bounds how many events a follower reads per query, so a
// follower far behind costs a bounded amount of memory.
const eventPage = 500

// stallTimeout is how long a follower may leave data unread before it is
// dropped: a stream holds at most one page in memory, and a client that
// stopped reading must not pin a handler forever. (A variable for tests.)
var stallTimeout = 30 * time.Second

// stall arms the write deadline before writes to a stream; flushed
// disarms it once they went through, so a quiet stream (a step that prints
// nothing for minutes) is never cut.
func stall(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(stallTimeout))
}

// flushed sends buffered output and disarms the write deadline.
func flushed(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	_ = rc.SetWriteDeadline(time.Time{})
}

// handleEvents streams a run's events as NDJSON: every stored event after
// `after`, then (with follow) each new one as soon as it commits, until the
// run's terminal event has been sent. Each follower re-reads the database
// after its last seq on every wake-up, so no event is missed or sent twice
// across the replay/live boundary.
func (d *Daemon) handleEvents(w http.ResponseWriter, r *http.Request) {
	run, err := d.resolve(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	var after int64
	if a := q.Get("after"); a != "" {
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			d.fail(w, r, api.Errorf(api.CodeBadRequest, "after must be an event seq ≥ 0, got %q", a))
			return
		}
	}
	follow := q.Get("follow") != ""
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	ctx := r.Context()
	for {
		// Registered before querying: a commit of this run after this
		// wakes us, and commits of other runs do not.
		wake, release := d.bus.Watch(run.ID)
		done, next := d.eventsPage(ctx, w, enc, run.ID, after, follow)
		after = next
		if done {
			release()
			return
		}
		woken := waitWake(ctx, wake)
		release()
		if !woken || d.bus.Closed() {
			return
		}
	}
}

// eventsPage sends a run's events after `after`, up to the end of what is
// stored (page by page), and returns the last seq sent and whether the
// stream is done.
func (d *Daemon) eventsPage(ctx context.Context, w http.ResponseWriter, enc *json.Encoder, runID string, after int64, follow bool) (bool, int64) {
	for {
		// The run's status is read before its events: a status committed
		// as terminal has its terminal event in the same commit, so the
		// query below is sure to include it.
		cur, err := d.store.Run(ctx, runID)
		if err != nil {
			return true, after
		}
		// A followed stream ends with the run's (last) terminal event,
		// never sometimes with the events that follow it.
		var end int64
		if follow && cur.Status.Terminal() {
			if end, err = d.store.LastTerminalEvent(ctx, runID); err != nil {
				return true, after
			}
		}
		evs, err := d.store.Events(ctx, runID, after, eventPage)
		if err != nil {
			return true, after
		}
		if len(evs) > 0 {
			stall(w)
		}
		for _, e := range evs {
			if end > 0 && e.Seq > end {
				break
			}
			if err := enc.Encode(views.Event(e)); err != nil {
				return true, after // the follower went away
			}
			after = e.Seq
		}
		if len(evs) > 0 {
			flushed(w)
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

// logPoll is how often a followed log file is checked for growth: step
// output goes straight from the step's processes to the file, so growth is
// observed, not announced.
const logPoll = 50 * time.Millisecond

// handleLogs streams step output: one step (?step=N) or every step in
// order with a header line between them; with follow, output is sent as it
// is written and the stream ends with the run (or the step).
func (d *Daemon) handleLogs(w http.ResponseWriter, r *http.Request) {
	run, err := d.resolve(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	follow := q.Get("follow") != ""
	asJSON := q.Get("format") == "json"
	only := 0
	if s := q.Get("step"); s != "" {
		if only, err = strconv.Atoi(s); err != nil || only < 1 {
			d.fail(w, r, api.Errorf(api.CodeBadRequest, "step must be a step number ≥ 1 (see loopctl steps), got %q", s))
			return
		}
		if _, err := d.store.Step(r.Context(), run.ID, only); err != nil {
			d.fail(w, r, err)
			return
		}
	}
	var skip int64
	if s := q.Get("skip"); s != "" {
		if skip, err = strconv.ParseInt(s, 10, 64); err != nil || skip < 0 || asJSON || only > 0 {
			d.fail(w, r, api.Errorf(api.CodeBadRequest, "skip must be a byte count ≥ 0, for the text stream of a whole run, got %q", s))
			return
		}
	}
	if asJSON {
		w.Header().Set("Content-Type", "application/x-ndjson")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(http.StatusOK)
	lw := &logWriter{rw: w, w: w}
	if skip > 0 {
		// The text stream of a run is a function of its append-only logs:
		// regenerated, its first skip bytes are what the client has.
		lw.w = &skipWriter{w: w, n: skip}
	}
	ctx := r.Context()
	seq := max(only, 1)
	for {
		st, err := d.store.Step(ctx, run.ID, seq)
		if errors.Is(err, storage.ErrNotFound) {
			if !follow || only > 0 {
				return
			}
			// No such step yet: wait for the next one, or the end of the
			// run. A PAUSED or WAITING run has not ended: its next step
			// comes after resume (or the reset), and the follower goes on,
			// as watch does.
			cur, err := d.store.Run(ctx, run.ID)
			if err != nil || cur.Status.Terminal() {
				return
			}
			if !d.sleep(ctx) {
				return
			}
			continue
		}
		if err != nil {
			return
		}
		if asJSON {
			lw.w = &jsonChunks{w: w, seq: st.Seq, phase: string(st.Phase)}
		} else if only == 0 {
			fmt.Fprintf(lw, "%s==> #%d %s (iteration %d) <==\n", lw.sep(), st.Seq, st.Phase, st.Iteration)
		}
		if !d.tailStep(ctx, lw, st, follow) {
			return
		}
		if only > 0 {
			return
		}
		seq++
	}
}

// tailStep copies a step's log to w; with follow, until the step has ended
// and its log is read to the end. It reports false when the client is gone.
func (d *Daemon) tailStep(ctx context.Context, w *logWriter, st storage.Step, follow bool) bool {
	f, err := os.Open(st.LogPath)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) || st.Status != api.StepRunning || !follow {
			return true // a step that never started has no log
		}
	}
	// One close for every way out: the file may be opened late, in the
	// loop, and any return must not leave it open.
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	buf := make([]byte, 32*1024)
	running := st.Status == api.StepRunning
	for {
		if f == nil {
			f, _ = os.Open(st.LogPath)
		}
		if f != nil {
			for {
				n, err := f.Read(buf)
				if n > 0 {
					w.stall()
					if _, werr := w.WriteRunes(buf[:n]); werr != nil {
						return false
					}
				}
				if err == io.EOF || n == 0 {
					break
				}
				if err != nil {
					return true
				}
			}
			w.Flush()
		}
		if !follow || !running {
			w.FlushPartial()
			return true
		}
		// Check the status before the last read, so output written just
		// before the step ended is still copied after we see it ended.
		cur, err := d.store.Step(ctx, st.RunID, st.Seq)
		if err != nil {
			return false
		}
		if cur.Status != api.StepRunning {
			running = false
			continue // one more read to the end
		}
		if !d.sleep(ctx) {
			return false
		}
	}
}

func (d *Daemon) sleep(ctx context.Context) bool {
	t := time.NewTimer(logPoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-d.closing:
		return false
	case <-t.C:
		return true
	}
}

// logWriter writes log bytes without ever splitting a UTF-8 character
// across writes: an incomplete trailing sequence is held back until its
// remaining bytes arrive.
type logWriter struct {
	rw      http.ResponseWriter // for flushes and write deadlines
	w       io.Writer
	pending []byte
	wrote   bool
}

func (l *logWriter) sep() string {
	if l.wrote {
		return "\n"
	}
	return ""
}

// Write implements io.Writer for headers.
func (l *logWriter) Write(p []byte) (int, error) {
	l.wrote = true
	l.stall()
	return l.w.Write(p)
}

// WriteRunes writes p, holding back a trailing partial character.
func (l *logWriter) WriteRunes(p []byte) (int, error) {
	b := append(l.pending, p...)
	cut := len(b)
	// Look back at most UTFMax-1 bytes for the start of an incomplete rune.
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	l.pending = append(l.pending[:0:0], b[cut:]...)
	if cut == 0 {
		return len(p), nil
	}
	l.wrote = true
	_, err := l.w.Write(b[:cut])
	return len(p), err
}

func (l *logWriter) stall() { stall(l.rw) }

// FlushPartial writes any held-back bytes (the log ended mid-character).
func (l *logWriter) FlushPartial() {
	if len(l.pending) > 0 {
		l.stall()
		_, _ = l.w.Write(l.pending)
		l.pending = nil
	}
	l.Flush()
}

// Flush sends buffered output to the client and disarms the deadline.
func (l *logWriter) Flush() { flushed(l.rw) }

// jsonChunks writes each chunk of a step's output as one NDJSON object,
// {"seq":3,"phase":"verification","text":"…"}; chunks never split a
// character, so text is always valid UTF-8.
type jsonChunks struct {
	w     io.Writer
	seq   int
	phase string
}

func (j *jsonChunks) Write(p []byte) (int, error) {
	b, err := json.Marshal(map[string]any{"seq": j.seq, "phase": j.phase, "text": string(p)})
	if err != nil {
		return 0, err
	}
	if _, err := j.w.Write(append(b, '\n')); err != nil {
		return 0, err
	}
	return len(p), nil
}

// skipWriter drops the first n bytes written to it.
type skipWriter struct {
	w io.Writer
	n int64
}

func (s *skipWriter) Write(p []byte) (int, error) {
	if s.n >= int64(len(p)) {
		s.n -= int64(len(p))
		return len(p), nil
	}
	q := p[s.n:]
	s.n = 0
	if _, err := s.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}
