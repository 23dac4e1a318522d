package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/loopd/loopd/internal/api"
)

// diffOptions are the flags of `loopctl diff`.
type diffOptions struct {
	*globalOptions
	Iteration int
	Stat      bool
}

func newDiffCmd(g *globalOptions) *cobra.Command {
	o := &diffOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "diff RUN [--iteration N] [--stat]",
		Short: "Print what a run changed: one iteration, or the whole run against its base (--json: the stat)",
		Long: `Print what a run changed, from its change ledger: with --iteration N the
change of that iteration's implementation step, else the whole run's change
against the commit it started from. It reads commits and the run's branch,
not its worktree, so it works after the worktree is cleaned or removed.

--stat prints git's diffstat; --json prints files changed, insertions,
deletions and every file as JSON.`,
		Args: runArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			// 0 is the flag's "whole run" default: given explicitly it
			// would silently print the whole run instead of an iteration.
			if cmd.Flags().Changed("iteration") && o.Iteration < 1 {
				return usageErrorf("--iteration must be 1 or more, got %d (a worktree run's setup has no change of its own: what it wrote is in iteration 1's)", o.Iteration)
			}
			return o.run(cmd, args[0])
		},
	}
	cmd.Flags().IntVar(&o.Iteration, "iteration", 0, "only this iteration's change (default: the whole run)")
	cmd.Flags().BoolVar(&o.Stat, "stat", false, "print a diffstat instead of the patch")
	return cmd
}

func (o *diffOptions) run(cmd *cobra.Command, arg string) error {
	ctx := cmd.Context()
	c, ref, err := o.runClient(ctx, arg)
	if err != nil {
		return err
	}
	if o.JSON {
		st, err := c.DiffStat(ctx, ref, o.Iteration)
		if err != nil {
			return err
		}
		return printJSON(o.Out, st)
	}
	color := false
	if f, ok := o.Out.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("NO_COLOR") == "" {
		color = true
	}
	body, _, to, err := c.Diff(ctx, ref, api.DiffOptions{Iteration: o.Iteration, Stat: o.Stat, Color: color})
	if err != nil {
		return err
	}
	defer body.Close()
	if to == "" {
		what := "the run"
		if o.Iteration > 0 {
			what = fmt.Sprintf("iteration %d", o.Iteration)
		}
		fmt.Fprintf(o.Err, "%s changed nothing\n", what)
		return nil
	}
	if _, err := io.Copy(o.Out, body); err != nil {
		return fmt.Errorf("read diff: %w", err)
	}
	return nil
}
