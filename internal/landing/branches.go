package landing

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/storage"
)

// CleanBranches removes, for the ended runs ids (nil: every run that ended
// more than age ago), the git refs loopd made for them and recorded: a
// worktree run's loop/* branch once the run has landed and everything on
// the branch is in what landed, and the refs/loop/<run-id>/* snapshot refs
// (an in-place run's ledger, a conflicted merge's snapshot). A branch that
// has not landed, that has commits the land did not take (a squash land,
// commits after it) or that is still checked out in its worktree stays and
// is listed with the reason. A loop/* branch loopd has no record of is never
// touched.
func (l *Lander) CleanBranches(ctx context.Context, ids []string, age time.Duration) ([]api.CleanedBranch, error) {
	if ids == nil {
		var err error
		if ids, err = l.store.EndedRunsWithGitRefs(ctx, l.store.Now()-age.Milliseconds()); err != nil {
			return nil, err
		}
	}
	out := []api.CleanedBranch{}
	for _, id := range ids {
		run, err := l.store.Run(ctx, id)
		if err != nil {
			return nil, err
		}
		if !run.Status.Terminal() || l.Landing(id) {
			continue
		}
		items, err := l.cleanRunBranches(ctx, run)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

func (l *Lander) cleanRunBranches(ctx context.Context, run storage.Run) ([]api.CleanedBranch, error) {
	var out []api.CleanedBranch
	repo := run.Workspace
	if git.RepoGone(repo) {
		return nil, nil
	}
	// Snapshot refs: exactly the namespace of this recorded run.
	prefix := "refs/loop/" + run.ID + "/"
	refsOut, err := git.Cmd{Dir: repo}.Output(ctx, "for-each-ref", "--format=%(refname)", prefix)
	if err == nil && refsOut != "" {
		item := api.CleanedBranch{RunID: run.ID, Refs: prefix + "*"}
		var stdin strings.Builder
		n := 0
		for ref := range strings.SplitSeq(refsOut, "\n") {
			if strings.HasPrefix(ref, prefix) {
				fmt.Fprintf(&stdin, "delete %s\n", ref)
				n++
			}
		}
		if _, err := (git.Cmd{Dir: repo, Stdin: []byte(stdin.String())}).Run(ctx, "update-ref", "--stdin"); err != nil {
			item.Reason = err.Error()
		} else {
			item.Removed, item.RefCount = true, n
			l.log.Info("snapshot refs removed", zap.String("run_id", run.ID), zap.Int("refs", n))
		}
		out = append(out, item)
	}
	objs, err := l.store.RunBranches(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		item := api.CleanedBranch{RunID: run.ID, Branch: o.Name}
		skip := func(format string, args ...any) {
			item.Reason = fmt.Sprintf(format, args...)
			out = append(out, item)
		}
		if o.Name != run.Branch || !strings.HasPrefix(o.Name, "loop/") {
			skip("not the run's loop/* branch: left alone")
			continue
		}
		c := git.Cmd{Dir: repo}
		tip, err := c.Output(ctx, "rev-parse", "-q", "--verify", "refs/heads/"+o.Name+"^{commit}")
		if err != nil || tip == "" {
			// Deleted already (by hand): only the record is left.
			if err := l.store.Write(ctx, func(tx *storage.Tx) error { return tx.MarkBranchRemoved(o) }); err != nil {
				return nil, err
			}
			continue
		}
		if run.LandedCommit == "" {
			skip("the run has not landed: land it (loopctl land %s) or delete the branch yourself (git branch -D %s)", shortID(run.ID), o.Name)
			continue
		}
		if _, err := c.Run(ctx, "merge-base", "--is-ancestor", tip, run.LandedCommit); err != nil {
			skip("it has commits that did not land (a squash land, or commits after the land): delete it yourself with git branch -D %s", o.Name)
			continue
		}
		if run.WorktreeState == "present" {
			skip("it is checked out in the run's worktree %s: loopctl clean %s removes that first", run.Worktree, shortID(run.ID))
			continue
		}
		// Compare-and-delete: a branch moved since it was read stays.
		if _, err := c.Run(ctx, "update-ref", "-d", "refs/heads/"+o.Name, tip); err != nil {
			skip("%v", err)
			continue
		}
		if err := l.store.Write(ctx, func(tx *storage.Tx) error { return tx.MarkBranchRemoved(o) }); err != nil {
			return nil, err
		}
		l.log.Info("branch removed", zap.String("run_id", run.ID), zap.String("branch", o.Name))
		item.Removed = true
		out = append(out, item)
	}
	return out, nil
}
