package landing

import (
	"context"
	"errors"
	"fmt"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/storage"
)

// DiffStat is the stat of a run's change from one commit to another (as
// DiffRange finds them; none when to is ""): which files, how many lines.
func DiffStat(ctx context.Context, run storage.Run, iteration *int, from, to string) (api.DiffStat, error) {
	out := api.DiffStat{RunID: run.ID, Iteration: iteration, From: from, To: to, Files: []api.FileStat{}}
	if to == "" {
		return out, nil
	}
	st, err := git.Stat(ctx, run.Workspace, from, to)
	if err != nil {
		return api.DiffStat{}, err
	}
	out.FilesChanged, out.Insertions, out.Deletions = st.FilesChanged, st.Insertions, st.Deletions
	for _, f := range st.Files {
		out.Files = append(out.Files, api.FileStat(f))
	}
	return out, nil
}

// DiffRange finds the commits a diff compares, from the change ledger.
// One iteration: its implementation step's ledger commit against the
// previous ledger point (worktree runs: the previous iteration's commit,
// else the base commit, so commits the agent made itself are included; in
// place: the snapshot's parent). The whole run: the base commit against the
// run's branch (worktree), or the baseline snapshot refs/loop/<id>/0
// against the newest snapshot (in place). Both read commits and refs, never
// the worktree, so a diff works after the worktree is gone or cleaned. to
// is "" when nothing changed.
func (l *Lander) DiffRange(ctx context.Context, run storage.Run, iteration *int) (from, to string, err error) {
	steps, err := l.store.StepsLight(ctx, run.ID)
	if err != nil {
		return "", "", err
	}
	var changes []storage.Step // implementation steps that recorded a change, in order
	found := false
	maxIter := 0
	for _, st := range steps {
		if st.Phase != api.PhaseImplementation {
			continue
		}
		maxIter = max(maxIter, st.Iteration)
		if iteration != nil && st.Iteration == *iteration {
			found = true
		}
		if st.ChangeCommit != "" {
			changes = append(changes, st)
		}
	}
	dir := run.Workspace
	if len(changes) == 0 && run.Branch == "" {
		if _, err := git.TopLevel(ctx, dir); errors.Is(err, git.ErrNotRepository) {
			return "", "", api.Errorf(api.CodeConflict, "run %s has no change ledger: its workspace %s is not in a git repository", run.ID, dir)
		}
	}
	has := func(c string) bool { return git.CommitExists(ctx, dir, c) }
	missing := func(c string) error {
		return api.Errorf(api.CodeConflict, "commit %s of run %s is no longer in the repository at %s (was its branch deleted?)",
			shortCommit(c), run.ID, dir)
	}
	worktree := run.Isolation == "worktree"
	if iteration != nil {
		if !found {
			return "", "", api.Errorf(api.CodeNotFound, "run %s has no iteration %d (its iterations: 1 to %d)", run.ID, *iteration, maxIter)
		}
		for i, st := range changes {
			if st.Iteration != *iteration {
				continue
			}
			to = st.ChangeCommit
			if !has(to) {
				return "", "", missing(to)
			}
			switch {
			case worktree && i > 0 && has(changes[i-1].ChangeCommit):
				return changes[i-1].ChangeCommit, to, nil
			case worktree && i == 0 && has(run.BaseCommit):
				return run.BaseCommit, to, nil
			}
			from, err = git.FirstParent(ctx, dir, to)
			return from, to, err
		}
		return "", "", nil // the iteration changed nothing
	}
	if worktree && run.Branch != "" {
		if tip, err := git.Resolve(ctx, dir, "refs/heads/"+run.Branch); err == nil {
			to = tip
		}
	}
	if to == "" && len(changes) > 0 {
		to = changes[len(changes)-1].ChangeCommit
	}
	if to == "" {
		return "", "", nil // no branch and no ledger commit: nothing recorded as changed
	}
	if !has(to) {
		return "", "", missing(to)
	}
	baseline := ""
	if !worktree {
		baseline, _ = git.Resolve(ctx, dir, "refs/loop/"+run.ID+"/0")
	}
	switch {
	case baseline != "":
		from = baseline
	case run.BaseCommit != "" && has(run.BaseCommit):
		from = run.BaseCommit
	case len(changes) > 0:
		if from, err = git.FirstParent(ctx, dir, changes[0].ChangeCommit); err != nil {
			return "", "", err
		}
	default:
		return "", "", fmt.Errorf("run %s has no base commit to compare with", run.ID)
	}
	if from == to {
		return "", "", nil
	}
	return from, to, nil
}
