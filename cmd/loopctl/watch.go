package main

// The live view of loopctl watch is drawn with the terminfo package of
// github.com/gdamore/tcell/v2, with golang.org/x/term for raw mode and the
// window size, and github.com/rivo/uniseg for display widths. tcell is the
// long-maintained, widely used Go terminal library (micro, k9s, aerc and
// tview build on it); its terminfo package supplies every control sequence
// from the terminal's own description (alternate screen, cursor
// addressing, attributes, colours), so none is written by hand, and it
// links no other module. x/term is the Go team's; uniseg is tcell's own
// width dependency.
//
// Why not tcell's Screen, or bubbletea + lipgloss, which do more of the
// work (deps_test.go allows them: it bans database/sql, not the driver
// interfaces their colour package implements): the view already has
// bubbletea's shape, a model changed only by messages from its feeds
// (watch_model.go, watch_tui.go) and drawn as a whole frame each time,
// and what is written by hand below terminfo is small: frames of styled
// lines, rewritten line by line where they changed (watch_term.go), and
// three keys. Either library would replace that tested renderer and key
// reader with its own and bring modules of its own (tcell's Screen:
// gdamore/encoding, go-colorful, x/text; bubbletea: more), and draw the
// same frames.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
)

type watchOptions struct {
	*globalOptions
	Plain bool
	Raw   bool
}

func newWatchCmd(g *globalOptions) *cobra.Command {
	o := &watchOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "watch RUN",
		Short: "Follow a run live; exits with the run's exit code when it ends",
		Long: `Follow a run live until it ends, then print how it ended and exit with its
code: 0 COMPLETED, 1 FAILED, 2 ABORTED, 3 INTERRUPTED.

On a terminal, a full-screen view shows the run's status, iteration and
current step with its elapsed time, a progress bar toward each limit and
failure condition, the completion gate, recent events and the last lines of
the step's output, an agent's stream-json shown as a readable transcript
(--raw: as written). q or Ctrl+C leaves the view (exit 130); the run goes on.

When stdout is not a terminal (or with --plain), one line is printed per
event instead; with --json, each event as a JSON object on its own line.`,
		Args: runArg,
		RunE: o.run,
	}
	cmd.Flags().BoolVar(&o.Plain, "plain", false, "print a line per event even on a terminal")
	cmd.Flags().BoolVar(&o.Raw, "raw", false, "show the step's output as the agent wrote it, not as a transcript")
	return cmd
}

func (o *watchOptions) run(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	c, ref, err := o.runClient(ctx, args[0])
	if err != nil {
		return err
	}
	// Resolve "last" or a prefix once: later requests must name the same
	// run even if a newer one is started meanwhile.
	run, err := c.GetRun(ctx, ref, false)
	if err != nil {
		return err
	}
	ref = api.RunRef{Ref: run.ID}

	var final api.Run
	if screen := o.screen(); screen != nil {
		defer screen.Close() // also on a panic: never leave the terminal raw
		final, err = watchTUIOutput(ctx, screen, c, ref, run, o.Raw)
		screen.Close() // restore the terminal before anything is printed
	} else {
		final, err = watchPlain(ctx, o.Out, newRunFollower(c, ref), o.JSON)
	}
	switch {
	case errors.Is(err, errWatchQuit):
		return &exitError{code: exitInterrupted, msg: fmt.Sprintf("left the view; run %s goes on in the daemon", shortID(run.ID))}
	case err != nil && ctx.Err() != nil:
		return nil // SIGINT or SIGTERM: main reports it, with exit 130
	case err != nil:
		return err
	}
	if !o.JSON {
		fmt.Fprintln(o.Out, outcomeLine(final))
	}
	if code := final.Status.ExitCode(); code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// screen returns the terminal, taken over, when the live view can be
// drawn, else nil for the plain output: stdout is not a terminal (a pipe,
// a file, a CI log), --plain or --json was given, or the terminal cannot
// be driven (say TERM=dumb).
func (o *watchOptions) screen() *ttyScreen {
	if o.Plain || o.JSON {
		return nil
	}
	f, ok := o.Out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	s, err := openTTYScreen()
	if err != nil {
		fmt.Fprintf(o.Err, "loopctl: no live view (%v); printing events instead\n", err)
		return nil
	}
	return s
}

// watchPlain prints a line per event (an NDJSON object with asJSON) until
// the run ends, and returns its final state. The lines carry no escape
// codes: they are for pipes, files and CI logs.
func watchPlain(ctx context.Context, w io.Writer, f *runFollower, asJSON bool) (api.Run, error) {
	reported := false // the current outage was reported
	var timer stepTimer
	onEvent := func(ev api.Event) {
		if asJSON {
			b, _ := json.Marshal(ev)
			b = termtext.EscapeJSON(b) // as printJSON: DEL, C1 and bidi controls escaped too
			fmt.Fprintf(w, "%s\n", b)
			return
		}
		fmt.Fprintln(w, plainEventLine(ev, timer.took(ev)))
		reported = false
	}
	onRetry := func(err error) {
		if !asJSON && !reported {
			reported = true
			fmt.Fprintf(w, "daemon unreachable (%v); retrying\n", err)
		}
	}
	return f.follow(ctx, onEvent, onRetry)
}

// plainEventLine is one event as a line: local time, type, detail, and
// for a finished step how long it took (took ≥ 0).
func plainEventLine(ev api.Event, took time.Duration) string {
	return fmt.Sprintf("%s  %-20s %s", ev.TS.Local().Format(time.TimeOnly), ev.Type, watchEventDetail(ev, took))
}
