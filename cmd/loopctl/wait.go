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
