package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Repo describes the repository holding a workspace, as loopd needs it to
// start a worktree run.
type Repo struct {
	TopLevel  string // the working tree's top-level directory
	CommonDir string // the repository's common git directory (shared by its worktrees)
	Prefix    string // the workspace's path below TopLevel ("" at the top)
	Head      string // HEAD's commit; "" when the repository has no commit yet
	Branch    string // HEAD's branch (short name); "" when HEAD is detached
}

// Inspect reads the repository holding dir. It returns ErrNotRepository
// when dir is not inside a git working tree.
func Inspect(ctx context.Context, dir string) (Repo, error) {
	c := Cmd{Dir: dir}
	out, err := c.Output(ctx, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir", "--show-prefix")
	if err != nil {
		var ge *Error
		if errors.As(err, &ge) && ge.Code > 0 {
			return Repo{}, ErrNotRepository
		}
		return Repo{}, err
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 2 {
		return Repo{}, fmt.Errorf("git rev-parse in %s: unexpected output %q", dir, out)
	}
	r := Repo{TopLevel: lines[0], CommonDir: lines[1]}
	if len(lines) > 2 {
		r.Prefix = strings.TrimSuffix(lines[2], "/")
	}
	r.Head, _ = c.Output(ctx, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	r.Branch, _ = c.Output(ctx, "symbolic-ref", "-q", "--short", "HEAD")
	return r, nil
}

// StatusEntry is a file with uncommitted changes in a working tree, as git
// status lists it: Path relative to the top level ("dir/" for a whole
// untracked directory), Untracked when git does not track it.
type StatusEntry struct {
	Path      string
	Untracked bool
}

// Uncommitted lists the uncommitted changes and untracked files (not
// ignored ones) of the working tree holding dir. It takes no lock and
// writes nothing (GIT_OPTIONAL_LOCKS=0: no index refresh).
func Uncommitted(ctx context.Context, dir string) ([]StatusEntry, error) {
	out, err := Cmd{Dir: dir}.Run(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=normal")
	if err != nil {
		return nil, err
	}
	var changes []StatusEntry
	fields := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	for i := 0; i < len(fields); i++ {
		e := fields[i]
		if len(e) < 4 {
			continue
		}
		changes = append(changes, StatusEntry{Path: e[3:], Untracked: e[:2] == "??"})
		if e[0] == 'R' || e[0] == 'C' {
			i++ // a rename's or copy's source path is the next field
		}
	}
	return changes, nil
}

// BranchExists reports whether refs/heads/<branch> exists.
func BranchExists(ctx context.Context, dir, branch string) bool {
	_, err := Cmd{Dir: dir}.Run(ctx, "rev-parse", "--verify", "-q", "refs/heads/"+branch)
	return err == nil
}

// IsWorktree reports whether path is the top of a git working tree (it
// holds a .git file or directory). It runs no git: it is checked before
// every step of a worktree run.
func IsWorktree(path string) bool {
	_, err := os.Lstat(filepath.Join(path, ".git"))
	return err == nil
}

// worktreeMu serialises this process's worktree adds and removes: git
// reads every other worktree's admin directory while it adds one, and one
// being created beside it at that moment fails the add ("failed to read
// .git/worktrees/<name>/commondir"), which a backlog's parallel task runs
// hit when they start together.
var worktreeMu sync.Mutex

// AddWorktree adds a worktree at path on a new branch started at base, from
// the repository holding repoDir. It touches nothing of the checkout at
// repoDir: no file, index or HEAD of it changes. When the branch already
// exists (a previous attempt was interrupted after creating it) the
// worktree checks that branch out instead.
func AddWorktree(ctx context.Context, repoDir, path, branch, base string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create worktree parent: %w", err)
	}
	worktreeMu.Lock()
	defer worktreeMu.Unlock()
	c := Cmd{Dir: repoDir}
	if BranchExists(ctx, repoDir, branch) {
		_, err := c.Run(ctx, "worktree", "add", "--quiet", path, branch)
		return err
	}
	_, err := c.Run(ctx, "worktree", "add", "--quiet", "-b", branch, path, base)
	return err
}
