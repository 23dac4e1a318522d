package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
)

type stopOptions struct {
	*globalOptions
	Now bool
}

func newStopCmd(g *globalOptions) *cobra.Command {
	o := &stopOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "stop RUN",
		Short: "Stop a run after its current step (INTERRUPTED); --now kills the step",
		Long: `Stop a run. By default the current step finishes, then the run ends
INTERRUPTED (reason user_stop); should the daemon die while that step runs
and its outcome be lost, its phase runs again first, as after any lost
outcome, and the run ends after it. With --now the step's whole process group is
stopped (SIGTERM, a grace period, SIGKILL), the step is recorded CANCELED and
the run ends INTERRUPTED. A stopped run can be resumed with loopctl resume.`,
		Args: runArg,
		RunE: o.run,
	}
	cmd.Flags().BoolVar(&o.Now, "now", false, "kill the running step instead of letting it finish")
	return cmd
}

func (o *stopOptions) run(cmd *cobra.Command, args []string) error {
	return control(cmd, o.globalOptions, args[0], func(ctx context.Context, c *api.Client, ref api.RunRef) (api.Run, error) {
		return c.Stop(ctx, ref, api.StopRequest{Now: o.Now})
	}, func(r api.Run) string {
		if r.Status.Terminal() {
			return outcomeLine(r)
		}
		if o.Now {
			return fmt.Sprintf("run %s: stopping now; its step is being killed", shortID(r.ID))
		}
		return fmt.Sprintf("run %s: will stop after the current step (use --now to kill it)", shortID(r.ID))
	})
}
