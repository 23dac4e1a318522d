package dashboard

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/filetail"
)

// stepLogBacklog is how much of a chosen step's log the page gets: as much
// as its log pane keeps. The whole log is on disk (loopctl logs --step).
const stepLogBacklog = 192 << 10

// streamStepLog streams the log of one step of run, ?step=N (the # of
// `loopctl steps`), into the page's log pane: its last stepLogBacklog
// bytes, then, while the step runs, what it writes. Once the step has
// ended and its log is read to the end, an "end" update tells the page to
// close the stream (an EventSource would otherwise reconnect and read it
// all again).
//
// It is the live tail's reader pinned to one step: the same route (and so
// the same session scope), the same read-only file access, the same
// updates, which the page adds to the pane as text, never as HTML. The
// step is looked up among run's own steps, and its log path comes from
// the daemon's record, never from the request.
func (s *Server) streamStepLog(w http.ResponseWriter, r *http.Request, run api.Run) {
	ctx := r.Context()
	seq, err := strconv.Atoi(r.URL.Query().Get("step"))
	if err != nil || seq < 1 {
		s.refusePage(w, http.StatusBadRequest, fmt.Errorf("step must be a step number ≥ 1 (the # in loopctl steps), got %q", r.URL.Query().Get("step")))
		return
	}
	step := func() (*api.Step, error) {
		steps, err := s.src.StepsBetween(ctx, run.ID, seq, seq)
		if err != nil || len(steps) == 0 {
			return nil, err
		}
		return &steps[0].Step, nil
	}
	cur, err := step()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if cur == nil {
		s.refusePage(w, http.StatusNotFound, api.Errorf(api.CodeNotFound, "run %s has no step #%d (loopctl steps %s lists them)", run.ID, seq, run.ID))
		return
	}
	st := startStream(w)
	defer s.bye(st)
	if err := st.send("log", 0, logUpdate{Start: true, Seq: cur.Seq, Phase: string(cur.Phase), Iteration: cur.Iteration}); err != nil {
		return
	}
	fl := filetail.Follow(cur.LogPath, logChunk, stepLogBacklog)
	defer fl.Close()
	var quiet time.Duration
	seen := s.src.Seq()
	for {
		// Read the step's status before its log: output written before it
		// ended is then in the file when the log is read below.
		ended := cur.Status != api.StepRunning
		// A log not written yet (or removed) reads as nothing.
		if err := s.drain(st, fl, cur); err != nil {
			return
		}
		if ended {
			_ = st.send("end", 0, logUpdate{Seq: cur.Seq, Phase: string(cur.Phase), Iteration: cur.Iteration})
			return
		}
		if !s.waitLogPoll(ctx, st, &quiet) {
			return
		}
		if now := s.src.Seq(); now != seen { // something committed: maybe the step's end
			seen = now
			next, err := step()
			if err != nil || next == nil {
				return
			}
			cur = next
		}
	}
}
