package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
)

type waitOptions struct {
	*globalOptions
	Timeout time.Duration
}

func newWaitCmd(g *globalOptions) *cobra.Command {
	o := &waitOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "wait RUN",
		Short: "Wait for a run to end; exit 0 COMPLETED, 1 FAILED, 2 ABORTED, 3 INTERRUPTED",
		Long: `Wait for a run to end, then print how it ended; the exit code says it (0
COMPLETED, 1 FAILED, 2 ABORTED, 3 INTERRUPTED). A daemon that is down or
restarting is waited for, up to a minute, whether at the start or during the
wait (then exit 69; the run goes on).`,
		Args: runArg,
		RunE: o.run,
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "give up after this long (exit 124; the run goes on)")
	return cmd
}

func (o *waitOptions) run(cmd *cobra.Command, args []string) error {
	if o.Timeout < 0 {
		return usageErrorf("--timeout must be positive")
	}
	ctx := cmd.Context()
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	// A daemon that is down (restarting) now is waited for as one that
	// goes down during the wait.
	c, run, err := o.reachRun(ctx, args[0], outageLimit)
	if err != nil {
		return waitError(cmd, api.RunRef{Ref: args[0]}, err, o.Timeout)
	}
	return waitWithin(ctx, cmd, o.globalOptions, c, api.RunRef{Ref: run.ID}, o.Timeout)
}

// waitAndReport waits for the run to end, prints how it ended and returns
// its exit code as an exitError.
// A timeout of 0 waits for as long as it takes.
func waitAndReport(cmd *cobra.Command, g *globalOptions, c *api.Client, ref api.RunRef, timeout time.Duration) error {
	ctx := cmd.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return waitWithin(ctx, cmd, g, c, ref, timeout)
}

// waitWithin is waitAndReport with ctx already bounded by timeout.
func waitWithin(ctx context.Context, cmd *cobra.Command, g *globalOptions, c *api.Client, ref api.RunRef, timeout time.Duration) error {
	// "last" is resolved once: a newer run started in the workspace while
	// we wait must not take this one's place.
	run, err := c.GetRun(ctx, ref, false)
	if err != nil {
		return waitError(cmd, ref, err, timeout)
	}
	ref = api.RunRef{Ref: run.ID}
	// A daemon restart while waiting is invisible: the wait goes on.
	var failingSince time.Time
	for {
		began := time.Now()
		run, err = c.Wait(ctx, ref)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			break
		}
		// A wait that held for a while before it broke was connected: this
		// is a new outage, with a minute of its own.
		if failingSince.IsZero() || time.Since(began) > 2*time.Second {
			failingSince = time.Now()
		} else if time.Since(failingSince) > outageLimit {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return waitError(cmd, ref, err, timeout)
	}
	if g.JSON {
		if err := printJSON(g.Out, run); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(g.Out, outcomeLine(run))
	}
	if code := run.Status.ExitCode(); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

func waitError(cmd *cobra.Command, ref api.RunRef, err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) && cmd.Context().Err() == nil && timeout > 0 {
		return &exitError{code: exitTimeout, msg: fmt.Sprintf("run %s has not ended after %s; it goes on", ref.Ref, timeout)}
	}
	return err
}

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

func newPauseCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "pause RUN",
		Short: "Hold a run after its current step (PAUSED, survives daemon restarts)",
		Args:  runArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return control(cmd, g, args[0], func(ctx context.Context, c *api.Client, ref api.RunRef) (api.Run, error) {
				return c.Pause(ctx, ref)
			}, func(r api.Run) string {
				if r.Status == api.RunPaused {
					return fmt.Sprintf("run %s PAUSED; continue it with: loopctl resume %s", shortID(r.ID), shortID(r.ID))
				}
				return fmt.Sprintf("run %s will pause after the current step", shortID(r.ID))
			})
		},
	}
}

type resumeOptions struct {
	*globalOptions
	Set []string
}

func newResumeCmd(g *globalOptions) *cobra.Command {
	o := &resumeOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "Continue a PAUSED, WAITING, FAILED, ABORTED or INTERRUPTED run, counters and budgets intact",
		Long: `Continue a run where it left off. Its iteration count, failure streaks,
tokens and cost carry on (they are derived from its recorded steps), so a run
that ended on a limit ends again at once unless the limit is raised:

  loopctl resume last --set max_iterations=80 --set max_cost=20`,
		Args: runArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return control(cmd, g, args[0], func(ctx context.Context, c *api.Client, ref api.RunRef) (api.Run, error) {
				return c.Resume(ctx, ref, api.ResumeRequest{Set: o.Set})
			}, func(r api.Run) string { return fmt.Sprintf("run %s resumed (%s)", shortID(r.ID), r.Status) })
		},
	}
	cmd.Flags().StringArrayVar(&o.Set, "set", nil, "change a config key=value (e.g. raise a limit), repeatable")
	return cmd
}

func newSignalCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "signal RUN",
		Short: "Raise the run's user_signal stop condition (evaluated after the current step)",
		Long: `Raise the run's user_signal stop condition; it is evaluated after the
current step. A run with no user_signal condition (in its stop file, at any
depth) is refused with exit 64: the signal would do nothing. A run's
conditions are fixed when it starts; loopctl stop ends a run without one.`,
		Args: runArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return control(cmd, g, args[0], func(ctx context.Context, c *api.Client, ref api.RunRef) (api.Run, error) {
				return c.Signal(ctx, ref)
			}, func(r api.Run) string {
				return fmt.Sprintf("run %s: user_signal raised; it takes effect after the current step", shortID(r.ID))
			})
		},
	}
}

// control runs a state-changing request and reports the run's new state.
func control(cmd *cobra.Command, g *globalOptions, arg string,
	do func(context.Context, *api.Client, api.RunRef) (api.Run, error), say func(api.Run) string) error {
	ctx := cmd.Context()
	c, ref, err := g.runClient(ctx, arg)
	if err != nil {
		return err
	}
	run, err := do(ctx, c, ref)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, run)
	}
	fmt.Fprintln(g.Out, say(run))
	return nil
}
