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
		Long: `Raise the run's user_signal stop condition; it is evaluated after the
current step. A run with no user_signal condition (in its stop file, at any
depth) is refused with exit 64: the signal would do nothing. A run's
conditions are fixed when it starts; loopctl stop ends a run without one.`,
		Args: runArg,
		RunE: o.run,
	}
}

func (o *signalOptions) run(cmd *cobra.Command, args []string) error {
	return control(cmd, o.globalOptions, args[0], func(ctx context.Context, c *api.Client, ref api.RunRef) (api.Run, error) {
		return c.Signal(ctx, ref)
	}, func(r api.Run) string {
		return fmt.Sprintf("run %s: user_signal raised; it takes effect after the current step", shortID(r.ID))
	})
}
