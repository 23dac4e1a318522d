package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
)

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
