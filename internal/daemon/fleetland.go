package daemon

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/storage"
)

// A fleet run is landed by loopctl itself, in the user's clone (loopctl
// land through LOOPD_URL, docs/fleet.md): the API node need not see the
// clone. These two endpoints are its API side: what the land's
// verification runs (from the run's frozen config, as trusted when the
// run was created), and the record of the land.

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
			"and is not run on your machine; land it with --no-verify (untested), or let them land it", run.ID, cmpOr(run.CreatedBy, "the node's owner"), by))
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
	ctx := r.Context()
	var cfg struct {
		VerifyCommands []string `json:"verify_command"`
		EnvFile        string   `json:"env_file"`
	}
	if err := json.Unmarshal([]byte(run.Config), &cfg); err != nil {
		d.fail(w, r, err)
		return
	}
	steps, err := d.store.StepsLight(ctx, run.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	out := api.LocalLand{VerifyCommands: cfg.VerifyCommands}
	for _, st := range steps {
		out.Iteration = max(out.Iteration, st.Iteration)
		if st.ChangeCommit != "" {
			out.TestedCommit = st.ChangeCommit
		}
	}
	if out.LastVerified, _ = landing.LastVerification(steps); !out.LastVerified {
		out.TestedCommit = ""
	}
	if cfg.EnvFile != "" {
		out.EnvFile = cfg.EnvFile
		// The worktree's, as a step of the run reads it: the file's path
		// below the workspace, in the land's worktree.
		if rel, err := filepath.Rel(run.Workspace, cfg.EnvFile); err == nil && filepath.IsLocal(rel) {
			out.EnvFile = filepath.ToSlash(rel)
		}
		// The workspace picked the file (not the user): the
		// verification loads it, as a step does, only while its bytes
		// are the ones trusted.
		guard, err := d.store.RunEnvTrust(ctx, run.ID)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if guard != "" && guard == cfg.EnvFile {
			out.EnvGuarded = true
			switch rec, err := d.store.TrustedFile(ctx, run.Workspace, guard); {
			case err == nil:
				out.EnvSHA256 = rec.SHA256
			case !errors.Is(err, storage.ErrNotFound):
				d.fail(w, r, err)
				return
			}
		}
	}
	switch rec, err := d.store.TrustedFile(ctx, run.Workspace, filepath.Join(run.Workspace, config.WorkspaceConfig)); {
	case err == nil:
		out.ConfigSHA256 = rec.SHA256
	case !errors.Is(err, storage.ErrNotFound):
		d.fail(w, r, err)
		return
	}
	if q := r.URL.Query(); q.Get("push") != "" {
		verified, _ := strconv.ParseBool(q.Get("verified"))
		res := &api.LandResult{RunID: run.ID, Branch: run.Branch, BaseBranch: run.BaseBranch, Mode: landing.ModePush,
			Verified: verified, TestedCommit: q.Get("tested_commit"), Note: q.Get("note")}
		body, err := d.lander.PRBody(ctx, run, res)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		out.PRTitle, out.PRBody = body.Title(), body.Markdown()
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
	push := req.Mode == landing.ModePush
	switch {
	case !run.Status.Terminal():
		d.fail(w, r, api.Errorf(api.CodeConflict, "run %s is %s: it lands once it has ended", run.ID, run.Status))
		return
	case push && (req.Push == nil || req.Push.URL == "" || req.Push.Commit != req.Commit):
		d.fail(w, r, api.Errorf(api.CodeBadRequest, "a push record needs \"push\" with the url and the commit pushed"))
		return
	case push:
	case run.LandedCommit != "":
		d.fail(w, r, api.Errorf(api.CodeConflict, "run %s has landed already (as %s)", run.ID, run.LandedCommit))
		return
	case !isCommitID(req.Commit) || (req.TestedCommit != "" && !isCommitID(req.TestedCommit)):
		d.fail(w, r, api.Errorf(api.CodeBadRequest, "commit %q / tested_commit %q: give full commit ids", req.Commit, req.TestedCommit))
		return
	case !push && req.Mode != "fast-forward" && req.Mode != "merge" && req.Mode != "squash":
		d.fail(w, r, api.Errorf(api.CodeBadRequest, "mode %q: fast-forward, merge, squash or push", req.Mode))
		return
	}
	branch := run.Branch
	if branch == "" {
		branch = "loop/" + run.ID[:min(8, len(run.ID))]
	}
	payload := map[string]any{"run_id": run.ID, "branch": branch, "base_branch": run.BaseBranch, "commit": req.Commit,
		"mode": req.Mode, "verified": req.Verified, "tested_commit": req.TestedCommit}
	if push {
		// A push moves no base branch: no landed_commit, and as many as
		// the user makes (as the daemon's own land --push).
		payload["push"] = req.Push
		if req.PRCommand != nil {
			payload["pr_url"], payload["pr_command"] = req.PRURL, req.PRCommand
		}
	}
	err := d.store.Write(r.Context(), func(tx *storage.Tx) error {
		if push {
			return tx.RecordPushed(run.ID, payload)
		}
		return tx.RecordLandedOnce(run.ID, req.Commit, payload)
	})
	if errors.Is(err, storage.ErrConflict) {
		err = api.Errorf(api.CodeConflict, "run %s has landed already", run.ID)
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.log.Info("run landed in the user's clone", zap.String("run_id", run.ID), zap.String("mode", req.Mode),
		zap.String("commit", req.Commit), zap.Bool("verified", req.Verified))
	d.describe(w, r, run.ID, http.StatusOK)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// isCommitID reports whether s is a full hex object id (SHA-1 or SHA-256).
func isCommitID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
