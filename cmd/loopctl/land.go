package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
)

// landOptions are the flags of `loopctl land`.
type landOptions struct {
	*globalOptions
	Squash   bool
	Message  string
	NoVerify bool
}

func newLandCmd(g *globalOptions) *cobra.Command {
	o := &landOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "land RUN [--squash] [--message M] [--no-verify]",
		Short: "Merge a worktree run's branch into its base branch in your checkout",
		Long: `Merge an ended worktree run's branch into the branch it started from, in
your checkout: a fast-forward when the base branch has not moved, else a merge
commit; one commit with --squash.

When the base branch has moved since the run started, the merge of the two is
first tested in the run's worktree with the run's verify_command, and lands
only if it passes (--no-verify skips that test). When the base has not moved,
the run's own last verification stands.

land refuses, and changes nothing, when the run is still active, your checkout
is not on the base branch or has uncommitted changes, the branches conflict or
the test fails; it then prints the git commands to finish by hand.`,
		Args: runArg,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	cmd.Flags().BoolVar(&o.Squash, "squash", false, "land the run as one commit")
	cmd.Flags().StringVarP(&o.Message, "message", "m", "", "the merge or squash commit's message")
	cmd.Flags().BoolVar(&o.NoVerify, "no-verify", false, "do not test the combination when the base branch has moved")
	return cmd
}

func (o *landOptions) run(cmd *cobra.Command, arg string) error {
	ctx := cmd.Context()
	c, ref, err := o.runClient(ctx, arg)
	if err != nil {
		return err
	}
	progress := func(msg string) {
		if !o.JSON {
			fmt.Fprintln(o.Err, termtext.Quote(msg)) // names the branches and the checkout: a repository's bytes
		}
	}
	res, refusal, err := c.Land(ctx, ref, api.LandRequest{Squash: o.Squash, Message: o.Message, NoVerify: o.NoVerify}, progress)
	if errors.Is(err, api.ErrUnavailable) || api.IsCode(err, api.CodeShutdown) {
		// The daemon went away mid-land (kill -9, a crash, a shutdown): a bare
		// "connection lost" leaves the user guessing whether the checkout
		// moved. The checkout moves only in the last instant; say how to
		// tell, and what to do.
		// An exitError: an *api.Error (shutting_down) would otherwise be
		// printed alone, without what it means for the land.
		return &exitError{code: exitUnavailable, msg: fmt.Sprintf("%v\n  the land did not finish: a verification under way was stopped and nothing landed, "+
			"unless `loopctl status %s` shows its base branch moved (landed)\n  run `loopctl land %s` again", err, arg, arg)}
	}
	if err != nil {
		return err
	}
	if refusal != nil {
		if o.JSON {
			_ = printJSON(o.Out, map[string]any{"refusal": refusal})
		} else {
			printRefusal(o, refusal)
		}
		return &exitError{code: exitUsage, msg: "land refused: nothing was changed"}
	}
	if o.JSON {
		return printJSON(o.Out, map[string]any{"result": res})
	}
	branch, base := termtext.Quote(res.Branch), termtext.Quote(res.BaseBranch) // git allows U+202E and C1 controls in names
	fmt.Fprintf(o.Out, "landed %s into %s (%s): %s is now %s\n", branch, base, res.Mode, base, shortCommit(res.Commit))
	switch {
	case res.Verified && res.BaseMoved:
		fmt.Fprintf(o.Out, "verified: the merge with the moved %s (%s) passed verify_command\n", base, shortCommit(res.TestedCommit))
	case res.Verified:
		fmt.Fprintf(o.Out, "verified: the run's last verification of %s stands\n", shortCommit(res.TestedCommit))
	default:
		fmt.Fprintf(o.Out, "NOT verified (%s)\n", termtext.Quote(strings.TrimPrefix(res.Note, "not verified: ")))
	}
	return nil
}

func printRefusal(o *landOptions, r *api.LandRefusal) {
	fmt.Fprintf(o.Err, "land refused (%s): %s\n", r.Kind, termtext.QuoteLines(r.Message))
	if r.OutputTail != "" {
		fmt.Fprintf(o.Err, "\nlast output of verify_command (all of it: %s):\n", termtext.Quote(r.LogPath))
		for line := range strings.SplitSeq(strings.TrimRight(r.OutputTail, "\n"), "\n") {
			fmt.Fprintln(o.Err, "  "+termtext.Quote(line))
		}
	}
	if len(r.Hand) > 0 {
		fmt.Fprintf(o.Err, "\nthe run's branch is %s; to finish by hand:\n", termtext.Quote(r.Branch))
		for _, h := range r.Hand {
			fmt.Fprintln(o.Err, "  "+termtext.Quote(h))
		}
	}
}

func shortCommit(c string) string { return c[:min(len(c), 12)] }
