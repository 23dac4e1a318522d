package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/termtext"
)

type startOptions struct {
	*globalOptions
	PromptFile, Spec, Plan, Name, StopFile string
	Tasks                                  string
	Set                                    []string
	Wait                                   bool
}

func newStartCmd(g *globalOptions) *cobra.Command {
	o := &startOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "start [GOAL...]",
		Short: "Create a run in the workspace (the current directory, or -C DIR)",
		Long: `Create a run: loopd runs the agent on the goal again and again, runs the
project's checks after each attempt, and stops for a recorded reason.

The goal is GOAL (all words joined), else prompt/prompt_file from the config,
else PROMPT.md in the workspace. The configuration is resolved now and frozen:
built-in defaults < ~/.config/loop/config < .loop/config < --set.`,
		Example: `  loopctl start "make the tests in ./parser pass"
  loopctl start --tasks PLAN.md "the v2 parser"
  loopctl start -C ~/src/app --plan PLAN.md --set max_cost=5 --wait`,
		RunE: o.run,
	}
	f := cmd.Flags()
	f.StringVar(&o.PromptFile, "prompt-file", "", "file holding the goal (at most 1 MiB; relative paths of every flag are resolved against -C DIR)")
	f.StringVar(&o.Spec, "spec", "", "specification file referenced in the prompt")
	f.StringVar(&o.Plan, "plan", "", "plan file: a markdown checklist the agent works through")
	f.StringVar(&o.Name, "name", "", "a name for the run")
	f.StringArrayVar(&o.Set, "set", nil, "config key=value, repeatable (highest precedence)")
	f.StringVar(&o.StopFile, "stop-file", "", "JSON stop conditions (default .loop/stop.json when present)")
	f.StringVar(&o.Tasks, "tasks", "", "a task list (Markdown checklist, tasks.json, prd.json, gh issue list --json output): start a backlog run that works through it task by task (docs/backlogs.md)")
	f.BoolVar(&o.Wait, "wait", false, "wait for the run to end; exit with its code (0 COMPLETED, 1 FAILED, 2 ABORTED, 3 INTERRUPTED)")
	return cmd
}

func (o *startOptions) run(cmd *cobra.Command, args []string) error {
	ws, err := o.workspace()
	if err != nil {
		return err
	}
	req := api.CreateRunRequest{Workspace: ws, Goal: strings.Join(args, " "), Name: o.Name, Set: o.Set}
	// Paths given as flags are relative to -C DIR when given (like git -C,
	// which works as if started there), else to where loopctl runs.
	base := ""
	if o.Dir != "" {
		if base, err = filepath.Abs(o.Dir); err != nil {
			return usageErrorf("%v", err)
		}
	}
	for _, p := range []struct {
		in  string
		out *string
	}{
		{o.PromptFile, &req.PromptFile}, {o.Spec, &req.SpecFile}, {o.Plan, &req.PlanFile}, {o.StopFile, &req.StopFile},
		{o.Tasks, &req.TasksFile},
	} {
		if p.in != "" {
			in := p.in
			if base != "" && !filepath.IsAbs(in) {
				in = filepath.Join(base, in)
			}
			if *p.out, err = filepath.Abs(in); err != nil {
				return usageErrorf("%v", err)
			}
		}
	}
	ctx := cmd.Context()
	if o.fleetURL() != "" {
		// A fleet's workers fetch the run's commit from the clone's
		// origin: checked here, before anything is sent.
		src, err := git.FleetSource(ctx, ws)
		if err != nil {
			if se := (*git.SourceError)(nil); errors.As(err, &se) {
				return usageErrorf("%s", termtext.QuoteLines(se.Error()))
			}
			return err
		}
		req.RepoURL, req.BaseCommit = src.RepoURL, src.BaseCommit
		if o.Tasks != "" {
			return usageErrorf("--tasks: a backlog run cannot be started through LOOPD_URL yet; start it on your own daemon (unset LOOPD_URL)")
		}
		// The API node cannot see the clone: it gets the files the run is
		// made of, as committed at the base commit.
		snap, warnings, err := fleetSnapshot(ctx, ws, src.BaseCommit,
			snapshotNamed(ws, []string{req.PromptFile, req.SpecFile, req.PlanFile, req.StopFile}, req.Set))
		if err != nil {
			return err
		}
		if st, err := git.Uncommitted(ctx, ws); err == nil && len(st) > 0 {
			// The run's own files were checked above; the rest (the
			// project's code) just does not go with it.
			warnings = append(warnings, fmt.Sprintf("the clone %s has uncommitted changes (%d files); they are not part of this run, which starts from %s as pushed",
				ws, len(st), src.BaseCommit[:12]))
		}
		for _, w := range warnings {
			fmt.Fprintf(o.Err, "warning: %s\n", termtext.Quote(w))
		}
		req.Snapshot = snap
		req.BaseBranch, _ = git.Cmd{Dir: ws}.Output(ctx, "symbolic-ref", "--short", "-q", "HEAD")
		// Named as the API node names the clone: its canonical path,
		// under which trust is recorded.
		for _, p := range []*string{&req.PromptFile, &req.SpecFile, &req.PlanFile, &req.StopFile} {
			*p = canonicalIn(ws, *p)
		}
		req.Workspace = canonicalIn(ws, ws)
	}
	c, err := o.client(ctx)
	if err != nil {
		return err
	}
	run, err := c.CreateRun(ctx, req)
	if err != nil {
		return trustHint(err, o.globalOptions, o.Tasks)
	}
	// Warnings go to stderr even with --json: the run is created all the
	// same, and a script reading stdout is not disturbed.
	for _, w := range run.Warnings {
		fmt.Fprintf(o.Err, "warning: %s\n", termtext.Quote(w))
	}
	switch {
	case run.Kind == "backlog":
		fmt.Fprintf(o.Err, "backlog %s lands its tasks into branch %s (from %s), each task in a worktree run of its own\n  its tasks: loopctl tasks %s\n",
			shortID(run.ID), termtext.Quote(run.Branch), shortID(run.BaseCommit), shortID(run.ID))
	case run.Isolation == "worktree":
		fmt.Fprintf(o.Err, "run %s works in its own worktree %s on branch %s (from %s)\n",
			shortID(run.ID), termtext.Quote(run.Worktree), termtext.Quote(run.Branch), shortID(run.BaseCommit))
	}
	if !o.Wait {
		if o.JSON {
			return printJSON(o.Out, run)
		}
		fmt.Fprintf(o.Out, "%s\n", run.ID)
		fmt.Fprintf(o.Err, "started run %s in %s\n  follow it: loopctl watch %s   ·   loopctl logs %s --follow\n",
			shortID(run.ID), termtext.Quote(run.Workspace), shortID(run.ID), shortID(run.ID))
		return nil
	}
	if !o.JSON {
		fmt.Fprintf(o.Err, "started run %s; waiting for it to end (Ctrl+C leaves it running)\n", shortID(run.ID))
	}
	return waitAndReport(cmd, o.globalOptions, c, api.RunRef{Ref: run.ID}, 0)
}
