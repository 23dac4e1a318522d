package daemon

import (
	"errors"
	"net/http"
	"strings"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/dashboard"
	"github.com/loopd/loopd/internal/scheduler"
)

// handleDashboardLogin mints a one-time login code for `loopctl
// dashboard` and answers with the URL that redeems it.
func (d *Daemon) handleDashboardLogin(w http.ResponseWriter, r *http.Request) {
	var req api.DashboardLoginRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	if d.noDashboard != nil {
		d.fail(w, r, d.noDashboard)
		return
	}
	if d.httpAddr == "" {
		d.fail(w, r, api.Errorf(api.CodeConflict, "this loopd serves no dashboard: it was started without --http; "+
			"stop it (`loopctl daemon stop`) and start it with `loopd --http 127.0.0.1:7777` (or LOOPD_HTTP=127.0.0.1:7777)"))
		return
	}
	next, runID := "/", ""
	if req.Run != "" {
		ws := req.Workspace
		if ws != "" {
			ws = scheduler.CanonicalWorkspace(ws)
		}
		run, err := d.store.ResolveRun(r.Context(), req.Run, ws)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		next, runID = "/runs/"+run.ID, run.ID
	}
	code, expires := d.dash.Auth().NewCode(next)
	u := "http://" + d.httpAddr + dashboard.LoginPath + "?code=" + code
	writeJSON(w, http.StatusOK, api.DashboardLogin{URL: u, ExpiresAt: api.Time{Time: expires}, RunID: runID})
}

// refuseTCP answers a refused TCP request: the JSON API with its error
// body, a page or asset with a page saying how to log in.
func (d *Daemon) refuseTCP(w http.ResponseWriter, r *http.Request, err error) {
	if strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/metrics" {
		// Like the token's refusal, it says nothing about the daemon; a
		// request naming another host (ErrHost) gets it too: what it
		// lacks is the token.
		msg := "forbidden: a valid bearer token is required"
		if errors.Is(err, dashboard.ErrCSRF) || errors.Is(err, dashboard.ErrScope) {
			msg = "forbidden: " + err.Error()
		}
		d.fail(w, r, api.Errorf(api.CodeForbidden, "%s", msg))
		return
	}
	d.dash.RefusePage(w, err)
}
