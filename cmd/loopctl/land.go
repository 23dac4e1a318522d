package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	Push     bool
}

func newLandCmd(g *globalOptions) *cobra.Command {
	o := &landOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "land RUN [--squash] [--message M] [--no-verify] | land RUN --push [REMOTE]",
		Short: "Merge a worktree run's branch into its base branch in your checkout, or push it",
		Long: `Merge an ended worktree run's branch into the branch it started from, in
your checkout: a fast-forward when the base branch has not moved, else a merge
commit; one commit with --squash.

When the base branch has moved since the run started, the merge of the two is
first tested in the run's worktree with the run's verify_command, and lands
only if it passes (--no-verify skips that test). When the base has not moved,
the run's own last verification stands.

land refuses, and changes nothing, when the run is still active, your checkout
is not on the base branch or has uncommitted changes, the branches conflict or
the test fails; it then prints the git commands to finish by hand.

--push [REMOTE] pushes the run's branch to REMOTE instead (a remote's name, a
URL or a path; default: the base branch's upstream remote, else origin), after
the same verification, with --force-with-lease on where loopd last pushed it
(a new branch must not exist there yet); your checkout is not touched. Then
pr_command runs, when configured, to open a pull request; the first URL it
prints is recorded and shown.

A fleet run (through LOOPD_URL) is landed, or pushed, by loopctl itself in
the clone it runs in (-C CLONE): the run's branch is fetched from its
repository and a combination is tested in a temporary worktree of the clone.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 && o.Push {
				return nil
			}
			if len(args) == 2 {
				return usageErrorf("%s takes one RUN; a second argument is the REMOTE of --push", cmd.CommandPath())
			}
			return runArg(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			remote := ""
			if len(args) == 2 {
				remote = args[1]
			}
			return o.run(cmd, args[0], remote)
		},
	}
	cmd.Flags().BoolVar(&o.Squash, "squash", false, "land the run as one commit")
	cmd.Flags().StringVarP(&o.Message, "message", "m", "", "the merge or squash commit's message")
	cmd.Flags().BoolVar(&o.NoVerify, "no-verify", false, "do not test the combination when the base branch has moved")
	cmd.Flags().BoolVar(&o.Push, "push", false, "push the run's branch to REMOTE (the next argument) instead, then run pr_command")
	return cmd
}

func (o *landOptions) run(cmd *cobra.Command, arg, remote string) error {
	if o.Push && (o.Squash || o.Message != "") {
		return usageErrorf("--push pushes the run's branch as it is: --squash and --message apply to a land into your checkout only")
	}
	// The daemon has no working directory of ours: a path that exists
	// here goes absolute (a remote's name never has a slash).
	if remote != "" && !strings.Contains(remote, "://") && (strings.Contains(remote, "/") || remote == "." || remote == "..") {
		if _, err := os.Stat(remote); err == nil {
			if abs, err := filepath.Abs(remote); err == nil {
				remote = abs
			}
		}
	}
	ctx := cmd.Context()
	c, ref, err := o.runClient(ctx, arg)
	if err != nil {
		return err
	}
	if c.Remote() {
		// A fleet run lands (or is pushed) from the user's clone, by
		// loopctl itself (fleetland.go): the API node need not see it.
		run, err := c.GetRun(ctx, ref, false)
		if err != nil {
			return err
		}
		if run.RepoURL != "" {
			return o.landFleet(ctx, c, ref, run, remote)
		}
	}
	progress := func(msg string) {
		if !o.JSON {
			fmt.Fprintln(o.Err, termtext.Quote(msg)) // names the branches and the checkout: a repository's bytes
		}
	}
	res, refusal, err := c.Land(ctx, ref, api.LandRequest{Squash: o.Squash, Message: o.Message, NoVerify: o.NoVerify,
		Push: o.Push, Remote: remote}, progress)
	if errors.Is(err, api.ErrUnavailable) || api.IsCode(err, api.CodeShutdown) {
		// The daemon went away mid-land (kill -9, a crash, a shutdown): a bare
		// "connection lost" leaves the user guessing whether the checkout
		// moved. The checkout moves only in the last instant; say how to
		// tell, and what to do.
		// An exitError: an *api.Error (shutting_down) would otherwise be
		// printed alone, without what it means for the land.
		if o.Push {
			return &exitError{code: exitUnavailable, msg: fmt.Sprintf("%v\n  the push did not finish: if git had started it, the next daemon asks the remote whether it took it and records it; "+
				"`loopctl events %s` shows RUN_LANDED then\n  run `loopctl land %s --push` again: it pushes only what is not there yet", err, arg, arg)}
		}
		return &exitError{code: exitUnavailable, msg: fmt.Sprintf("%v\n  the land did not finish: a verification under way was stopped and nothing landed, "+
			"unless `loopctl status %s` shows its base branch moved (landed)\n  run `loopctl land %s` again", err, arg, arg)}
	}
	if err != nil {
		return err
	}
	if refusal != nil {
		return o.refused(refusal)
	}
	if res.Push != nil {
		return o.printPush(res)
	}
	return o.printLanded(res)
}

// refused prints a land's refusal; its error is the exit.
func (o *landOptions) refused(refusal *api.LandRefusal) error {
	if o.JSON {
		_ = printJSON(o.Out, map[string]any{"refusal": refusal})
	} else {
		printRefusal(o, refusal)
	}
	if o.Push {
		return &exitError{code: exitUsage, msg: "push refused: nothing was pushed"}
	}
	return &exitError{code: exitUsage, msg: "land refused: nothing was changed"}
}

// printLanded prints what a land did.
func (o *landOptions) printLanded(res *api.LandResult) error {
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

// printPush prints what a push did; a pr_command that failed after the
// push made it exits 70: the branch is there, the pull request is not.
func (o *landOptions) printPush(res *api.LandResult) error {
	var err error
	if pr := res.PRCommand; pr != nil && pr.ExitCode != 0 {
		err = &exitError{code: exitInternal, msg: fmt.Sprintf("the branch was pushed, but %s (its output: %s); run it by hand, or loopctl land --push again",
			termtext.Quote(pr.Error), termtext.Quote(pr.LogPath))}
	}
	if o.JSON {
		if e := printJSON(o.Out, map[string]any{"result": res}); e != nil {
			return e
		}
		return err
	}
	p := res.Push
	where := termtext.Quote(p.URL)
	if p.Remote != "" {
		where = termtext.Quote(p.Remote) + " (" + where + ")"
	}
	was := "a new branch"
	switch p.Previous {
	case p.Commit:
		was = "it was there already"
	case "":
	default:
		was = "was " + shortCommit(p.Previous)
	}
	fmt.Fprintf(o.Out, "pushed %s to %s: %s (%s)\n", termtext.Quote(p.Branch), where, shortCommit(p.Commit), was)
	switch {
	case res.Verified && res.BaseMoved:
		fmt.Fprintf(o.Out, "verified: its merge with the moved %s (%s) passed verify_command\n", termtext.Quote(res.BaseBranch), shortCommit(res.TestedCommit))
	case res.Verified:
		fmt.Fprintf(o.Out, "verified: the run's last verification of %s stands\n", shortCommit(res.TestedCommit))
	default:
		fmt.Fprintf(o.Out, "NOT verified (%s)\n", termtext.Quote(strings.TrimPrefix(res.Note, "not verified: ")))
	}
	if res.PRURL != "" {
		fmt.Fprintf(o.Out, "pull request: %s\n", termtext.Quote(res.PRURL))
	} else if res.PRCommand != nil && err == nil {
		fmt.Fprintf(o.Out, "pr_command printed no URL (its output: %s)\n", termtext.Quote(res.PRCommand.LogPath))
	}
	return err
}

func printRefusal(o *landOptions, r *api.LandRefusal) {
	what := "land"
	if o.Push {
		what = "push"
	}
	fmt.Fprintf(o.Err, "%s refused (%s): %s\n", what, r.Kind, termtext.QuoteLines(r.Message))
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
