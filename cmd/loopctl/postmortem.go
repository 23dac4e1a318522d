package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newPostmortemCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "postmortem RUN",
		Short: "Print the report written when a run ended (--json: summary.json)",
		Args:  runArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, ref, err := g.runClient(ctx, args[0])
			if err != nil {
				return err
			}
			pm, err := c.Postmortem(ctx, ref)
			if err != nil {
				return err
			}
			if g.JSON {
				_, err := fmt.Fprintf(g.Out, "%s\n", pm.Summary)
				return err
			}
			_, err = fmt.Fprint(g.Out, pm.Markdown)
			return err
		},
	}
}
