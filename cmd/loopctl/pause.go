package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
)

type pauseOptions struct{ *globalOptions }

func newPauseCmd(g *globalOptions) *cobra.Command {
	o := &pauseOptions{globalOptions: g}
	return &cobra.Command{
		Use:   "pause RUN",
		Short: "Hold a run after its current step (PAUSED, survives daemon restarts)",
		Args:  runArg,
		RunE:  o.run,
	}
}

func (o *pauseOptions) run(cmd *cobra.Command, args []string) error {
	return control(cmd, o.globalOptions, args[0], func(ctx context.Context, c *api.Client, ref api.RunRef) (api.Run, error) {
		return c.Pause(ctx, ref)
	}, func(r api.Run) string {
		if r.Status == api.RunPaused {
			return fmt.Sprintf("run %s PAUSED; continue it with: loopctl resume %s", shortID(r.ID), shortID(r.ID))
		}
		return fmt.Sprintf("run %s will pause after the current step", shortID(r.ID))
	})
}
