package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BaseMerge is the merge of a run's base branch into its branch made by
// `loopctl resume --onto-base`, as the change ledger records it.
type BaseMerge struct {
	BaseCommit string // the base branch's commit that was merged
	// Point is the ledger point the next iteration's change is counted
	// from: the merge commit on the run's branch when the merge was clean;
	// with conflicts, a commit of the worktree as the merge left it
	// (markers and all, parents: the run's tip and BaseCommit), kept under
	// the snapshot ref and on no branch.
	Point     string
	Clean     bool
	Conflicts []string // files the merge left conflicted (capped like a refusal's)
	Reused    bool     // an earlier, cut request had made it: found, not made again
}

// ErrNothingToMerge is a base commit the run's branch already has.
var ErrNothingToMerge = errors.New("nothing to merge")

// MergeBaseInput says what MergeBase merges.
type MergeBaseInput struct {
	BaseBranch  string
	Base        string // the base branch's commit to merge
	SnapshotRef string // where a conflicted merge's snapshot is kept (refs/loop/<run>/merge-<seq>)
	// AfterMerge, when set, is called right after git merged the files
	// (before loopd's record of it): a test hook.
	AfterMerge func()
}

func (l *Ledger) mergeTrailer(base string) string {
	return fmt.Sprintf("Loop-Merge: %s/%s", l.RunID, base)
}

// MergeBase merges in.Base into the branch checked out in the worktree
// l.Dir, leaving conflicts in the files for the agent. It is safe to
// repeat after a crash at any point: a merge it made (committed, or in
// progress with MERGE_HEAD at in.Base) is found and finished, never made
// twice. Clean: a merge commit on the branch, made with plumbing (no hook,
// no signing prompt) and carrying the trailer "Loop-Merge: <run>/<base>".
// Conflicted: the merge stays in progress (MERGE_HEAD, markers in the
// files, unmerged index entries, as `git merge` leaves it), and the next
// CommitWorktree completes it with both parents.
func (l *Ledger) MergeBase(ctx context.Context, in MergeBaseInput) (BaseMerge, error) {
	c := l.cmd(ctx)
	out, err := c.Run(ctx, "log", "-1", "--format=%H%n%B", "HEAD")
	if err != nil {
		return BaseMerge{}, fmt.Errorf("read HEAD of %s: %w", l.Dir, err)
	}
	head, body, _ := bytes.Cut(out, []byte("\n"))
	m := BaseMerge{BaseCommit: in.Base}
	if hasLine(body, l.mergeTrailer(in.Base)) {
		// Made by a request cut after its commit: only the merge state
		// may be left to clear.
		if _, err := c.Run(ctx, "merge", "--quit"); err != nil {
			return BaseMerge{}, fmt.Errorf("clear the merge state: %w", err)
		}
		m.Point, m.Clean, m.Reused, m.Conflicts = string(head), true, true, []string{}
		return m, nil
	}
	mergeHead, _ := c.Output(ctx, "rev-parse", "-q", "--verify", "MERGE_HEAD")
	switch {
	case mergeHead == in.Base:
		m.Reused = true
	case mergeHead != "":
		return BaseMerge{}, fmt.Errorf("the worktree %s is in the middle of a merge of %s: finish it (loopctl resume continues the run and the agent's next iteration completes it) or abort it there (git merge --abort)",
			l.Dir, short(mergeHead))
	default:
		if isAncestor(ctx, c, in.Base, string(head)) {
			return BaseMerge{}, ErrNothingToMerge
		}
		if files, err := TrackedChanges(ctx, l.Dir); err != nil {
			return BaseMerge{}, err
		} else if len(files) > 0 {
			return BaseMerge{}, fmt.Errorf("the run's worktree %s has uncommitted changes in %s: commit or discard them there first",
				l.Dir, FileList(capList(files)))
		}
		// --no-commit: git merges the files and the index, and loopd
		// makes the commit itself (no hook, no signing prompt).
		_, err := c.Run(ctx, "merge", "--no-ff", "--no-commit", "--no-verify", "--quiet", in.Base)
		var ge *Error
		if err != nil && !(errors.As(err, &ge) && ge.Code == 1) {
			return BaseMerge{}, fmt.Errorf("merge %s into the run's branch: %w", in.BaseBranch, err)
		}
		if _, err := c.Output(ctx, "rev-parse", "-q", "--verify", "MERGE_HEAD"); err != nil {
			return BaseMerge{}, fmt.Errorf("merge %s into the run's branch: git left no merge in progress", in.BaseBranch)
		}
		if in.AfterMerge != nil {
			in.AfterMerge()
		}
	}
	unmerged, err := c.Run(ctx, "diff", "--name-only", "-z", "--diff-filter=U")
	if err != nil {
		return BaseMerge{}, fmt.Errorf("list the conflicted files: %w", err)
	}
	m.Conflicts = []string{}
	for f := range strings.SplitSeq(strings.TrimRight(string(unmerged), "\x00"), "\x00") {
		if f != "" {
			m.Conflicts = append(m.Conflicts, f)
		}
	}
	m.Conflicts = capList(m.Conflicts)
	msg := fmt.Sprintf("loop %s: merge %s (%s)\n\n%s\n", l.Short, in.BaseBranch, short(in.Base), l.mergeTrailer(in.Base))
	if len(m.Conflicts) == 0 {
		tree, err := c.Output(ctx, "write-tree")
		if err != nil {
			return BaseMerge{}, fmt.Errorf("ledger: %w", err)
		}
		commit, err := c.Output(ctx, "commit-tree", tree, "-p", string(head), "-p", in.Base, "-m", msg)
		if err != nil {
			return BaseMerge{}, fmt.Errorf("ledger: %w", err)
		}
		if _, err := c.Run(ctx, "update-ref", "-m", "loopd: merge "+in.BaseBranch, "HEAD", commit, string(head)); err != nil {
			return BaseMerge{}, fmt.Errorf("ledger: %w", err)
		}
		if _, err := c.Run(ctx, "merge", "--quit"); err != nil {
			return BaseMerge{}, fmt.Errorf("clear the merge state: %w", err)
		}
		m.Point, m.Clean = commit, true
		return m, nil
	}
	// Conflicted: the snapshot of the merge as git left it, in a private
	// index (the worktree's own keeps its unmerged entries for the agent
	// and git status).
	if out, err := c.Run(ctx, "log", "-1", "--format=%H%n%B", in.SnapshotRef, "--"); err == nil {
		if id, body, _ := bytes.Cut(out, []byte("\n")); hasLine(body, l.mergeTrailer(in.Base)) {
			m.Point = string(id)
			return m, nil
		}
	}
	dir, err := os.MkdirTemp("", "loopd-merge-index-")
	if err != nil {
		return BaseMerge{}, err
	}
	defer os.RemoveAll(dir)
	ic := c
	ic.Env = append(append([]string(nil), c.Env...), "GIT_INDEX_FILE="+filepath.Join(dir, "index"))
	if _, err := ic.Run(ctx, "read-tree", string(head)); err != nil {
		return BaseMerge{}, fmt.Errorf("ledger: %w", err)
	}
	if _, err := ic.Run(ctx, "add", "-A"); err != nil {
		return BaseMerge{}, fmt.Errorf("ledger: %w", err)
	}
	tree, err := ic.Output(ctx, "write-tree")
	if err != nil {
		return BaseMerge{}, fmt.Errorf("ledger: %w", err)
	}
	msg = fmt.Sprintf("loop %s: merge %s (%s), conflicts left in %d file(s)\n\n%s\n", l.Short, in.BaseBranch, short(in.Base),
		len(m.Conflicts), l.mergeTrailer(in.Base))
	commit, err := c.Output(ctx, "commit-tree", tree, "-p", string(head), "-p", in.Base, "-m", msg)
	if err != nil {
		return BaseMerge{}, fmt.Errorf("ledger: %w", err)
	}
	if _, err := c.Run(ctx, "update-ref", in.SnapshotRef, commit); err != nil {
		return BaseMerge{}, fmt.Errorf("ledger: %w", err)
	}
	m.Point = commit
	return m, nil
}
