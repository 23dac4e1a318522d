package landing

import (
	"context"
	"strconv"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/humantime"
	"github.com/loopd/loopd/internal/storage"
)

// CheckLandRequest refuses a land request that asks for what its sender
// may not have, or for options that do not go together; dashboard says
// it came with a dashboard session only. Nothing has been resolved or
// changed yet.
func CheckLandRequest(req api.LandRequest, dashboard bool) error {
	switch {
	// The dashboard's Land button never skips verification: a session
	// (perhaps another user's page driving it) must not fast-forward
	// unverified agent code into the user's checkout. Only loopctl land
	// --no-verify (or the bearer token) may.
	case req.NoVerify && dashboard:
		return api.Errorf(api.CodeForbidden, "refused: the dashboard lands only verified work; "+
			"skipping verification needs `loopctl land --no-verify`")
	// A push sends the user's code to a remote with the user's
	// credentials and runs pr_command: only loopctl land --push (or the
	// bearer token) may ask for one, never a dashboard session.
	case req.Push && dashboard:
		return api.Errorf(api.CodeForbidden, "refused: the dashboard does not push; use `loopctl land RUN --push`")
	case req.Push && (req.Squash || req.Message != ""):
		return api.Errorf(api.CodeBadRequest, "--push pushes the run's branch as it is: --squash and --message apply to a land into your checkout only")
	case !req.Push && req.Remote != "":
		return api.Errorf(api.CodeBadRequest, "a remote (%q) is only used with --push", req.Remote)
	}
	return nil
}

// LandRequest does what a checked land request asks: a push of the run's
// branch, or a land into the user's checkout. progress receives what is
// being done, in words.
func (l *Lander) LandRequest(ctx context.Context, run storage.Run, req api.LandRequest, progress func(string)) (*api.LandResult, error) {
	if req.Push {
		return l.Push(ctx, run, PushOptions{Remote: req.Remote, NoVerify: req.NoVerify, Progress: progress})
	}
	return l.Land(ctx, run, LandOptions{Squash: req.Squash, Message: req.Message, NoVerify: req.NoVerify, Progress: progress})
}

// Clean removes the worktrees `loopctl clean` names: one run's (req.Run,
// resolved in req.Workspace, which the caller has made canonical) or
// every ended run's (older than req.OlderThan), then, with req.Branches,
// their branches. Only worktrees loopd created and recorded go, after
// the records are reconciled with git.
func (l *Lander) Clean(ctx context.Context, req api.CleanRequest) (api.CleanResult, error) {
	var age time.Duration
	switch {
	case req.Run != "" && req.Ended:
		return api.CleanResult{}, api.Errorf(api.CodeBadRequest, "give a RUN or --ended, not both")
	case req.Run != "" && req.OlderThan != "":
		return api.CleanResult{}, api.Errorf(api.CodeBadRequest, "--older-than goes with --ended")
	case req.Run == "" && !req.Ended:
		return api.CleanResult{}, api.Errorf(api.CodeBadRequest, "clean needs a RUN or --ended")
	case req.OlderThan != "":
		var err error
		if age, err = humantime.Parse(req.OlderThan); err != nil || age < 0 {
			return api.CleanResult{}, api.Errorf(api.CodeBadRequest, "--older-than %q: give a duration such as 7d or 12h", req.OlderThan)
		}
	}
	var ids []string // the one run cleaned, when a RUN was given
	var res api.CleanResult
	if req.Run != "" {
		run, err := l.store.ResolveRun(ctx, req.Run, req.Workspace)
		if err != nil {
			return api.CleanResult{}, err
		}
		ids = []string{run.ID}
		if res, err = l.CleanRun(ctx, run); err != nil {
			return api.CleanResult{}, err
		}
	} else {
		var err error
		if res, err = l.CleanEnded(ctx, age); err != nil {
			return api.CleanResult{}, err
		}
	}
	if req.Branches {
		// After the worktrees: a branch checked out in one cannot go.
		var err error
		if res.Branches, err = l.CleanBranches(ctx, ids, age); err != nil {
			return api.CleanResult{}, err
		}
	}
	return res, nil
}

// ParseIteration reads the iteration a diff asks for: nil for the whole
// run (""), else a number from 1.
func ParseIteration(s string) (*int, error) {
	if s == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return nil, api.Errorf(api.CodeBadRequest, "iteration must be a number from 1, got %q", s)
	}
	return &n, nil
}
