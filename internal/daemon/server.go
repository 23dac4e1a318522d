package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/dashboard"
	"github.com/loopd/loopd/internal/follow"
	"github.com/loopd/loopd/internal/metrics"
	"github.com/loopd/loopd/internal/postmortem"
	"github.com/loopd/loopd/internal/scheduler"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/tcpguard"
	"github.com/loopd/loopd/internal/views"
)

// maxBody bounds every request body.
const maxBody = 1 << 20

func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/daemon", d.handleDaemon)
	mux.HandleFunc("POST /v1/daemon/stop", d.handleDaemonStop)
	mux.HandleFunc("POST /v1/runs", d.handleCreate)
	mux.HandleFunc("GET /v1/runs", d.handleList)
	mux.HandleFunc("GET /v1/runs/{ref}", d.handleGet)
	mux.HandleFunc("GET /v1/runs/{ref}/steps", d.handleSteps)
	mux.HandleFunc("GET /v1/runs/{ref}/events", d.handleEvents)
	mux.HandleFunc("GET /v1/runs/{ref}/logs", d.handleLogs)
	mux.HandleFunc("GET /v1/runs/{ref}/wait", d.handleWait)
	mux.HandleFunc("GET /v1/runs/{ref}/postmortem", d.handlePostmortem)
	mux.HandleFunc("POST /v1/runs/{ref}/stop", d.handleStop)
	mux.HandleFunc("POST /v1/runs/{ref}/pause", d.handlePause)
	mux.HandleFunc("POST /v1/runs/{ref}/resume", d.handleResume)
	mux.HandleFunc("POST /v1/runs/{ref}/signal", d.handleSignal)
	mux.HandleFunc("POST /v1/runs/{ref}/answer", d.handleAnswer)
	mux.HandleFunc("GET /v1/runs/{ref}/tasks", d.handleTasks)
	mux.HandleFunc("POST /v1/runs/{ref}/tasks/{task}/retry", d.handleRetryTask)
	mux.HandleFunc("POST /v1/trust", d.handleTrust)
	mux.HandleFunc("DELETE /v1/trust", d.handleRevoke)
	mux.Handle("GET /metrics", metrics.Handler(d.store, d.log, d.stepGap, d.ahead))
	mux.HandleFunc("GET /v1/runs/{ref}/diff", d.handleDiff)
	mux.HandleFunc("POST /v1/runs/{ref}/land", d.handleLand)
	mux.HandleFunc("GET /v1/runs/{ref}/land/local", d.handleLocalLand)
	mux.HandleFunc("POST /v1/runs/{ref}/landed", d.handleLanded)
	mux.HandleFunc("POST /v1/worktrees/clean", d.handleClean)
	mux.HandleFunc("POST /v1/dashboard/login", d.handleDashboardLogin)
	mux.HandleFunc("POST /v1/tokens", d.handleCreateToken)
	mux.HandleFunc("GET /v1/tokens", d.handleTokens)
	mux.HandleFunc("DELETE /v1/tokens/{name}", d.handleRevokeToken)
	d.dash.Auth().SetHost(d.httpAddr)
	loginRefused := tcpguard.NewRefusals()
	d.dash.LogRefusalsWith(func(msg string, fields ...zap.Field) { loginRefused.Note(d.log, msg, fields...) })
	d.dash.Register(mux) // the web dashboard: /, /runs/{id}, /login, /live/…, /assets/…
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		d.fail(w, r, api.Errorf(api.CodeNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return d.owner(mux)
}

// owner admits only the daemon's owner: on the Unix socket a peer with
// the daemon's own uid (SO_PEERCRED, whatever the socket file's mode
// says), on the optional TCP listener a request with the bearer token or,
// within its scope, a dashboard session cookie. A handler tells the two
// apart with sessionOnly.
//
// Refusals are logged at most once per tcpguard.RefusalLogEvery (with a
// count of the others), and the TCP refusal says nothing about the daemon
// (not where its token lives): whoever knocks learns only that a token is
// needed.
func (d *Daemon) owner(next http.Handler) http.Handler {
	uid := os.Getuid()
	refused := tcpguard.NewRefusals()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := peerFrom(r.Context())
		if p.tcp {
			// The bearer token, or a dashboard session (and its CSRF token
			// for a state change): authorizeTCP is the one check.
			if err := d.authorizeTCP(r); err != nil {
				refused.Note(d.log, "refused TCP request without a valid token", zap.String("remote", r.RemoteAddr),
					zap.String("why", err.Error()))
				d.refuseTCP(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if !p.ok || p.uid != uid {
			refused.Note(d.log, "refused connection from another user", zap.Int("peer_uid", p.uid), zap.Int("peer_pid", p.pid))
			d.fail(w, r, api.Errorf(api.CodeForbidden, "loopd serves only its owner (uid %d); connection from uid %d refused", uid, p.uid))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sessionOnly reports whether r, admitted by owner, came with a dashboard
// session rather than the bearer token or on the owner's socket. It is
// asked again by the few handlers that care, rather than recorded on every
// request: that would cost each request a copy.
func (d *Daemon) sessionOnly(r *http.Request) bool {
	return peerFrom(r.Context()).tcp && !d.bearerOK(r)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers with the API error that fits err.
func (d *Daemon) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		ae    *api.Error
		in    *scheduler.InputError
		st    *scheduler.StateError
		amb   *storage.AmbiguousError
		large *http.MaxBytesError
		trust *scheduler.UntrustedError
	)
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &trust):
		ae = untrustedError(trust)
	case errors.As(err, &in):
		ae = &api.Error{Code: api.CodeBadRequest, Message: in.Msg, Details: in.Problems}
	case errors.As(err, &st):
		ae = api.Errorf(api.CodeConflict, "%s", st.Msg)
	case errors.As(err, &amb):
		ae = api.Errorf(api.CodeAmbiguous, "%s; give more characters of the id", amb.Error())
	case errors.As(err, &large):
		ae = api.Errorf(api.CodeTooLarge, "request body larger than %d bytes", large.Limit)
	case errors.Is(err, storage.ErrNotFound):
		ae = api.Errorf(api.CodeNotFound, "%v", err)
	case errors.Is(err, storage.ErrConflict):
		ae = api.Errorf(api.CodeConflict, "%v", err)
	case d.shuttingDown():
		d.log.Info("request cut by the shutdown", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		ae = d.failure(err)
	case storage.Transient(err):
		d.log.Error("request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		ae = &api.Error{Status: http.StatusInsufficientStorage, Code: api.CodeUnavailable, Message: storage.Explain(err)}
	default:
		d.log.Error("request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		ae = api.Errorf(api.CodeInternal, "internal error: %v", err)
	}
	if ae.Status == 0 {
		ae.Status = ae.Code.HTTPStatus()
	}
	writeJSON(w, ae.Status, map[string]any{"error": ae})
}

// decode reads a JSON request body strictly: bounded size, no unknown
// fields, nothing after the value.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeUpTo(w, r, v, maxBody)
}

// maxSnapshotBody bounds a start or trust request, which through
// LOOPD_URL carries the clone's files (at most 4 MiB, base64 in JSON).
const maxSnapshotBody = 8 << 20

// decodeSnapshot decodes a request that may carry a snapshot of a
// clone's files (start and trust through LOOPD_URL): up to
// maxSnapshotBody when it does (hasSnapshot, asked once v is decoded),
// else maxBody as every other request.
func decodeSnapshot(w http.ResponseWriter, r *http.Request, v any, hasSnapshot func() bool) error {
	n := &countingReader{r: r.Body}
	r.Body = struct {
		io.Reader
		io.Closer
	}{n, r.Body}
	if err := decodeUpTo(w, r, v, maxSnapshotBody); err != nil {
		return err
	}
	if n.n > maxBody && !hasSnapshot() {
		return &http.MaxBytesError{Limit: maxBody}
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// decodeUpTo is decode with a body of at most limit bytes.
func decodeUpTo(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return api.Errorf(api.CodeBadRequest, "malformed request body: %v", err)
	}
	if dec.More() {
		return api.Errorf(api.CodeBadRequest, "malformed request body: unexpected data after the JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return api.Errorf(api.CodeBadRequest, "malformed request body: unexpected data after the JSON value")
	}
	return nil
}

// resolve finds the run named by the {ref} path value.
func (d *Daemon) resolve(r *http.Request) (storage.Run, error) {
	ws := r.URL.Query().Get("workspace")
	if ws != "" {
		ws = scheduler.CanonicalWorkspace(ws)
	}
	return d.store.ResolveRun(r.Context(), r.PathValue("ref"), ws)
}

// describe answers with the run as it is now (re-read: a command may just
// have changed it).
func (d *Daemon) describe(w http.ResponseWriter, r *http.Request, id string, status int) {
	run, err := d.store.Run(r.Context(), id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.describeRun(w, r, run, status)
}

func (d *Daemon) describeRun(w http.ResponseWriter, r *http.Request, run storage.Run, status int) {
	view, err := d.sched.Describe(r.Context(), run, scheduler.DescribeOptions{Debug: r.URL.Query().Get("debug") != ""})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, status, view)
}

func (d *Daemon) handleDaemon(w http.ResponseWriter, r *http.Request) {
	info := api.DaemonInfo{
		PID: os.Getpid(), Version: d.opts.Version, Home: d.opts.Home, Socket: d.opts.Socket,
		StartedAt: api.Time{Time: d.started}, ActiveRuns: d.sched.Active(), MaxConcurrent: d.sched.MaxConcurrent(),
	}
	d.fleetInfo(&info)
	if info.HTTP = d.tcpAddr; d.httpAddr != "" && d.noDashboard == nil {
		info.Dashboard = "http://" + d.httpAddr + "/"
	}
	if r.URL.Query().Get("disk") != "" { // a walk of the worktrees: only when asked (every loopctl pings)
		info.Worktrees = d.lander.WorktreeDisk(r.Context())
	}
	writeJSON(w, http.StatusOK, info)
}

func (d *Daemon) handleDaemonStop(w http.ResponseWriter, r *http.Request) {
	if !d.nodeOwner(r) {
		// A fleet's user drives runs, not the node that serves everyone.
		d.fail(w, r, api.Errorf(api.CodeForbidden, "only the node's owner (its socket or its own LOOPD_HOME/http.token) can stop it; a user's token cannot"))
		return
	}
	var req api.DaemonStopRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"stopping": true, "kill_steps": req.KillSteps})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	d.requestStop(req.KillSteps)
}

func (d *Daemon) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req api.CreateRunRequest
	if err := decodeSnapshot(w, r, &req, func() bool { return req.Snapshot != nil }); err != nil {
		d.fail(w, r, err)
		return
	}
	req.CreatedBy = d.createdBy(r)
	run, warnings, err := d.sched.CreateRun(r.Context(), req)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	view, err := d.sched.Describe(r.Context(), run, scheduler.DescribeOptions{})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	// What start warns of (no verification, no cost cap, a dirty
	// checkout) comes first.
	view.Warnings = append(warnings, view.Warnings...)
	writeJSON(w, http.StatusCreated, view)
}

func (d *Daemon) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := storage.RunFilter{Status: api.RunStatus(q.Get("status"))}
	if f.Status != "" && !f.Status.Valid() {
		d.fail(w, r, api.Errorf(api.CodeBadRequest, "unknown status %q: use PENDING, RUNNING, PAUSED, WAITING, COMPLETED, FAILED, ABORTED or INTERRUPTED", f.Status))
		return
	}
	if ws := q.Get("workspace"); ws != "" {
		f.Workspace = scheduler.CanonicalWorkspace(ws)
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 10_000 {
			d.fail(w, r, api.Errorf(api.CodeBadRequest, "limit must be a number from 1 to 10000, got %q", l))
			return
		}
		f.Limit = n
	}
	runs, err := d.store.ListRuns(r.Context(), f)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	out, err := d.sched.DescribeList(r.Context(), runs)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	for i := range out {
		out[i].Config = nil
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) handleGet(w http.ResponseWriter, r *http.Request) {
	run, err := d.resolve(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	run = d.lander.NoticeGoneWorktree(r.Context(), run)
	d.describeRun(w, r, run, http.StatusOK)
}

func (d *Daemon) handleSteps(w http.ResponseWriter, r *http.Request) {
	run, err := d.resolve(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	steps, err := d.store.Steps(r.Context(), run.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	now := time.Now().UnixMilli()
	out := make([]api.Step, 0, len(steps))
	for i := range steps {
		st := views.Step(&steps[i], now)
		if st.Status == api.StepRunning && st.Pid == 0 {
			st.Pid = d.sched.RunningPid(run.ID)
		}
		out = append(out, st)
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) handleStop(w http.ResponseWriter, r *http.Request) {
	var req api.StopRequest
	d.command(w, r, &req, func(id string) error { return d.sched.Stop(r.Context(), id, req.Now) })
}

func (d *Daemon) handlePause(w http.ResponseWriter, r *http.Request) {
	d.command(w, r, &struct{}{}, func(id string) error {
		if err := d.sched.TaskRunRefusal(r.Context(), id, "pause", "`loopctl pause BACKLOG`"); err != nil {
			return err
		}
		return d.sched.Pause(r.Context(), id)
	})
}

func (d *Daemon) handleResume(w http.ResponseWriter, r *http.Request) {
	var req api.ResumeRequest
	d.command(w, r, &req, func(id string) error {
		if err := d.sched.TaskRunRefusal(r.Context(), id, "resume", "`loopctl resume BACKLOG`, or `loopctl tasks BACKLOG --retry ID` for a blocked task"); err != nil {
			return err
		}
		if d.sessionOnly(r) {
			if err := dashboard.ResumeRefusal(req.Set); err != nil {
				return err
			}
			if req.OntoBase {
				return api.Errorf(api.CodeForbidden, "refused: the dashboard does not merge a base branch into a run's worktree; use `loopctl resume %s --onto-base`", id)
			}
		}
		if !req.OntoBase {
			if d.lander.Landing(id) { // its worktree is checked out at the merge under test
				return api.Errorf(api.CodeConflict, "run %s is being landed: resume it once `loopctl land` has finished", id)
			}
			return d.sched.Resume(r.Context(), id, req.Set)
		}
		// Land and clean keep away from the worktree while the base is
		// merged into it.
		release, ok := d.lander.Hold(id)
		if !ok {
			return api.Errorf(api.CodeConflict, "run %s is being landed or cleaned: resume it once that has finished", id)
		}
		defer release()
		return d.sched.ResumeOntoBase(r.Context(), id, req.Set)
	})
}

func (d *Daemon) handleSignal(w http.ResponseWriter, r *http.Request) {
	d.command(w, r, &struct{}{}, func(id string) error { return d.sched.Signal(r.Context(), id) })
}

func (d *Daemon) handleAnswer(w http.ResponseWriter, r *http.Request) {
	var req api.AnswerRequest
	d.command(w, r, &req, func(id string) error { return d.sched.Answer(r.Context(), id, req.Text) })
}

// command decodes a request, resolves its run, applies fn and answers with
// the run as it is now.
func (d *Daemon) command(w http.ResponseWriter, r *http.Request, req any, fn func(id string) error) {
	if err := decode(w, r, req); err != nil {
		d.fail(w, r, err)
		return
	}
	run, err := d.resolve(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if err := fn(run.ID); err != nil {
		d.fail(w, r, err)
		return
	}
	d.describe(w, r, run.ID, http.StatusOK)
}

func (d *Daemon) handleWait(w http.ResponseWriter, r *http.Request) {
	run, err := d.resolve(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	timeout := 60 * time.Second
	if t := r.URL.Query().Get("timeout"); t != "" {
		if timeout, err = time.ParseDuration(t); err != nil || timeout <= 0 {
			d.fail(w, r, api.Errorf(api.CodeBadRequest, "timeout must be a positive duration such as 30s, got %q", t))
			return
		}
	}
	ctx, cancel := contextWithTimeout(r.Context(), timeout)
	defer cancel()
	d.log.Debug("a client waits for the run to end", zap.String("run", run.ID), zap.Duration("timeout", timeout))
	// Only a commit of this run wakes the waiter; it reads only the run's
	// status. A timeout, a client gone or a shutdown answers with the
	// current state.
	// Nor does it read while no commit changed any run's flags since it
	// last read (storage.FlagsVersion): most of the run's commits are its
	// steps'.
	var seen uint64
	known := false
	_, err = follow.Until(ctx, d.bus, run.ID, func() (bool, error) {
		v, covered := d.store.FlagsVersion()
		if known && v == seen {
			return false, nil
		}
		cur, err := d.store.RunFlags(r.Context(), run.ID)
		seen, known = v, covered && err == nil
		return err == nil && cur.Status.Terminal(), err
	})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.describe(w, r, run.ID, http.StatusOK)
}

func (d *Daemon) handlePostmortem(w http.ResponseWriter, r *http.Request) {
	run, err := d.resolve(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if !run.Status.Terminal() {
		d.fail(w, r, api.Errorf(api.CodeConflict, "run %s is %s: a postmortem is written when it ends", run.ID, run.Status))
		return
	}
	dir := filepath.Join(d.opts.Home, "runs", run.ID)
	ctx, cancel := contextWithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	written, _ := follow.Until(ctx, d.bus, run.ID, func() (bool, error) {
		cur, err := d.store.Run(ctx, run.ID)
		return err == nil && cur.PostmortemAt != nil, nil
	})
	if !written {
		d.fail(w, r, api.Errorf(api.CodeConflict, "the postmortem of run %s is not written yet; try again", run.ID))
		return
	}
	md, err1 := os.ReadFile(filepath.Join(dir, postmortem.MarkdownFile))
	summary, err2 := os.ReadFile(filepath.Join(dir, postmortem.SummaryFile))
	if err := errors.Join(err1, err2); err != nil {
		d.fail(w, r, fmt.Errorf("read postmortem: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, api.Postmortem{RunID: run.ID, Markdown: string(md), Summary: json.RawMessage(summary)})
}
