package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
)

func newWatchCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "watch RUN",
		Short: "Follow a run live; exits with the run's exit code when it ends",
		Args:  runArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := g.ref(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := g.client(ctx)
			if err != nil {
				return err
			}
			run, err := c.GetRun(ctx, ref, false)
			if err != nil {
				return err
			}
			ref = api.RunRef{Ref: run.ID}
			for ev, err := range c.Events(ctx, ref, 0, true) {
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				fmt.Fprintf(g.Out, "%s  %-20s %s\n", ev.TS.Local().Format(time.TimeOnly), ev.Type, eventDetail(ev))
			}
			return waitAndReport(cmd, g, c, ref)
		},
	}
}
