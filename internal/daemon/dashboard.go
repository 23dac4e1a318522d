package daemon

import (
	"errors"
	"net"
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

// dashboardHost is the host:port a login URL names. On loopback (or a
// wildcard address, which includes it) that is a fresh, unguessable
// <random>.localhost name, so the session cookie, which browsers send to
// every port of its host, reaches no other user's server on 127.0.0.1;
// tcpguard.ListenLoopback holds the port on both loopback addresses,
// since a browser tries ::1 first for a .localhost name. On a network address
// (--http-allow-remote) it is that address: a browser elsewhere cannot
// resolve a .localhost name to this machine, and that address's cookies
// go to its every port.
//
// Any other loopback address (127.0.0.2, 127.1.2.3) serves no dashboard:
// a .localhost name resolves to 127.0.0.1 and ::1, not to it, and a
// cookie of the address itself would reach every server another user runs
// on it (an <img> of theirs that the owner's browser loads is enough). The
// error says so; the bearer token still opens the API there.
func dashboardHost(l net.Listener) (string, error) {
	host, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		return l.Addr().String(), nil
	}
	ip := net.ParseIP(host)
	switch {
	case ip != nil && (ip.IsUnspecified() || ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)):
		return dashboard.NewLoopbackHost(port), nil
	case ip != nil && ip.IsLoopback():
		return "", api.Errorf(api.CodeConflict, "this loopd serves no dashboard on %s: a browser's cookie for that address "+
			"would reach every server another user runs on it; start loopd with --http 127.0.0.1:%s (or ::1, localhost) "+
			"for the dashboard (the bearer token still opens the API on %s)", net.JoinHostPort(host, port), port, host)
	}
	return net.JoinHostPort(host, port), nil
}

// sessionResumeKeys are the settings a dashboard session may change when
// it resumes a run: limits and timeouts. Any other key can run a command
// (agent_command, verify_command, stop_file's scripts, the agent preset)
// or read a file (prompt_file, env_file), which only the owner's own
// loopctl (or the bearer token) may ask for.
var sessionResumeKeys = map[string]bool{
	"max_iterations": true, "max_duration": true, "max_tokens": true, "max_input_tokens": true,
	"max_output_tokens": true, "max_cost": true, "max_consecutive_implementation_failures": true,
	"max_consecutive_review_failures": true, "max_consecutive_verification_failures": true,
	"max_task_failures": true, "no_progress_iterations": true, "step_timeout": true, "idle_timeout": true,
	"max_api_wait": true,
}

// sessionResumeRefusal is the error for a dashboard session's resume that
// sets a key beyond sessionResumeKeys, nil when every key is allowed.
func sessionResumeRefusal(sets []string) error {
	for _, s := range sets {
		key, _, _ := strings.Cut(s, "=")
		key = strings.TrimSpace(key)
		if !sessionResumeKeys[key] {
			return api.Errorf(api.CodeForbidden, "refused: the dashboard may change only limits and timeouts on resume (max_iterations, max_cost, step_timeout…); "+
				"set %q with `loopctl resume --set`", key)
		}
	}
	return nil
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
