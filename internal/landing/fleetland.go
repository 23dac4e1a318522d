package landing

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/storage"
)

// A fleet run is landed by loopctl itself, in the user's clone (loopctl
// land through LOOPD_URL, docs/fleet.md): the API node need not see the
// clone. LocalLand and RecordLanded are the API node's side of it: what
// the land's verification runs (from the run's frozen config, as trusted
// when the run was created), and the record of the land. Who may ask is
// the daemon's decision.

// LocalPush is what a push from the user's clone has found, for the body
// of its pull request.
type LocalPush struct {
	Verified     bool
	TestedCommit string
	Note         string
}

// LocalLand is what loopctl needs to land the fleet run run in the user's
// clone: the verification and its env file as trusted, the last
// iteration and what it tested, and, when push is not nil, the pull
// request's title and body.
func (l *Lander) LocalLand(ctx context.Context, run storage.Run, push *LocalPush) (api.LocalLand, error) {
	var cfg struct {
		VerifyCommands []string `json:"verify_command"`
		EnvFile        string   `json:"env_file"`
	}
	if err := json.Unmarshal([]byte(run.Config), &cfg); err != nil {
		return api.LocalLand{}, err
	}
	steps, err := l.store.StepsLight(ctx, run.ID)
	if err != nil {
		return api.LocalLand{}, err
	}
	out := api.LocalLand{VerifyCommands: cfg.VerifyCommands}
	for _, st := range steps {
		out.Iteration = max(out.Iteration, st.Iteration)
		if st.ChangeCommit != "" {
			out.TestedCommit = st.ChangeCommit
		}
	}
	if out.LastVerified, _ = LastVerification(steps); !out.LastVerified {
		out.TestedCommit = ""
	}
	if cfg.EnvFile != "" {
		if err := l.localEnvFile(ctx, run, cfg.EnvFile, &out); err != nil {
			return api.LocalLand{}, err
		}
	}
	switch rec, err := l.store.TrustedFile(ctx, run.Workspace, filepath.Join(run.Workspace, config.WorkspaceConfig)); {
	case err == nil:
		out.ConfigSHA256 = rec.SHA256
	case !errors.Is(err, storage.ErrNotFound):
		return api.LocalLand{}, err
	}
	if push != nil {
		res := &api.LandResult{RunID: run.ID, Branch: run.Branch, BaseBranch: run.BaseBranch, Mode: ModePush,
			Verified: push.Verified, TestedCommit: push.TestedCommit, Note: push.Note}
		body, err := l.PRBody(ctx, run, res)
		if err != nil {
			return api.LocalLand{}, err
		}
		out.PRTitle, out.PRBody = body.Title(), body.Markdown()
	}
	return out, nil
}

// localEnvFile names the run's env file as a step of it reads it: its
// path below the workspace, in the land's worktree. The workspace picked
// the file (not the user): the verification loads it, as a step does,
// only while its bytes are the ones trusted (EnvGuarded, EnvSHA256).
func (l *Lander) localEnvFile(ctx context.Context, run storage.Run, envFile string, out *api.LocalLand) error {
	out.EnvFile = envFile
	if rel, err := filepath.Rel(run.Workspace, envFile); err == nil && filepath.IsLocal(rel) {
		out.EnvFile = filepath.ToSlash(rel)
	}
	guard, err := l.store.RunEnvTrust(ctx, run.ID)
	if err != nil || guard == "" || guard != envFile {
		return err
	}
	out.EnvGuarded = true
	switch rec, err := l.store.TrustedFile(ctx, run.Workspace, guard); {
	case err == nil:
		out.EnvSHA256 = rec.SHA256
	case !errors.Is(err, storage.ErrNotFound):
		return err
	}
	return nil
}

// RecordLanded records a land loopctl made in the user's clone, as the
// daemon's own land records one: landed_commit and RUN_LANDED (a push:
// RUN_LANDED alone, as many as the user makes). A run landed already is
// a conflict; a record that does not hold together is a bad request.
func (l *Lander) RecordLanded(ctx context.Context, run storage.Run, req api.LandedRequest) error {
	push := req.Mode == ModePush
	switch {
	case !run.Status.Terminal():
		return api.Errorf(api.CodeConflict, "run %s is %s: it lands once it has ended", run.ID, run.Status)
	case push && (req.Push == nil || req.Push.URL == "" || req.Push.Commit != req.Commit):
		return api.Errorf(api.CodeBadRequest, "a push record needs \"push\" with the url and the commit pushed")
	case push:
	case run.LandedCommit != "":
		return api.Errorf(api.CodeConflict, "run %s has landed already (as %s)", run.ID, run.LandedCommit)
	case !isCommitID(req.Commit) || (req.TestedCommit != "" && !isCommitID(req.TestedCommit)):
		return api.Errorf(api.CodeBadRequest, "commit %q / tested_commit %q: give full commit ids", req.Commit, req.TestedCommit)
	case !push && req.Mode != "fast-forward" && req.Mode != "merge" && req.Mode != "squash":
		return api.Errorf(api.CodeBadRequest, "mode %q: fast-forward, merge, squash or push", req.Mode)
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
	err := l.store.Write(ctx, func(tx *storage.Tx) error {
		if push {
			return tx.RecordPushed(run.ID, payload)
		}
		return tx.RecordLandedOnce(run.ID, req.Commit, payload)
	})
	if errors.Is(err, storage.ErrConflict) {
		return api.Errorf(api.CodeConflict, "run %s has landed already", run.ID)
	}
	if err != nil {
		return err
	}
	l.log.Info("run landed in the user's clone", zap.String("run_id", run.ID), zap.String("mode", req.Mode),
		zap.String("commit", req.Commit), zap.Bool("verified", req.Verified))
	return nil
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
