package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// Dirty reports whether the working tree holding dir has uncommitted
// changes or untracked files (not ignored ones). It takes no lock and
// writes nothing (GIT_OPTIONAL_LOCKS=0: no index refresh).
func Dirty(ctx context.Context, dir string) (bool, error) {
	out, err := Cmd{Dir: dir}.Run(ctx, "status", "--porcelain", "-z", "--untracked-files=normal")
	if err != nil {
		return false, err
	}
	return len(out) > 0, nil
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

// AddWorktree adds a worktree at path on a new branch started at base, from
// the repository holding repoDir. It touches nothing of the checkout at
// repoDir: no file, index or HEAD of it changes. When the branch already
// exists (a previous attempt was interrupted after creating it) the
// worktree checks that branch out instead.
func AddWorktree(ctx context.Context, repoDir, path, branch, base string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create worktree parent: %w", err)
	}
	c := Cmd{Dir: repoDir}
	if BranchExists(ctx, repoDir, branch) {
		_, err := c.Run(ctx, "worktree", "add", "--quiet", path, branch)
		return err
	}
	_, err := c.Run(ctx, "worktree", "add", "--quiet", "-b", branch, path, base)
	return err
}
