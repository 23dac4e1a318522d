package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/storage"
)

// judgeLand decides whether a land's verification passed, as a
// verification step of the run would be decided: its exit code, then the
// test results in its output (logPath) and in verify_report (when written
// since started): failing tests fail it even when the commands exited 0.
func (r *runner) judgeLand(exitCode int, logPath string, started time.Time) (passed bool, why string) {
	st := &storage.Step{Phase: api.PhaseVerification, Status: api.StepSucceeded, LogPath: logPath, StartedAt: started.UnixMilli()}
	if exitCode != 0 {
		st.Status = api.StepFailed
	}
	if exitCode >= 0 {
		st.ExitCode = &exitCode
	}
	// With verify_baseline the run's own verifications ignored the tests
	// failing before it; the combination is judged alike, or a land of
	// a run that passed would be refused for the same old failures.
	r.ignorePreExisting(st, r.readTests(st))
	r.redactStep(st) // why is shown and logged: no secret in a test name
	if st.Status == api.StepSucceeded {
		return true, ""
	}
	if st.Error != "" {
		return false, st.Error
	}
	return false, fmt.Sprintf("exit code %d", exitCode)
}

var _ landing.Verifier = (*Scheduler)(nil)

// LandVerification is how `loopctl land` re-runs a run's verify_command
// on the combination of the run's branch and a base branch that moved, in
// worktree dir: the same commands in the same environment a verification
// step of the run gets (the daemon's environment, the run's env_file read
// afresh, the LOOP_* variables), judged as such a step is. A workspace
// that is a subdirectory of its repository runs its commands in the same
// subdirectory of the worktree, as the run's steps do. iteration is the
// run's last iteration. The run's env_file is loaded as a step loads it:
// only while its content is still the one the user trusted (else a
// *landing.UntrustedEnvError).
func (s *Scheduler) LandVerification(ctx context.Context, run storage.Run, dir string, iteration int) (landing.Verification, error) {
	cfg, _, err := decodeFrozen(run)
	if err != nil {
		return landing.Verification{}, err
	}
	r := &runner{s: s, id: run.ID, run: run, cfg: cfg, log: s.opts.Logger.Named("land").With(zap.String("run", run.ID)),
		secrets: secretsOf(cfg), workdir: dir}
	if r.envTrust, err = s.store.RunEnvTrust(ctx, run.ID); err != nil {
		return landing.Verification{}, err
	}
	var env []string
	if r.fromGit() && !git.IsWorktree(dir) {
		// A fleet run's env file is its worktree's, on its worker: this
		// node has none, and refuses the land (worktree_gone) when it
		// would have to verify.
		env = withoutFleetCredentials(os.Environ())
	} else {
		env, err = r.envWithFile()
	}
	if err != nil {
		err = fmt.Errorf("run %s: %w", run.ID, err)
		if _, ok := errors.AsType[*untrustedEnvError](err); ok {
			return landing.Verification{}, &landing.UntrustedEnvError{Err: err}
		}
		return landing.Verification{}, err
	}
	if prefix, err := (git.Cmd{Dir: run.Workspace}).Output(ctx, "rev-parse", "--show-prefix"); err == nil && prefix != "" {
		dir = filepath.Join(dir, filepath.FromSlash(prefix))
	}
	// verify_report names a file of the checkout: the land's verification
	// writes it in the worktree.
	if rel, err := filepath.Rel(run.Workspace, cfg.VerifyReport); cfg.VerifyReport != "" && err == nil && !strings.HasPrefix(rel, "..") {
		r.cfg.VerifyReport = filepath.Join(dir, rel)
	}
	if p := pipelineOf(cfg); p.Baseline {
		// The baseline the combination's failures are matched against.
		base, err := s.store.LastEnded(ctx, run.ID, api.PhaseBaseline)
		switch {
		case err == nil:
			r.hist = NewHistory([]storage.Step{base}, p)
		case !errors.Is(err, storage.ErrNotFound):
			return landing.Verification{}, err
		}
	}
	st := &storage.Step{Phase: api.PhaseVerification, Iteration: iteration}
	// LOOP_WORKSPACE names where the commands run: the worktree (the
	// last value of a variable is the one a process sees).
	env = append(r.stepEnv(env, st, ""), "LOOP_WORKSPACE="+dir)
	return landing.Verification{Commands: cfg.VerifyCommands, Env: env, Dir: dir, Judge: r.judgeLand}, nil
}
