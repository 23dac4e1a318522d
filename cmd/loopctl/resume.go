package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
)

type resumeOptions struct {
	*globalOptions
	Set      []string
	OntoBase bool
}

func newResumeCmd(g *globalOptions) *cobra.Command {
	o := &resumeOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "Continue a PAUSED, WAITING, FAILED, ABORTED or INTERRUPTED run, counters and budgets intact",
		Long: `Continue a run where it left off. Its iteration count, failure streaks,
tokens and cost carry on (they are derived from its recorded steps), so a run
that ended on a limit ends again at once unless the limit is raised:

  loopctl resume last --set max_iterations=80 --set max_cost=20

--onto-base (a worktree run that ended, e.g. after land refused with a
conflict or a failing combination) first merges the current base branch into
the run's branch in its worktree. Conflicts are left in the files, with their
markers, for the agent: the next prompt says what was merged, which files
conflict and the failing output of the refused land. The gates must hold
again before the run completes; land then has nothing new to combine.`,
		Args: runArg,
		RunE: o.run,
	}
	cmd.Flags().StringArrayVar(&o.Set, "set", nil, "change a config key=value (e.g. raise a limit), repeatable")
	cmd.Flags().BoolVar(&o.OntoBase, "onto-base", false, "first merge the current base branch into an ended worktree run's branch (conflicts left for the agent)")
	return cmd
}

func (o *resumeOptions) run(cmd *cobra.Command, args []string) error {
	return control(cmd, o.globalOptions, args[0], func(ctx context.Context, c *api.Client, ref api.RunRef) (api.Run, error) {
		return c.Resume(ctx, ref, api.ResumeRequest{Set: o.Set, OntoBase: o.OntoBase})
	}, func(r api.Run) string { return fmt.Sprintf("run %s resumed (%s)", shortID(r.ID), r.Status) })
}
