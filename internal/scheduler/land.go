package scheduler

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/storage"
)

// LandVerification is how `loopctl land` re-runs a run's verify_command on
// the combination of the run's branch and a base branch that moved: the
// same commands in the same environment a verification step of the run
// gets (the daemon's environment, the run's env_file read afresh, the
// LOOP_* variables), in dir.
type LandVerification struct {
	Commands []string // verify_command, in order; none: the run has no verification
	Env      []string
	Dir      string // where the commands run: the worktree, or its subdirectory the workspace is

	r *runner // judges the outcome as a verification step of the run is judged
}

// Judge decides whether the land's verification passed, as a verification
// step of the run would be decided: its exit code, then the test results
// in its output (logPath) and in verify_report (when written since
// started): failing tests fail it even when the commands exited 0.
func (lv LandVerification) Judge(exitCode int, logPath string, started time.Time) (passed bool, why string) {
	st := &storage.Step{Phase: api.PhaseVerification, Status: api.StepSucceeded, LogPath: logPath, StartedAt: started.UnixMilli()}
	if exitCode != 0 {
		st.Status = api.StepFailed
	}
	if lv.r != nil {
		lv.r.readTests(st)
		lv.r.redactStep(st) // why is shown and logged: no secret in a test name
	}
	if st.Status == api.StepSucceeded {
		return true, ""
	}
	if st.Error != "" {
		return false, st.Error
	}
	return false, fmt.Sprintf("exit code %d", exitCode)
}

// LandVerification builds run's LandVerification in worktree dir; a
// workspace that is a subdirectory of its repository runs its commands in
// the same subdirectory of the worktree, as the run's steps do. iteration
// is the run's last iteration. The run's env_file is loaded as a step
// loads it: only while its content is still the one the user trusted.
func (s *Scheduler) LandVerification(ctx context.Context, run storage.Run, dir string, iteration int) (LandVerification, error) {
	cfg, _, err := decodeFrozen(run)
	if err != nil {
		return LandVerification{}, err
	}
	r := &runner{s: s, id: run.ID, run: run, cfg: cfg, log: s.opts.Logger.Named("land").With(zap.String("run", run.ID)),
		secrets: secretsOf(cfg)}
	if r.envTrust, err = s.store.RunEnvTrust(ctx, run.ID); err != nil {
		return LandVerification{}, err
	}
	env, err := r.envWithFile()
	if err != nil {
		return LandVerification{}, fmt.Errorf("run %s: %w", run.ID, err)
	}
	if prefix, err := (git.Cmd{Dir: run.Workspace}).Output(ctx, "rev-parse", "--show-prefix"); err == nil && prefix != "" {
		dir = filepath.Join(dir, filepath.FromSlash(prefix))
	}
	// verify_report names a file of the checkout: the land's verification
	// writes it in the worktree.
	if rel, err := filepath.Rel(run.Workspace, cfg.VerifyReport); cfg.VerifyReport != "" && err == nil && !strings.HasPrefix(rel, "..") {
		r.cfg.VerifyReport = filepath.Join(dir, rel)
	}
	st := &storage.Step{Phase: api.PhaseVerification, Iteration: iteration}
	// LOOP_WORKSPACE names where the commands run: the worktree (the
	// last value of a variable is the one a process sees).
	env = append(r.stepEnv(env, st, ""), "LOOP_WORKSPACE="+dir)
	return LandVerification{Commands: cfg.VerifyCommands, Env: env, Dir: dir, r: r}, nil
}

// LastVerification reports whether a run's last commit was verified: its
// last verification step passed and no implementation step after it
// changed anything; seq is that verification step's (0 when there is none).
func LastVerification(steps []storage.Step) (passed bool, seq int) {
	for i := len(steps) - 1; i >= 0; i-- {
		st := &steps[i]
		switch st.Phase {
		case api.PhaseImplementation:
			if st.ChangeCommit != "" || st.Status == api.StepRunning {
				return false, 0 // changed after the last verification: untested
			}
		case api.PhaseVerification:
			return st.Status == api.StepSucceeded, st.Seq
		}
	}
	return false, 0
}

// IsUntrustedEnv reports whether err is a run's env_file that changed since
// the user trusted it (or was never trusted).
func IsUntrustedEnv(err error) bool {
	var ue *untrustedEnvError
	return errors.As(err, &ue)
}
