package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/follow"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/views"
)

func contextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

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
// run's terminal event has been sent (see follow.Events).
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
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	follow.Events(r.Context(), d.store, d.bus, run.ID, after, q.Get("follow") != "", streamOutput{w},
		func(e storage.Event) error { return enc.Encode(views.Event(e)) })
}

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
	opts := follow.LogOptions{Follow: q.Get("follow") != "", JSON: q.Get("format") == "json", Done: d.closing}
	if s := q.Get("step"); s != "" {
		if opts.Step, err = strconv.Atoi(s); err != nil || opts.Step < 1 {
			d.fail(w, r, api.Errorf(api.CodeBadRequest, "step must be a step number ≥ 1 (see loopctl steps), got %q", s))
			return
		}
		if _, err := d.store.Step(r.Context(), run.ID, opts.Step); err != nil {
			d.fail(w, r, err)
			return
		}
	}
	if s := q.Get("skip"); s != "" {
		if opts.Skip, err = strconv.ParseInt(s, 10, 64); err != nil || opts.Skip < 0 || opts.JSON || opts.Step > 0 {
			d.fail(w, r, api.Errorf(api.CodeBadRequest, "skip must be a byte count ≥ 0, for the text stream of a whole run, got %q", s))
			return
		}
	}
	if opts.JSON {
		w.Header().Set("Content-Type", "application/x-ndjson")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(http.StatusOK)
	follow.Logs(r.Context(), d.store, run.ID, streamOutput{w}, opts)
}

// streamOutput is a streamed response as package follow writes it.
type streamOutput struct{ http.ResponseWriter }

func (o streamOutput) Stall() { stall(o.ResponseWriter) }
func (o streamOutput) Flush() { flushed(o.ResponseWriter) }
