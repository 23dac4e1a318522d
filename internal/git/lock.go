package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// worktreeLocks are the lock files git takes in a linked worktree's own
// git directory while it checks out there: the index, and HEAD (a
// detached checkout or a switch back writes it).
var worktreeLocks = []string{"index.lock", "HEAD.lock"}

// ClearStaleLocks removes the lock files a git process killed mid-write
// left in the own git directory of the linked worktree at worktree
// (<common>/worktrees/<name>/index.lock): git refuses every later command
// that writes there until the lock is gone. A lock is stale when no
// process has it open and no git process works in that worktree; on a
// system without /proc nothing can tell, and nothing is removed. It never
// touches a main working tree's locks (the user's checkout): only a linked
// worktree's, and the caller passes only worktrees loopd made. It returns
// the locks it removed.
func ClearStaleLocks(ctx context.Context, worktree string) ([]string, error) {
	out, err := Cmd{Dir: worktree}.Output(ctx, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("find the git directory of %s: %w", worktree, err)
	}
	gitDir, common, ok := strings.Cut(out, "\n")
	if !ok {
		return nil, fmt.Errorf("git rev-parse in %s: unexpected output %q", worktree, out)
	}
	if filepath.Dir(filepath.Clean(gitDir)) != filepath.Join(filepath.Clean(common), "worktrees") {
		return nil, fmt.Errorf("%s is not a linked worktree (its git directory is %s): its locks are not loopd's to remove", worktree, gitDir)
	}
	var removed []string
	for _, name := range worktreeLocks {
		lock := filepath.Join(gitDir, name)
		before, err := os.Lstat(lock)
		if err != nil {
			continue
		}
		held, err := lockHeld(lock, []string{canonical(worktree), canonical(gitDir)})
		if err != nil || held {
			continue
		}
		// The same file as when it was judged stale: a git that started
		// since cannot have made a new one while it existed (git creates
		// its lock with O_EXCL), but a lock removed and made anew is not
		// this one.
		if now, err := os.Lstat(lock); err != nil || !os.SameFile(before, now) {
			continue
		}
		if err := os.Remove(lock); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("remove the stale %s: %w", lock, err)
		}
		removed = append(removed, lock)
	}
	return removed, nil
}

// lockHeld reports whether a process has lock open, or a git process
// works in one of dirs (between closing its lock and renaming it into
// place, git holds no descriptor of it). It reads /proc, and says held
// when it cannot.
func lockHeld(lock string, dirs []string) (bool, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true, err
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		return true, err
	}
	lock = canonical(lock)
	for _, p := range procs {
		pid := p.Name()
		if pid == "" || pid[0] < '0' || pid[0] > '9' {
			continue
		}
		base := filepath.Join("/proc", pid)
		if comm, err := os.ReadFile(filepath.Join(base, "comm")); err == nil && strings.TrimSpace(string(comm)) == "git" {
			if cwd, err := os.Readlink(filepath.Join(base, "cwd")); err == nil {
				for _, d := range dirs {
					if cwd == d || strings.HasPrefix(cwd, d+"/") {
						return true, nil
					}
				}
			}
		}
		fds, err := os.ReadDir(filepath.Join(base, "fd"))
		if err != nil {
			continue // gone, or another user's: it cannot write in loopd's worktree
		}
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join(base, "fd", fd.Name())); err == nil && target == lock {
				return true, nil
			}
		}
	}
	return false, nil
}
