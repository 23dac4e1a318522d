package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/scheduler"
)

// landKeepalive is how often a land's stream carries a line at all:
// loopctl gives up on a daemon silent for more than 15s plus its request
// timeout, and some git work (a checkout of a huge tree) says nothing for
// a while. An empty progress line is not shown.
const landKeepalive = 5 * time.Second

// handleLand lands a worktree run's branch. A land can run a long
// verification, so it answers with an NDJSON stream: progress lines, then
// one result, refusal or error. The land belongs to the request: if
// loopctl goes away or the daemon shuts down, the verification is killed
// and nothing lands.
func (d *Daemon) handleLand(w http.ResponseWriter, r *http.Request) {
	var req api.LandRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	if err := landing.CheckLandRequest(req, (req.NoVerify || req.Push) && d.sessionOnly(r)); err != nil {
		d.fail(w, r, err)
		return
	}
	run, err := d.resolve(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if err := d.sched.TaskRunRefusal(r.Context(), run.ID, "land", "`loopctl land BACKLOG` once the backlog has ended"); err != nil {
		d.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	send := func(m api.LandMessage) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(m)
		if flusher != nil {
			flusher.Flush()
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		tick := time.NewTicker(landKeepalive)
		defer tick.Stop()
		for {
			select {
			case <-d.closing:
				cancel()
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				send(api.LandMessage{Progress: ""})
			}
		}
	})
	progress := func(msg string) { send(api.LandMessage{Progress: msg}) }
	res, err := d.lander.LandRequest(ctx, run, req, progress)
	var ref *landing.Refusal
	switch {
	case err == nil:
		send(api.LandMessage{Result: res})
	case errors.As(err, &ref):
		d.log.Info("land refused", zap.String("run_id", run.ID), zap.String("kind", string(ref.Kind)))
		send(api.LandMessage{Refusal: ref.API()})
	default:
		d.log.Error("land failed", zap.String("run_id", run.ID), zap.Error(err))
		send(api.LandMessage{Error: d.failure(fmt.Errorf("land %s: %w", run.ID, err))})
	}
}

// handleClean removes the worktrees of ended runs (`loopctl clean`): only
// worktrees loopd created and recorded, after reconciling the records with
// git; their branches stay unless asked for.
func (d *Daemon) handleClean(w http.ResponseWriter, r *http.Request) {
	var req api.CleanRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	if req.Workspace != "" {
		req.Workspace = scheduler.CanonicalWorkspace(req.Workspace)
	}
	res, err := d.lander.Clean(r.Context(), req)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleDiff streams a run's change (`loopctl diff`): one iteration's, or
// the whole run's against its base. format=json answers with the stat.
// The patch goes from git's stdout to the socket: a huge diff never sits
// in the daemon's memory.
func (d *Daemon) handleDiff(w http.ResponseWriter, r *http.Request) {
	run, err := d.resolve(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	iteration, err := landing.ParseIteration(q.Get("iteration"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	from, to, err := d.lander.DiffRange(r.Context(), run, iteration)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	w.Header().Set(api.HeaderDiffFrom, from)
	w.Header().Set(api.HeaderDiffTo, to)
	if q.Get("format") == "json" {
		out, err := landing.DiffStat(r.Context(), run, iteration, from, to)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if to == "" {
		return
	}
	opts := git.DiffOptions{Stat: q.Get("stat") != "", Color: q.Get("color") != ""}
	if err := git.StreamDiff(r.Context(), run.Workspace, from, to, opts, w); err != nil && r.Context().Err() == nil {
		// Too late for an error status: the patch has begun. The client
		// sees a short body; the log says why.
		d.log.Error("diff failed mid-stream", zap.String("run_id", run.ID), zap.Error(err))
	}
}
