package scheduler

import (
	"fmt"

	"github.com/loopd/loopd/internal/api"
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
}

// LandVerificationOf builds run's LandVerification for the directory dir
// (the run's worktree). iteration is the run's last iteration.
func LandVerificationOf(run storage.Run, dir string, iteration int) (LandVerification, error) {
	cfg, _, err := decodeFrozen(run)
	if err != nil {
		return LandVerification{}, err
	}
	run.Workspace = dir // LOOP_WORKSPACE: where the commands run
	r := &runner{id: run.ID, run: run, cfg: cfg}
	env, err := r.envWithFile()
	if err != nil {
		return LandVerification{}, fmt.Errorf("run %s: %w", run.ID, err)
	}
	st := &storage.Step{Phase: api.PhaseVerification, Iteration: iteration}
	return LandVerification{Commands: cfg.VerifyCommands, Env: r.stepEnv(env, st, "")}, nil
}

// LastVerification reports whether a run's last commit was verified: its
// last verification step passed and no implementation step after it
// changed anything. ran is false when the run never verified anything.
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
