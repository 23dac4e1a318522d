package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/transcript"
)

type logsOptions struct {
	*globalOptions
	Step   int
	Follow bool
	Raw    bool
}

func newLogsCmd(g *globalOptions) *cobra.Command {
	o := &logsOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "logs RUN",
		Short: "Print the output of a run's steps (or one step) as a readable transcript; --follow streams it live",
		Long: `Print the output of a run's steps in order, with a header line before each
step, or of one step (--step N, the # in loopctl steps). An agent's
stream-json (Claude Code, Codex, Gemini CLI) is shown as a transcript: its
messages, tool calls with their commands, their results (the first lines),
errors and usage per message; other output as it is. --raw prints the lines
as the agent wrote them. With --follow, output is streamed as it is written
and the command ends when the run (or the step) does; a pause does not end
it, and a daemon restart of up to a minute is ridden out (the stream goes on
where it was; with --json it exits 69 and says so). --json prints NDJSON
objects {"seq","phase","text"} of the raw output.`,
		Args: runArg,
		RunE: o.run,
	}
	cmd.Flags().IntVar(&o.Step, "step", 0, "only this step (its # in `loopctl steps`)")
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", false, "stream output as it is written, until the run (or the step) ends")
	cmd.Flags().BoolVar(&o.Raw, "raw", false, "print the output as the agent wrote it (stream-json lines), not as a transcript")
	return cmd
}

func (o *logsOptions) run(cmd *cobra.Command, args []string) error {
	if o.Step < 0 {
		return usageErrorf("--step must be a step number ≥ 1")
	}
	ctx := cmd.Context()
	c, ref, err := o.runClient(ctx, args[0])
	if err != nil {
		return err
	}
	whole := o.Follow && o.Step == 0
	if whole {
		// "last" is resolved once: a newer run in the workspace must not
		// take over, and the end of the stream is checked against this run.
		run, err := c.GetRun(ctx, ref, false)
		if err != nil {
			return err
		}
		ref = api.RunRef{Ref: run.ID}
	}
	// An agent's stream-json is rendered as a transcript; the bytes
	// counted for a resumed stream are the raw ones read.
	out := o.Out
	if !o.Raw && !o.JSON {
		r := transcript.NewRenderer(o.Out)
		defer r.Flush()
		out = r
	}
	if o.JSON {
		j := &jsonLines{w: o.Out}
		defer j.Flush()
		out = j
	}
	// A whole run's text stream is resumed after a daemon restart (as
	// watch rides one out), skipping the bytes already printed.
	resumable := whole && !o.JSON
	var printed int64
	var failingSince time.Time
	for {
		body, err := c.Logs(ctx, ref, api.LogsOptions{Step: o.Step, Follow: o.Follow, JSON: o.JSON, Skip: printed})
		var copyErr error
		if err == nil {
			var n int64
			n, copyErr = io.Copy(out, body)
			body.Close()
			printed += n
			if n > 0 {
				failingSince = time.Time{}
			}
		} else if !resumable || !isUnavailable(err) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if !whole {
			if copyErr != nil {
				return fmt.Errorf("read logs: %w", copyErr)
			}
			return nil
		}
		// The stream of a whole run ends only with the run, or when the
		// daemon goes away: the run's status tells which.
		run, err := c.GetRun(ctx, ref, false)
		if err == nil && run.Status.Terminal() {
			if copyErr == nil && !resumable {
				return nil
			}
			if !resumable {
				return fmt.Errorf("read logs: %w", copyErr)
			}
			// Output written after a shutdown cut the stream would be
			// missing: read the rest once.
			body, err := c.Logs(ctx, ref, api.LogsOptions{Skip: printed})
			if err != nil {
				return err
			}
			defer body.Close()
			if _, err := io.Copy(out, body); err != nil && ctx.Err() == nil {
				return fmt.Errorf("read logs: %w", err)
			}
			return nil
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if !resumable || time.Since(failingSince) > time.Minute {
			return &exitError{code: exitUnavailable, msg: fmt.Sprintf("the daemon stopped while following run %s; the run goes on: "+
				"run loopctl logs %s --follow again once the daemon is back", ref.Ref, ref.Ref)}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}
