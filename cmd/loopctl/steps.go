package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
)

type stepsOptions struct{ *globalOptions }

func newStepsCmd(g *globalOptions) *cobra.Command {
	o := &stepsOptions{g}
	return &cobra.Command{
		Use:   "steps RUN",
		Short: "List a run's steps: phase, iteration, status, exit code, duration, tests",
		Args:  runArg,
		RunE:  o.run,
	}
}

func (o *stepsOptions) run(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	c, ref, err := o.runClient(ctx, args[0])
	if err != nil {
		return err
	}
	steps, err := c.Steps(ctx, ref)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(o.Out, steps)
	}
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tPHASE\tITER\tSTATUS\tEXIT\tDURATION\tCOST\tCHANGES\tDETAIL")
	for _, s := range steps {
		exit := "-"
		if s.ExitCode != nil {
			exit = fmt.Sprint(*s.ExitCode)
		}
		var detail []string
		if s.Tests != nil && len(s.Tests.IgnoredNames) > 0 {
			// First: the detail is cut at 90 characters, and this is
			// what makes a failing test run pass (steps --json has the names).
			detail = append(detail, fmt.Sprintf("%d pre-existing ignored: %s", len(s.Tests.IgnoredNames), firstNames(s.Tests.IgnoredNames)))
		}
		if t := testsSummary(s.Tests); t != "" {
			detail = append(detail, t)
		}
		if s.Error != "" && (s.Tests == nil || s.Status != api.StepFailed || !strings.Contains(s.Error, "tests failed")) {
			detail = append(detail, s.Error)
		}
		if s.Promise {
			detail = append(detail, "promise")
		}
		c := "-"
		if s.Usage.CostUSD > 0 || s.Usage.CostUnknown {
			c = cost(s.Usage)
		}
		changes := "-"
		if s.Changes != nil {
			changes = changeSummary(s.Changes)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Seq, s.Phase, s.Iteration, s.Status, exit, ms(s.DurationMS), c,
			changes, termtext.Quote(truncate(strings.Join(detail, "; "), 90)))
	}
	return tw.Flush()
}
