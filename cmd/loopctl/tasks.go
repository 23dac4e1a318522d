package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
)

type tasksOptions struct {
	*globalOptions
	Retry string
	Set   []string
}

func newTasksCmd(g *globalOptions) *cobra.Command {
	o := &tasksOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "tasks RUN",
		Short: "List a backlog run's tasks: state, task run, iterations, cost, tests, changes, landed commit",
		Long: `List a backlog run's tasks in list order, each with its state (pending, ready,
running, waiting, landing, done, blocked, skipped), its task run, and that
run's iterations, cost, tests, changes and the commit it landed as in the
backlog's integration branch.

--retry ID re-opens a blocked task (and the tasks skipped because of it): it
gets a new task run from the integration branch's tip; --set changes its
settings first. A backlog that had ended goes on.`,
		Example: `  loopctl tasks last
  loopctl tasks 1a2b3c4d --retry t3 --set max_task_iterations=20`,
		Args: runArg,
		RunE: o.run,
	}
	f := cmd.Flags()
	f.StringVar(&o.Retry, "retry", "", "re-open the blocked task with this id")
	f.StringArrayVar(&o.Set, "set", nil, "with --retry: the task's key=value setting, repeatable")
	return cmd
}

func (o *tasksOptions) run(cmd *cobra.Command, args []string) error {
	if len(o.Set) > 0 && o.Retry == "" {
		return usageErrorf("--set changes a task retried with --retry ID")
	}
	ctx := cmd.Context()
	c, ref, err := o.runClient(ctx, args[0])
	if err != nil {
		return err
	}
	var tasks api.BacklogTasks
	if o.Retry != "" {
		tasks, err = c.RetryTask(ctx, ref, o.Retry, api.RetryTaskRequest{Set: o.Set})
	} else {
		tasks, err = c.Tasks(ctx, ref)
	}
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(o.Out, tasks)
	}
	if o.Retry != "" {
		fmt.Fprintf(o.Out, "task %s re-opened\n", termtext.Quote(o.Retry))
	}
	fmt.Fprintf(o.Out, "backlog %s  %s", shortID(tasks.Backlog), tasks.Status)
	if tasks.Reason != "" {
		fmt.Fprintf(o.Out, " (%s)", tasks.Reason)
	}
	fmt.Fprintf(o.Out, "  integration branch %s\n", tasks.Branch)
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tRUN\tITER\tTOKENS\tCOST\tTESTS\tCHANGES\tLANDED\tTITLE")
	for _, t := range tasks.Tasks {
		run, iter, tokens, cst, tests, changes, landed := "-", "-", "-", "-", "-", "-", "-"
		if t.Run != "" {
			run = shortID(t.Run)
			iter = fmt.Sprint(t.Iterations)
			tokens = count(t.Usage.InputTokens + t.Usage.OutputTokens + t.Usage.CacheReadTokens + t.Usage.CacheWriteTokens)
			cst = cost(t.Usage)
			changes = fmt.Sprintf("%d files +%d -%d", t.FilesChanged, t.Insertions, t.Deletions)
		}
		if s := testsSummary(t.Tests); s != "" {
			tests = s
		}
		if t.LandedCommit != "" {
			landed = t.LandedCommit[:min(len(t.LandedCommit), 12)]
			if !t.Verified {
				landed += " (unverified)"
			}
		}
		title := t.Title
		if t.Why != "" {
			title += " — " + t.Why
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termtext.Quote(t.ID), t.State, run, iter, tokens, cst, tests, changes, landed,
			termtext.Quote(truncate(strings.TrimSpace(title), 100)))
	}
	return tw.Flush()
}
