package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/termtext"
)

type postmortemOptions struct{ *globalOptions }

func newPostmortemCmd(g *globalOptions) *cobra.Command {
	o := &postmortemOptions{globalOptions: g}
	return &cobra.Command{
		Use:   "postmortem RUN",
		Short: "Print the report written when a run ended (--json: summary.json)",
		Args:  runArg,
		RunE:  o.run,
	}
}

func (o *postmortemOptions) run(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	c, ref, err := o.runClient(ctx, args[0])
	if err != nil {
		return err
	}
	pm, err := c.Postmortem(ctx, ref)
	if err != nil {
		return err
	}
	if o.JSON {
		_, err := fmt.Fprintf(o.Out, "%s\n", termtext.EscapeJSON(pm.Summary)) // as printJSON
		return err
	}
	_, err = fmt.Fprint(o.Out, termtext.QuoteLines(pm.Markdown))
	return err
}
