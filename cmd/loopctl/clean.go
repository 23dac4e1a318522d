package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
)

// cleanOptions are the flags of `loopctl clean`.
type cleanOptions struct {
	*globalOptions
	Ended     bool
	OlderThan string
	Branches  bool
}

func newCleanCmd(g *globalOptions) *cobra.Command {
	o := &cleanOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "clean RUN|--ended [--older-than 7d] [--branches]",
		Short: "Remove the worktrees of ended runs (their branches stay)",
		Long: `Remove the worktree of an ended run, or with --ended of every ended run
(--older-than D: only runs that ended at least D ago). Their branches stay, so
loopctl diff and loopctl land still work.

Only worktrees loopd created and recorded are removed: a loop/* worktree or
branch you made yourself is never touched, and git's entries for other
worktrees are never pruned. A worktree with uncommitted changes to tracked
files is skipped and listed.

--branches also removes the git refs loopd made for those ended runs: a run's
loop/* branch only once the run has landed and everything on the branch is in
what landed (an unlanded branch, or one with commits a squash land did not
take, stays and is listed), and its refs/loop/<run-id>/* snapshot refs (an
in-place run's change ledger: loopctl diff of that run shows nothing after).
A loop/* branch loopd has no record of is never touched.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usageErrorf("clean takes at most one RUN")
			case len(args) == 1 && o.Ended:
				return usageErrorf("give a RUN or --ended, not both")
			case o.OlderThan != "" && !o.Ended:
				// Checked before "needs a RUN": clean --older-than 7d
				// lacks --ended, not a RUN.
				return usageErrorf("--older-than goes with --ended: loopctl clean --ended --older-than %s", o.OlderThan)
			case len(args) == 0 && !o.Ended:
				return usageErrorf("clean needs a RUN (an id, a unique id prefix, or last) or --ended")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	cmd.Flags().BoolVar(&o.Ended, "ended", false, "clean every ended run's worktree")
	cmd.Flags().StringVar(&o.OlderThan, "older-than", "", "with --ended: only runs that ended at least this long ago (7d, 12h)")
	cmd.Flags().BoolVar(&o.Branches, "branches", false, "also remove landed loop/* branches and refs/loop/<id>/* snapshot refs of those runs (only loopd's)")
	return cmd
}

func (o *cleanOptions) run(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	req := api.CleanRequest{Ended: o.Ended, OlderThan: o.OlderThan, Branches: o.Branches}
	var ref api.RunRef
	if len(args) == 1 {
		var err error
		if ref, err = o.ref(args[0]); err != nil {
			return err
		}
		req.Run, req.Workspace = ref.Ref, ref.Workspace
	}
	c, err := o.client(ctx)
	if err != nil {
		return err
	}
	res, err := c.Clean(ctx, req)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(o.Out, res)
	}
	for _, w := range res.Removed {
		how := "removed"
		switch {
		case w.Gone:
			how = "forgotten (it had been removed by hand)"
		case w.Worker != "":
			how = "marked cleaned: worker " + termtext.Quote(w.Worker) + " removes it at its next sweep"
		}
		fmt.Fprintf(o.Out, "%s  %s %s; branch %s stays\n", shortID(w.RunID), termtext.Quote(w.Worktree), how, termtext.Quote(w.Branch))
	}
	for _, w := range res.Skipped {
		fmt.Fprintf(o.Out, "%s  %s skipped: %s\n", shortID(w.RunID), termtext.Quote(w.Worktree), termtext.Quote(w.Reason))
	}
	for _, b := range res.Branches {
		what := "branch " + termtext.Quote(b.Branch)
		if b.Branch == "" {
			what = fmt.Sprintf("snapshot refs %s (%d)", termtext.Quote(b.Refs), b.RefCount)
		}
		if b.Removed {
			fmt.Fprintf(o.Out, "%s  %s removed\n", shortID(b.RunID), what)
		} else {
			fmt.Fprintf(o.Out, "%s  %s stays: %s\n", shortID(b.RunID), what, termtext.Quote(b.Reason))
		}
	}
	if len(res.Removed)+len(res.Skipped)+len(res.Branches) == 0 {
		fmt.Fprintln(o.Out, o.nothingCleaned(ctx, c, ref))
	}
	return nil
}

// nothingCleaned says why clean removed nothing: for one run, why that run
// has no worktree to remove, rather than a bare "nothing" that reads like
// a failure to find it.
func (o *cleanOptions) nothingCleaned(ctx context.Context, c *api.Client, ref api.RunRef) string {
	switch {
	case ref.Ref == "" && o.OlderThan != "":
		return fmt.Sprintf("no worktree to clean: no run with a worktree ended %s ago or more", o.OlderThan)
	case ref.Ref == "":
		return "no worktree to clean: no ended run has one"
	}
	run, err := c.GetRun(ctx, ref, false)
	if err != nil {
		return "no worktree to clean"
	}
	switch {
	case run.Isolation != "worktree":
		return fmt.Sprintf("run %s ran in place: it has no worktree to clean", shortID(run.ID))
	case run.WorktreeState == "removed":
		return fmt.Sprintf("the worktree of run %s was already removed (loopctl clean)", shortID(run.ID))
	case run.WorktreeState == "":
		return fmt.Sprintf("run %s never had its worktree made: nothing to clean", shortID(run.ID))
	}
	return "no worktree to clean"
}
