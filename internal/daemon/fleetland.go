package daemon

import (
	"cmp"
	"net/http"
	"strconv"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/storage"
)

// A fleet run is landed by loopctl itself, in the user's clone (loopctl
// land through LOOPD_URL, docs/fleet.md): these two endpoints are the API
// node's side of it (landing.LocalLand, landing.RecordLanded).

// fleetLandRun resolves the run of a fleet land request and refuses what
// loopctl must not land in a clone: a run that is not a fleet run, a
// dashboard session (a land runs verify_command on the user's machine and
// moves their branch: loopctl's only), and, when owner is set, another
// user's run: its verify_command was trusted by whoever started it, not
// by this user, and is not handed out to run on this user's machine.
func (d *Daemon) fleetLandRun(w http.ResponseWriter, r *http.Request, owner bool) (storage.Run, bool) {
	if d.sessionOnly(r) {
		d.fail(w, r, api.Errorf(api.CodeForbidden, "refused: a fleet run is landed with `loopctl land` in your clone"))
		return storage.Run{}, false
	}
	run, err := d.resolve(r)
	if err != nil {
		d.fail(w, r, err)
		return storage.Run{}, false
	}
	if run.RepoURL == "" {
		d.fail(w, r, api.Errorf(api.CodeBadRequest, "run %s is not a fleet run (it has no repo_url): land it with `loopctl land` on its daemon", run.ID))
		return storage.Run{}, false
	}
	if by := d.createdBy(r); owner && !d.nodeOwner(r) && by != run.CreatedBy {
		d.fail(w, r, api.Errorf(api.CodeForbidden, "run %s was started by %s, not by %q: its verify_command was trusted by them, "+
			"and is not run on your machine; land it with --no-verify (untested), or let them land it", run.ID, cmp.Or(run.CreatedBy, "the node's owner"), by))
		return storage.Run{}, false
	}
	return run, true
}

// handleLocalLand answers what loopctl needs to land a fleet run in the
// user's clone (api.LocalLand).
func (d *Daemon) handleLocalLand(w http.ResponseWriter, r *http.Request) {
	run, ok := d.fleetLandRun(w, r, true)
	if !ok {
		return
	}
	var push *landing.LocalPush
	if q := r.URL.Query(); q.Get("push") != "" {
		verified, _ := strconv.ParseBool(q.Get("verified"))
		push = &landing.LocalPush{Verified: verified, TestedCommit: q.Get("tested_commit"), Note: q.Get("note")}
	}
	out, err := d.lander.LocalLand(r.Context(), run, push)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// handleLanded records a land loopctl made in the user's clone, as the
// daemon's own land records one: landed_commit and RUN_LANDED. A run
// landed already is a conflict (a second land is refused).
func (d *Daemon) handleLanded(w http.ResponseWriter, r *http.Request) {
	var req api.LandedRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	// Another user may land a run they did not start (with --no-verify
	// or the run's own verification): nothing of theirs runs here.
	run, ok := d.fleetLandRun(w, r, false)
	if !ok {
		return
	}
	if err := d.lander.RecordLanded(r.Context(), run, req); err != nil {
		d.fail(w, r, err)
		return
	}
	d.describe(w, r, run.ID, http.StatusOK)
}
