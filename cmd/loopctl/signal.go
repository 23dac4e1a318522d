package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
)

type signalOptions struct{ *globalOptions }

func newSignalCmd(g *globalOptions) *cobra.Command {
	o := &signalOptions{globalOptions: g}
	return &cobra.Command{
		Use:   "signal RUN",
		Short: "Raise the run's user_signal stop condition (evaluated after the current step)",
		Args:  runArg,
		RunE:  o.run,
	}
}

func (o *signalOptions) run(cmd *cobra.Command, args []string) error {
	return control(cmd, o.globalOptions, args[0], func(ctx context.Context, c *api.Client, ref api.RunRef) (api.Run, error) {
		return c.Signal(ctx, ref)
	}, func(r api.Run) string {
		return fmt.Sprintf("run %s: user_signal raised; it takes effect after the current step", shortID(r.ID))
	})
}
