package landing

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/storage"
)

// CleanRun removes the worktrees loopd made and recorded for run, which
// must have ended, after reconciling the records with git; its branch
// stays. What cannot be removed is listed as skipped, with the reason.
func (l *Lander) CleanRun(ctx context.Context, run storage.Run) (api.CleanResult, error) {
	if !run.Status.Terminal() {
		return api.CleanResult{}, api.Errorf(api.CodeConflict, "run %s is %s: its worktree is removed only once it has ended (loopctl stop %s)",
			run.ID, run.Status, shortID(run.ID))
	}
	if run.RepoURL != "" {
		res := api.CleanResult{Removed: []api.CleanedWorktree{}, Skipped: []api.CleanedWorktree{}}
		return res, l.cleanFleet(ctx, run, &res)
	}
	return l.clean(ctx, []string{run.ID})
}

// cleanFleet cleans a fleet run: its worktree is on the worker that ran
// it, which no other node can reach, so the clean is recorded (the run's
// worktree_state becomes "removed") and every worker removes, at its next
// sweep, its worktree of a cleaned run (docs/fleet.md, "Cleaning").
func (l *Lander) cleanFleet(ctx context.Context, run storage.Run, res *api.CleanResult) error {
	branch := run.Branch
	if branch == "" {
		branch = "loop/" + shortID(run.ID)
	}
	item := api.CleanedWorktree{RunID: run.ID, Worktree: filepath.Join("LOOPD_HOME", "worktrees", run.ID), Branch: branch, Worker: run.Worker}
	if run.WorktreeState == "removed" {
		item.Reason = "cleaned already"
		res.Skipped = append(res.Skipped, item)
		return nil
	}
	if item.Worker == "" {
		item.Worker = "(none: the run never ran)"
	}
	if err := l.store.Write(ctx, func(tx *storage.Tx) error { return tx.SetWorktreeState(run.ID, "removed") }); err != nil {
		return err
	}
	l.log.Info("fleet run cleaned: its worker removes its worktree", zap.String("run_id", run.ID), zap.String("worker", run.Worker))
	res.Removed = append(res.Removed, item)
	return nil
}

// CleanEnded removes the worktrees of every run that ended more than age
// ago (0: every ended run), as CleanRun does.
func (l *Lander) CleanEnded(ctx context.Context, age time.Duration) (api.CleanResult, error) {
	ids, err := l.store.EndedWorktreeRuns(ctx, l.store.Now()-age.Milliseconds())
	if err != nil {
		return api.CleanResult{}, err
	}
	res, err := l.clean(ctx, ids)
	if err != nil {
		return res, err
	}
	fleet, err := l.store.EndedFleetRuns(ctx, l.store.Now()-age.Milliseconds())
	if err != nil {
		return api.CleanResult{}, err
	}
	for _, run := range fleet {
		if err := l.cleanFleet(ctx, run, &res); err != nil {
			return api.CleanResult{}, err
		}
	}
	return res, nil
}

func (l *Lander) clean(ctx context.Context, ids []string) (api.CleanResult, error) {
	res := api.CleanResult{Removed: []api.CleanedWorktree{}, Skipped: []api.CleanedWorktree{}}
	defer l.disk.invalidate()
	for _, id := range ids {
		if err := l.cleanRun(ctx, id, &res); err != nil {
			return api.CleanResult{}, err
		}
	}
	return res, nil
}

// cleanRun removes one ended run's recorded worktrees.
func (l *Lander) cleanRun(ctx context.Context, runID string, res *api.CleanResult) error {
	// Before any removal, the records are brought in line with git: a
	// worktree removed by hand is marked gone, not removed again.
	l.Reconcile(ctx, runID)
	run, err := l.store.Run(ctx, runID)
	if err != nil {
		return err
	}
	objs, err := l.store.RunWorktrees(ctx, runID)
	if err != nil {
		return err
	}
	root := filepath.Join(l.home, "worktrees")
	for _, o := range objs {
		if o.RemovedAt != nil {
			continue
		}
		item := api.CleanedWorktree{RunID: runID, Worktree: o.Name, Branch: run.Branch, Gone: o.GoneAt != nil}
		skip := func(format string, args ...any) {
			item.Reason = fmt.Sprintf(format, args...)
			res.Skipped = append(res.Skipped, item)
		}
		// Read again now: a run resumed since it was listed works in
		// this worktree again.
		if !run.Status.Terminal() {
			skip("run is %s: its worktree is in use", run.Status)
			continue
		}
		if l.Landing(runID) {
			skip("a land of this run is under way: clean again when it has finished")
			continue
		}
		if run.Parent != "" {
			// A task run waits in its backlog's land queue, or may go back
			// to its agent: the land tests the combination in its worktree.
			if b, err := l.store.Run(ctx, run.Parent); err == nil && !b.Status.Terminal() {
				skip("it is a task run of backlog %s, which is %s: its land may need this worktree", shortID(b.ID), b.Status)
				continue
			}
		}
		if !within(root, o.Name) {
			// A record is trusted only for worktrees where loopd makes
			// them: a damaged or foreign row must not delete elsewhere.
			skip("not under %s: loopd removes only worktrees it made there", root)
			continue
		}
		if o.GoneAt == nil {
			if list, err := git.ListWorktrees(ctx, o.Repo); err == nil {
				if e, ok := entryAt(list, o.Name); ok && e.Branch != "" && e.Branch != run.Branch {
					skip("git has it on branch %s, not on the run's %s: left alone", e.Branch, run.Branch)
					continue
				}
			}
			files, err := git.TrackedChanges(ctx, o.Name)
			if err != nil {
				skip("%v", err)
				continue
			}
			if len(files) > 0 {
				skip("uncommitted changes in %s: commit them on %s, or remove it yourself with git worktree remove --force %s",
					strings.Join(files, ", "), run.Branch, o.Name)
				continue
			}
		}
		if git.RepoGone(o.Repo) {
			// The whole repository was deleted: git cannot remove the
			// worktree, and its directory (loopd's own, under root) would
			// otherwise stay on disk forever.
			if err := os.RemoveAll(o.Name); err != nil {
				skip("the repository %s is gone, and removing %s failed: %v", o.Repo, o.Name, err)
				continue
			}
		} else if err := git.RemoveWorktree(ctx, o.Repo, o.Name); err != nil {
			skip("%v", err)
			continue
		}
		if err := l.store.Write(ctx, func(tx *storage.Tx) error { return tx.MarkWorktreeRemoved(o) }); err != nil {
			return err
		}
		l.log.Info("worktree removed", zap.String("run_id", runID), zap.String("worktree", o.Name), zap.Bool("was_gone", item.Gone))
		res.Removed = append(res.Removed, item)
	}
	return nil
}

// Reconcile compares the worktrees loopd recorded (of one run, or
// of every run when runID is "") with `git worktree list --porcelain` of
// their repositories, and marks those removed by someone else as gone. It
// never changes git: a stale entry stays until `loopctl clean`. Problems
// are logged: a repository that cannot be read now is read next time.
func (l *Lander) Reconcile(ctx context.Context, runID string) {
	objs, err := l.store.LiveWorktrees(ctx, runID)
	if err != nil {
		l.log.Error("reconcile worktrees", zap.Error(err))
		return
	}
	lists := map[string][]git.WorktreeEntry{}
	for _, o := range objs {
		list, ok := lists[o.Repo]
		if !ok && !git.RepoGone(o.Repo) {
			var err error
			if list, err = git.ListWorktrees(ctx, o.Repo); err != nil {
				l.log.Warn("reconcile worktrees: cannot list", zap.String("repo", o.Repo), zap.Error(err))
				continue
			}
			lists[o.Repo] = list
		}
		if git.WorktreePresent(list, o.Name) {
			continue
		}
		if err := l.store.Write(ctx, func(tx *storage.Tx) error { return tx.MarkWorktreeGone(o) }); err != nil {
			l.log.Error("reconcile worktrees: record gone", zap.String("worktree", o.Name), zap.Error(err))
			continue
		}
		l.log.Warn("a run's worktree was removed by someone else; its branch keeps its commits",
			zap.String("run_id", o.RunID), zap.String("worktree", o.Name))
	}
}

// NoticeGoneWorktree reconciles a worktree run whose directory, or whose
// repository's entry for it, has disappeared since loopd last looked (a
// read and a stat: cheap enough for every status), so that status says
// "gone" at once.
func (l *Lander) NoticeGoneWorktree(ctx context.Context, run storage.Run) storage.Run {
	if run.Worktree == "" || run.WorktreeState != "present" || !worktreeBroken(run.Worktree) {
		return run
	}
	l.Reconcile(ctx, run.ID)
	if fresh, err := l.store.Run(ctx, run.ID); err == nil {
		return fresh
	}
	return run
}

// worktreeBroken reports whether a worktree's directory is gone, or the
// git directory its .git file points to is (the repository was deleted or
// its entry pruned).
func worktreeBroken(worktree string) bool {
	b, err := os.ReadFile(filepath.Join(worktree, ".git"))
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if err != nil || !ok {
		return false // not ours to judge: the full reconcile decides
	}
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(worktree, gitdir)
	}
	_, err = os.Stat(gitdir)
	return errors.Is(err, fs.ErrNotExist)
}

func entryAt(list []git.WorktreeEntry, path string) (git.WorktreeEntry, bool) {
	for _, e := range list {
		if filepath.Clean(e.Path) == filepath.Clean(path) {
			return e, true
		}
	}
	return git.WorktreeEntry{}, false
}

// within reports whether path is strictly inside dir.
func within(dir, path string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// Disk measure of the run worktrees: a walk of every present worktree,
// summing allocated blocks. A worktree can hold millions of files (a
// node_modules, a build tree), so the walk has a time budget, and its
// result is cached: `daemon status` never waits more than the budget, and
// repeated calls within diskCacheFor cost nothing.
const (
	diskBudget   = 2 * time.Second
	diskCacheFor = 30 * time.Second
)

type diskCache struct {
	mu   sync.Mutex
	at   time.Time
	last api.WorktreeDisk
}

func (c *diskCache) invalidate() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

// WorktreeDisk measures (or returns the cached measure of) the disk the
// present run worktrees take.
func (l *Lander) WorktreeDisk(ctx context.Context) *api.WorktreeDisk {
	c := &l.disk
	c.mu.Lock() // one walk at a time; others wait for it and share it
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < diskCacheFor {
		out := c.last
		return &out
	}
	objs, err := l.store.LiveWorktrees(ctx, "")
	if err != nil {
		l.log.Warn("measure worktrees", zap.Error(err))
		return nil
	}
	deadline := time.Now().Add(diskBudget)
	out := api.WorktreeDisk{Complete: true, MeasuredAt: api.Time{Time: time.Now()}}
	for _, o := range objs {
		fi, err := os.Stat(o.Name)
		if err != nil || !fi.IsDir() {
			continue
		}
		out.Count++
		n, complete := diskUsage(o.Name, deadline)
		out.Bytes += n
		out.Complete = out.Complete && complete
	}
	c.at, c.last = time.Now(), out
	return &out
}

// diskUsage sums the allocated size of the files under dir, stopping at
// deadline (complete is then false). Hard links are counted once per walk.
func diskUsage(dir string, deadline time.Time) (bytes int64, complete bool) {
	seen := map[[2]uint64]bool{}
	n := 0
	complete = true
	_ = filepath.WalkDir(dir, func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skip it
		}
		if n++; n%1024 == 0 && time.Now().After(deadline) {
			complete = false
			return fs.SkipAll
		}
		info, err := de.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			if st.Nlink > 1 {
				key := [2]uint64{uint64(st.Dev), st.Ino}
				if seen[key] {
					return nil
				}
				seen[key] = true
			}
			bytes += st.Blocks * 512
			return nil
		}
		bytes += info.Size()
		return nil
	})
	return bytes, complete
}
