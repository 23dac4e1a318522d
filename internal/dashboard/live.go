package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/filetail"
)

// Live pages are fed by server-sent events. Each stream follows the event
// log the way `loopctl events --follow` does: it reads the events after
// the last seq it handled, then waits on the bus for the next commit, so
// it never polls the database and misses nothing between the page's
// render (which names the seq it was rendered at) and the stream.
const (
	eventBatch = 1000
	// coalesce is the least time between two updates of one stream: a
	// burst of commits (a step's finish, its evaluation, a condition's
	// progress) becomes one re-render.
	coalesce = 250 * time.Millisecond
	// keepAlive is how often a quiet stream sends a comment, so proxies
	// and the browser keep it open.
	keepAlive = 20 * time.Second
	// writeTimeout drops a browser that stopped reading.
	writeTimeout = 30 * time.Second
	// logPoll is how often the log tail checks the step's log for growth:
	// step output goes straight from the step's processes to the file, so
	// growth is observed, not announced (as in `loopctl logs --follow`).
	logPoll = 300 * time.Millisecond
	// logBacklog is how much of a step's log a new viewer gets first, and
	// logChunk the most one update carries.
	logBacklog = 16 << 10
	logChunk   = 64 << 10
)

// stream is one server-sent events response.
type stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startStream(w http.ResponseWriter) *stream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	setSecurityHeaders(w)
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// send writes one event; id (when > 0) lets a reconnecting EventSource
// resume after it (Last-Event-ID).
func (s *stream) send(event string, id int64, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if id > 0 {
		if _, err := fmt.Fprintf(s.w, "id: %d\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil {
		return err
	}
	return s.rc.SetWriteDeadline(time.Time{})
}

func (s *stream) ping() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := io.WriteString(s.w, ": ping\n\n"); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil {
		return err
	}
	return s.rc.SetWriteDeadline(time.Time{})
}

// startSeq is where a stream begins: after the event the browser saw last
// (Last-Event-ID, on a reconnect), else after the seq its page was
// rendered at (?after=).
func startSeq(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, errors.New("a live stream needs ?after=SEQ, the event seq its page was rendered at")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("after must be an event seq ≥ 0, got %q", v)
	}
	return n, nil
}

// follow calls update with the runs changed by each batch of new events
// until the client goes away or the daemon shuts down.
func (s *Server) follow(ctx context.Context, st *stream, after int64, update func(ids []string, seq int64) error) {
	for {
		seen := s.src.Seq() // read before querying: a commit after this wakes us
		ids, last, err := s.src.ChangedRuns(ctx, after, eventBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("dashboard stream: read events", zap.Error(err))
			}
			return
		}
		if last > after {
			if err := update(ids, last); err != nil {
				return
			}
			after = last
			if !s.pause(ctx, coalesce) {
				return
			}
			continue // a full batch, or commits during the pause
		}
		wctx, cancel := context.WithTimeout(ctx, keepAlive)
		_, err = s.src.Wait(wctx, seen)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded):
			if st.ping() != nil {
				return
			}
		case err != nil:
			return // the bus closed: the daemon is shutting down
		}
	}
}

// byeEvent is the last event of every stream the daemon ends by shutting
// down. The page closes its EventSource on it: an EventSource left to
// reconnect would keep knocking on the port with the session cookie, and
// whoever binds that port after the daemon (another user) would get it,
// and the page would show their answers.
const byeEvent = "bye"

// bye sends byeEvent when st ends because the daemon is shutting down;
// deferred by every stream right after startStream.
func (s *Server) bye(st *stream) {
	select {
	case <-s.closing:
		_ = st.send(byeEvent, 0, map[string]string{"message": "the daemon stopped: start it again, then open the link `loopctl dashboard` prints"})
	default:
	}
}

// pause waits d unless the client leaves or the daemon shuts down.
func (s *Server) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	case <-t.C:
		return true
	}
}

// waitLogPoll waits one log poll, as a log stream does between reads, and
// sends a keep-alive comment when the stream has been quiet for keepAlive
// (quiet counts that time, reset by the ping). It is false when the browser
// is gone or the daemon shuts down.
func (s *Server) waitLogPoll(ctx context.Context, st *stream, quiet *time.Duration) bool {
	*quiet += logPoll
	if *quiet >= keepAlive {
		*quiet = 0
		if st.ping() != nil {
			return false
		}
	}
	return s.pause(ctx, logPoll)
}

// rowUpdate replaces (or inserts, or with HTML "" removes) one run's row:
// for a backlog, its whole group, the backlog's row and its task runs'.
type rowUpdate struct {
	ID   string `json:"id"`
	HTML string `json:"html"`
}

// streamRuns feeds the runs page: each run that changes is re-rendered as
// a table row, or removed when it no longer matches the page's filter. A
// task run that changes re-renders its backlog's group (the backlog's
// row tallies its task runs), once per batch.
func (s *Server) streamRuns(w http.ResponseWriter, r *http.Request) {
	f, err := runsFilter(r)
	if err != nil {
		s.refusePage(w, http.StatusBadRequest, err)
		return
	}
	after, err := startSeq(r)
	if err != nil {
		s.refusePage(w, http.StatusBadRequest, err)
		return
	}
	st := startStream(w)
	defer s.bye(st)
	ctx := r.Context()
	s.follow(ctx, st, after, func(ids []string, seq int64) error {
		done := map[string]bool{}
		for _, id := range ids {
			run, err := s.src.Run(ctx, id)
			if err == nil && run.Parent != "" && !done[run.Parent] {
				run, err = s.src.Run(ctx, run.Parent)
			}
			if err != nil {
				if api.IsCode(err, api.CodeNotFound) {
					continue
				}
				return err
			}
			if done[run.ID] || run.Parent != "" {
				continue
			}
			done[run.ID] = true
			u := rowUpdate{ID: run.ID}
			if f.matches(run) {
				row := newRunRow(run)
				if run.Kind == kindBacklog {
					if row, err = s.backlogRow(ctx, run); err != nil {
						return err
					}
				}
				if u.HTML, err = s.fragment("group", row); err != nil {
					return err
				}
			}
			if err := st.send("run", seq, u); err != nil {
				return err
			}
		}
		return nil
	})
}

// runUpdate is a run page's live update: its summary, its charts and (on
// the page of the newest iterations) its ledger.
type runUpdate struct {
	Status  api.RunStatus `json:"status"`
	Summary string        `json:"summary"`
	Charts  string        `json:"charts"`
	Ledger  string        `json:"ledger,omitempty"`
	// Offer names the controls the run's state offers (offerFor), Note
	// says why an ended run offers less.
	Offer []string `json:"offer"`
	Note  string   `json:"offer_note"`
}

// streamRun feeds a run's page: on every commit that concerns the run, the
// parts of the page that show its state are re-rendered.
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request) {
	after, err := startSeq(r)
	if err != nil {
		s.refusePage(w, http.StatusBadRequest, err)
		return
	}
	run, err := s.src.Run(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if run.Kind == kindBacklog {
		s.streamBacklog(w, r, run, after)
		return
	}
	// Only the newest page of the ledger changes; older pages stay as read.
	withLedger := r.URL.Query().Get("page") == "" || r.URL.Query().Get("page") == "1"
	st := startStream(w)
	defer s.bye(st)
	ctx := r.Context()
	s.follow(ctx, st, after, func(ids []string, seq int64) error {
		for _, id := range ids {
			if id != run.ID {
				continue
			}
			page, err := s.runPage(r, run.ID, 1)
			if err != nil {
				return err
			}
			var u runUpdate
			u.Status, u.Offer, u.Note = page.Run.Status, page.Offer.Names(), page.Offer.Note
			if u.Summary, err = s.fragment("summary", page); err != nil {
				return err
			}
			if u.Charts, err = s.fragment("charts", page); err != nil {
				return err
			}
			if withLedger {
				if u.Ledger, err = s.fragment("ledger", page); err != nil {
					return err
				}
			}
			return st.send("run", seq, u)
		}
		return nil
	})
}

// logUpdate is a piece of the log tail. Start names a new step: the
// browser clears the tail before adding Text.
type logUpdate struct {
	Start     bool   `json:"start,omitempty"`
	Seq       int    `json:"seq"`
	Phase     string `json:"phase"`
	Iteration int    `json:"iteration"`
	Text      string `json:"text"`
}

// streamLog tails the run's newest step's log: the last logBacklog bytes,
// then what the step writes, moving on to each next step as it starts.
// With ?step=N it streams that one step's log instead (streamStepLog).
func (s *Server) streamLog(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	run, err := s.src.Run(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if r.URL.Query().Has("step") { // one chosen step's log (steplog.go)
		s.streamStepLog(w, r, run)
		return
	}
	st := startStream(w)
	defer s.bye(st)
	var (
		cur   *api.Step
		fl    *filetail.Follower // cur's log
		quiet time.Duration
	)
	defer func() {
		if fl != nil {
			fl.Close()
		}
	}()
	seen := int64(-1)
	for {
		if seq := s.src.Seq(); seq != seen { // something committed: maybe a new step
			seen = seq
			last, err := s.src.LastStep(ctx, run.ID)
			if err != nil {
				return
			}
			if last != nil && (cur == nil || last.Seq != cur.Seq) {
				// Finish the old step's output before moving on.
				if fl != nil {
					err := s.drain(st, fl, cur)
					fl.Close()
					if err != nil {
						return
					}
				}
				cur, fl = last, filetail.Follow(last.LogPath, logChunk, logBacklog)
				if err := st.send("log", 0, logUpdate{Start: true, Seq: cur.Seq, Phase: string(cur.Phase), Iteration: cur.Iteration}); err != nil {
					return
				}
			}
		}
		if fl != nil {
			if err := s.drain(st, fl, cur); err != nil {
				return
			}
		}
		if !s.waitLogPoll(ctx, st, &quiet) {
			return
		}
	}
}

// drain sends what the log has gained since the last read (the follower
// never splits a UTF-8 character between two updates, and marks a tail
// that begins mid-file). It returns an error only when the browser is
// gone: a log that cannot be read now is read again at the next poll.
func (s *Server) drain(st *stream, fl *filetail.Follower, cur *api.Step) error {
	var sendErr error
	_ = fl.Read(func(p []byte) error {
		sendErr = st.send("log", 0, logUpdate{Seq: cur.Seq, Phase: string(cur.Phase), Iteration: cur.Iteration, Text: string(p)})
		return sendErr
	})
	return sendErr
}
