package git

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// WorktreeEntry is one entry of `git worktree list --porcelain`.
type WorktreeEntry struct {
	Path     string
	Head     string
	Branch   string // short name; "" when detached or bare
	Bare     bool
	Detached bool
	Locked   bool
	// Prunable is git's own finding that the worktree's directory is gone.
	Prunable bool
}

// ListWorktrees lists the worktrees git knows in the repository whose
// common git directory (or any working tree) is repo.
func ListWorktrees(ctx context.Context, repo string) ([]WorktreeEntry, error) {
	out, err := Cmd{Dir: repo}.Run(ctx, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, fmt.Errorf("list worktrees of %s: %w", repo, err)
	}
	return parseWorktreeList(string(out)), nil
}

// parseWorktreeList reads the porcelain format: one attribute per line,
// entries separated by a blank line.
func parseWorktreeList(out string) []WorktreeEntry {
	var list []WorktreeEntry
	var cur *WorktreeEntry
	for line := range strings.SplitSeq(out, "\n") {
		key, val, _ := strings.Cut(line, " ")
		switch key {
		case "worktree":
			list = append(list, WorktreeEntry{Path: val})
			cur = &list[len(list)-1]
		case "HEAD":
			if cur != nil {
				cur.Head = val
			}
		case "branch":
			if cur != nil {
				cur.Branch = strings.TrimPrefix(val, "refs/heads/")
			}
		case "bare":
			if cur != nil {
				cur.Bare = true
			}
		case "detached":
			if cur != nil {
				cur.Detached = true
			}
		case "locked":
			if cur != nil {
				cur.Locked = true
			}
		case "prunable":
			if cur != nil {
				cur.Prunable = true
			}
		}
	}
	return list
}

// WorktreePresent reports whether the worktree loopd recorded at path in
// repo still exists: git lists it, git does not find it prunable, and its
// directory is there. A repository that is itself gone has no worktrees.
func WorktreePresent(list []WorktreeEntry, path string) bool {
	want := canonical(path)
	for _, e := range list {
		if canonical(e.Path) == want {
			if e.Prunable {
				return false
			}
			fi, err := os.Stat(path)
			return err == nil && fi.IsDir()
		}
	}
	return false
}

// RepoGone reports whether a repository's common git directory no longer
// exists (the whole repository was deleted).
func RepoGone(repo string) bool {
	_, err := os.Stat(repo)
	return errors.Is(err, fs.ErrNotExist)
}

// RemoveWorktree removes one worktree loopd made, and only that one: its
// directory (with the files a step left untracked) and git's entry for it.
// It never prunes: a stale entry of a worktree someone else made stays.
// A worktree whose directory is already gone loses only its stale entry.
func RemoveWorktree(ctx context.Context, repo, path string) error {
	worktreeMu.Lock()
	_, err := (Cmd{Dir: repo}).Run(ctx, "worktree", "remove", "--force", path)
	worktreeMu.Unlock()
	if err != nil {
		var ge *Error
		if errors.As(err, &ge) && strings.Contains(ge.Stderr, "is not a working tree") {
			return nil // git has no entry for it any more: nothing of ours is left
		}
		return fmt.Errorf("remove worktree %s: %w", path, err)
	}
	return nil
}

// TrackedChanges lists the tracked files with uncommitted changes in a
// worktree (capped), "" when it is clean or gone.
func TrackedChanges(ctx context.Context, worktree string) ([]string, error) {
	if _, err := os.Stat(worktree); err != nil {
		return nil, nil
	}
	out, err := Cmd{Dir: worktree}.Run(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=no")
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", worktree, err)
	}
	var files []string
	for e := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
		if len(e) > 3 {
			files = append(files, e[3:])
		}
	}
	return capList(files), nil
}

// canonical resolves symbolic links in path (or in its parent when it is
// gone), so that /tmp and /private/tmp compare equal.
func canonical(path string) string {
	path = filepath.Clean(path)
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(d, filepath.Base(path))
	}
	return path
}
