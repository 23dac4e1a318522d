package scheduler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/storage"
)

// A fleet worker's worktrees are its own: no other node can remove them.
// So each worker sweeps LOOPD_HOME/worktrees itself (docs/fleet.md,
// "Cleaning"): at its first claim scan (a worker that returns after its
// runs were taken over) and every lease TTL after, it removes the
// worktree, and the run's branch in its mirror, of every run it does
// not hold whose worktree is no longer its to keep:
//   - the run was cleaned (loopctl clean marks a fleet run's worktree
//     removed; the worker that has it removes it), or
//   - another worker holds the run, or last held it (it was taken over
//     from this one, then perhaps ended there).
//
// A run this worker holds is never swept: its worktree may be a live
// step's. The sweep runs in the claim loop, so no claim of this worker
// starts a run in a worktree being removed. A run this worker last held
// that has not been cleaned keeps its worktree (it may come back here,
// and may have a commit whose push failed).

// sweepWorktrees removes the worktrees described above, once per lease
// TTL.
func (s *Scheduler) sweepWorktrees(ctx context.Context) {
	if time.Since(s.lease.swept) < s.lease.f.TTL {
		return
	}
	s.lease.swept = time.Now()
	root := filepath.Join(s.opts.Home, "worktrees")
	dirs, err := os.ReadDir(root)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("sweep worktrees: cannot list them", zap.String("dir", root), zap.Error(err))
		}
		return
	}
	me := s.lease.f.WorkerID
	mirrors := git.Mirrors{Dir: filepath.Join(s.opts.Home, "mirrors")}
	for _, d := range dirs {
		id := d.Name()
		if !d.IsDir() || s.holds(id) {
			continue
		}
		run, err := s.store.Run(ctx, id)
		if errors.Is(err, storage.ErrNotFound) {
			continue // not a run of this fleet: not ours to judge
		}
		if err != nil {
			s.log.Warn("sweep worktrees: read the run", zap.String("run", id), zap.Error(err))
			return // the store is unreachable: try at the next sweep
		}
		var why string
		switch {
		case run.RepoURL == "":
			continue
		case run.Status.Terminal() && run.WorktreeState == "removed":
			why = "the run was cleaned"
		case run.Worker != "" && run.Worker != me:
			why = "the run is held, or was last held, by worker " + run.Worker
		default:
			continue
		}
		branch := run.Branch
		if branch == "" {
			branch = "loop/" + shortOf(id)
		}
		path := filepath.Join(root, id)
		// Checked again under the mirror's lock would not help: the claim
		// loop is the only place a run of this worker starts, and it is
		// here.
		if err := mirrors.RemoveRunWorktree(ctx, run.RepoURL, path, branch); err != nil {
			s.log.Warn("sweep worktrees: left a worktree", zap.String("run", id), zap.String("worktree", path), zap.Error(err))
			continue
		}
		s.log.Info("removed a fleet run's worktree", zap.String("run", id), zap.String("worktree", path), zap.String("why", why))
	}
}

// holds reports whether this worker holds run id's lease or runs it.
func (s *Scheduler) holds(id string) bool {
	if _, ok := s.lease.epoch(id); ok {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.active[id]
	return ok
}
