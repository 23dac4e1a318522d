package git

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Mirrors are a fleet worker's copies of the repositories its runs come
// from: one bare mirror per repository URL under Dir, cloned once and
// fetched when a run needs a commit it lacks, and a linked worktree of it
// per run (docs/fleet.md, "Workspaces from git").
//
// Several runs of one repository on one worker share its mirror; every
// command that writes it (clone, fetch, worktree add, prune) runs under
// the mirror's lock, a flock on <Dir>/<key>.lock, so that two runs never
// fetch into it, or add a worktree to it, at once (git's own ref locks
// make one of two concurrent fetches fail instead of wait).
type Mirrors struct {
	Dir string
}

// mirrorKey names url's mirror: a hash, since a URL holds characters a
// file name cannot (and may hold a user name).
func mirrorKey(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:12])
}

// Path is where url's mirror is (it may not exist yet).
func (m Mirrors) Path(url string) string {
	return filepath.Join(m.Dir, mirrorKey(url)+".git")
}

// lock takes url's mirror lock, waiting for it as long as ctx allows.
func (m Mirrors) lock(ctx context.Context, url string) (unlock func(), err error) {
	if err := os.MkdirAll(m.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the mirrors directory: %w", err)
	}
	path := filepath.Join(m.Dir, mirrorKey(url)+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the mirror lock: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil // closing releases the flock
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("wait for the mirror lock %s: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// hasCommit reports whether the repository at gitDir holds commit.
func hasCommit(ctx context.Context, gitDir, commit string) bool {
	_, err := Cmd{Dir: gitDir}.Run(ctx, "cat-file", "-e", commit+"^{commit}")
	return err == nil
}

// ensure makes url's mirror exist, under its lock: cloned into a
// temporary directory and renamed into place, so that a worker killed in
// the middle of a clone leaves no half mirror that would later look
// complete. The mirror then fetches the remote's branches as
// remote-tracking refs (refs/remotes/origin/*), not onto its own
// branches, as a plain --mirror would: a fetch must never move (or, with
// prune, delete) a run's branch that a worktree of it has checked out.
func (m Mirrors) ensure(ctx context.Context, url string) (string, error) {
	path := m.Path(url)
	if _, err := os.Stat(filepath.Join(path, "HEAD")); err == nil {
		return path, nil
	}
	tmp := path + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("remove a half-made mirror: %w", err)
	}
	if _, err := (Cmd{Dir: m.Dir, Group: true}).Run(ctx, "clone", "--mirror", "--quiet", "--", url, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("mirror %s: %w", url, err)
	}
	c := Cmd{Dir: tmp}
	for _, args := range [][]string{
		{"config", "remote.origin.mirror", "false"},
		{"config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"},
		// A mirror is never committed in by hand; git's automatic gc
		// would run in the background of a worker's fetch otherwise.
		{"config", "gc.auto", "0"},
	} {
		if _, err := c.Run(ctx, args...); err != nil {
			_ = os.RemoveAll(tmp)
			return "", err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("put the mirror of %s in place: %w", url, err)
	}
	return path, nil
}

// fetch brings the mirror's remote-tracking refs up to date: every
// branch of the remote, the run branches other workers pushed included.
func fetch(ctx context.Context, mirror, url string) error {
	if _, err := (Cmd{Dir: mirror, Group: true}).Run(ctx, "fetch", "--quiet", "--prune", "origin"); err != nil {
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	return nil
}

// RunWorktree is a run's worktree from a repository URL.
type RunWorktree struct {
	URL    string // the repository (the run's repo_url)
	Path   string // where the worktree goes
	Branch string // the run's branch, loop/<short-id>
	// Start is the commit the worktree's branch starts at: the run's
	// base commit, or after a takeover the last commit pushed to Branch
	// (the worker that had the run may have committed more, never
	// pushed: that is lost by design).
	Start string
}

// AddRunWorktree adds w's worktree from the worker's mirror of w.URL: the
// mirror is cloned when missing and fetched when it lacks w.Start, then
// w.Branch is set to w.Start and checked out at w.Path. A worktree
// already at w.Path (this worker ran the run before) is reset to
// w.Start, with everything it had that was not committed removed: on
// this worker's disk could be work another worker has since redone. It
// returns the mirror's path. Safe to repeat after a crash at any point.
func (m Mirrors) AddRunWorktree(ctx context.Context, w RunWorktree) (string, error) {
	unlock, err := m.lock(ctx, w.URL)
	if err != nil {
		return "", err
	}
	defer unlock()
	mirror, err := m.ensure(ctx, w.URL)
	if err != nil {
		return "", err
	}
	if !hasCommit(ctx, mirror, w.Start) {
		if err := fetch(ctx, mirror, w.URL); err != nil {
			return "", err
		}
		if !hasCommit(ctx, mirror, w.Start) {
			return "", fmt.Errorf("commit %s is not in %s (fetched just now): was it pushed, or the branch holding it deleted?", w.Start, w.URL)
		}
	}
	c := Cmd{Dir: mirror}
	if IsWorktree(w.Path) {
		wt := Cmd{Dir: w.Path}
		for _, args := range [][]string{
			{"checkout", "--quiet", "--force", "-B", w.Branch, w.Start},
			{"clean", "-q", "-d", "-f", "-f", "-x"},
		} {
			if _, err := wt.Run(ctx, args...); err != nil {
				return "", err
			}
		}
		return mirror, nil
	}
	// A worktree removed by hand (or by a crash before it was complete)
	// is still registered in the mirror: git would refuse the path and
	// the branch while it is.
	if _, err := c.Run(ctx, "worktree", "prune"); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(w.Path), 0o700); err != nil {
		return "", fmt.Errorf("create worktree parent: %w", err)
	}
	if _, err := c.Run(ctx, "worktree", "add", "--quiet", "--force", "-B", w.Branch, w.Path, w.Start); err != nil {
		return "", err
	}
	return mirror, nil
}

// RemoveRunWorktree removes a run's worktree at path from the worker's
// mirror of url, under the mirror's lock (a run of the same repository
// may be adding its own), then the run's branch in the mirror: the
// branch's home is the repository, where the run pushed it; the mirror's
// copy is only the worktree's. A path that is not a worktree of that
// mirror is left alone (loopd removes only what it made), and so is a
// worktree whose .git file is missing: what is there was not made by
// AddRunWorktree, or was made only in part.
func (m Mirrors) RemoveRunWorktree(ctx context.Context, url, path, branch string) error {
	unlock, err := m.lock(ctx, url)
	if err != nil {
		return err
	}
	defer unlock()
	mirror := m.Path(url)
	common, err := Cmd{Dir: path}.Output(ctx, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return fmt.Errorf("%s is not a worktree: %w", path, err)
	}
	if !sameDir(common, mirror) {
		return fmt.Errorf("%s is a worktree of %s, not of the mirror %s of %s: left alone", path, common, mirror, url)
	}
	if err := RemoveWorktree(ctx, mirror, path); err != nil {
		return err
	}
	c := Cmd{Dir: mirror}
	if _, err := c.Run(ctx, "worktree", "prune"); err != nil {
		return err
	}
	if branch != "" {
		if _, err := c.Run(ctx, "rev-parse", "-q", "--verify", "refs/heads/"+branch); err == nil {
			if _, err := c.Run(ctx, "update-ref", "-d", "refs/heads/"+branch); err != nil {
				return err
			}
		}
	}
	return nil
}

// sameDir reports whether a and b name one directory.
func sameDir(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
