package daemon

import (
	"context"
	"net/http"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/scheduler"
)

// handleTrust records a workspace's files as trusted (loopctl trust).
func (d *Daemon) handleTrust(w http.ResponseWriter, r *http.Request) {
	var req api.TrustRequest
	if err := decodeSnapshot(w, r, &req, func() bool { return req.Snapshot != nil }); err != nil {
		d.fail(w, r, err)
		return
	}
	do := d.sched.Trust
	if req.Show {
		do = d.sched.ShowTrust // records nothing
	}
	switch {
	case req.Snapshot != nil && req.TasksFile != "":
		d.fail(w, r, api.Errorf(api.CodeBadRequest, "a task list cannot be trusted through LOOPD_URL yet: backlog runs start on your own daemon"))
		return
	case req.Snapshot != nil:
		// Through LOOPD_URL: the clone's files as committed, never a
		// path of this node's disk.
		do = func(ctx context.Context, ws string) (scheduler.TrustResult, error) {
			return d.sched.TrustSnapshot(ctx, ws, req.Snapshot, !req.Show)
		}
	case req.TasksFile != "":
		do = func(ctx context.Context, ws string) (scheduler.TrustResult, error) {
			return d.sched.TrustTasks(ctx, ws, req.TasksFile, !req.Show)
		}
	}
	res, err := do(r.Context(), req.Workspace)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	rep := api.TrustReport{Workspace: res.Workspace, TrustedAt: api.Time{Time: res.TrustedAt}, Files: []api.TrustFile{}, Recorded: res.Recorded}
	for _, v := range res.Verdicts {
		rep.Files = append(rep.Files, v.Wire())
	}
	for _, a := range res.Agents {
		rep.Agents = append(rep.Agents, api.TrustAgent{Agent: a.Agent, Command: a.Command, Default: a.Default})
	}
	writeJSON(w, http.StatusOK, rep)
}

// handleRevoke forgets a workspace's trusted files (loopctl trust --revoke).
func (d *Daemon) handleRevoke(w http.ResponseWriter, r *http.Request) {
	ws, paths, err := d.sched.Revoke(r.Context(), r.URL.Query().Get("workspace"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if paths == nil {
		paths = []string{}
	}
	writeJSON(w, http.StatusOK, api.RevokeReport{Workspace: ws, Revoked: paths})
}

// untrustedError is the API form of a refused run.
func untrustedError(e *scheduler.UntrustedError) *api.Error {
	return &api.Error{Status: http.StatusForbidden, Code: api.CodeUntrusted, Message: e.Message(), Details: e.Problems()}
}
