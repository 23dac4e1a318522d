package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
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

type eventsOptions struct {
	*globalOptions
	Follow bool
	After  int64
}

func newEventsCmd(g *globalOptions) *cobra.Command {
	o := &eventsOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "events RUN",
		Short: "Print a run's events; --follow goes on live until the run ends",
		Long: `Print a run's events in order. With --follow, the stored events are replayed
and then new ones are printed as they happen, with nothing missed or repeated,
until the run's terminal event. --after SEQ starts after that event (resume a
follower with the last seq it saw). --json prints one event per line.
A daemon that is down or restarting is waited for, up to a minute, whether
at the start or while following (then exit 69; the run goes on).`,
		Args: runArg,
		RunE: o.run,
	}
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", false, "go on live until the run ends")
	cmd.Flags().Int64Var(&o.After, "after", 0, "only events after this seq")
	return cmd
}

func (o *eventsOptions) run(cmd *cobra.Command, args []string) error {
	if o.After < 0 {
		return usageErrorf("--after must be an event seq ≥ 0")
	}
	ctx := cmd.Context()
	var c *api.Client
	var ref api.RunRef
	var run api.Run
	var err error
	if o.Follow {
		// A daemon that is down (restarting) now is waited for as one
		// that goes down while following.
		c, run, err = o.reachRun(ctx, args[0], outageLimit)
	} else {
		c, ref, err = o.runClient(ctx, args[0])
	}
	if err != nil {
		return err
	}
	emit := func(ev api.Event) {
		if o.JSON {
			b, _ := json.Marshal(ev)
			b = termtext.EscapeJSON(b) // as printJSON: DEL, C1 and bidi controls escaped too
			fmt.Fprintf(o.Out, "%s\n", b)
			return
		}
		fmt.Fprintf(o.Out, "%6d  %s  %-20s %s\n", ev.Seq, ev.TS.Local().Format("15:04:05.000"), ev.Type, termtext.Quote(eventDetail(ev)))
	}
	if !o.Follow {
		for ev, err := range c.Events(ctx, ref, o.After, false) {
			if err != nil {
				return err
			}
			emit(ev)
		}
		return nil
	}
	// Following outlives a daemon restart: the stream is resumed after the
	// last event printed. "last" was resolved once, so a newer run in the
	// workspace cannot take over the stream.
	f := newRunFollower(c, api.RunRef{Ref: run.ID})
	f.after = o.After
	if _, err := f.follow(ctx, emit, nil); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// eventDetail summarises an event's payload on one line: its Summary, or
// for other events their payload as sorted key=value pairs.
func eventDetail(ev api.Event) string {
	if s := ev.Summary(); s != "" {
		return truncate(s, 120)
	}
	var p map[string]any
	if json.Unmarshal(ev.Payload, &p) != nil || len(p) == 0 {
		return ""
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		v := ""
		if p[k] != nil {
			v = fmt.Sprint(p[k])
		}
		parts = append(parts, k+"="+v)
	}
	return truncate(strings.Join(parts, " "), 120)
}
