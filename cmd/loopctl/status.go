package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
)

type statusOptions struct {
	*globalOptions
	Debug bool
}

func newStatusCmd(g *globalOptions) *cobra.Command {
	o := &statusOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "status RUN",
		Short: "Show a run: status, reason, iteration, counters, usage and cost, every stop condition",
		Args:  runArg,
		RunE:  o.run,
	}
	cmd.Flags().BoolVar(&o.Debug, "debug", false, "also show the last 100 stop-condition evaluations")
	return cmd
}

func (o *statusOptions) run(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	c, ref, err := o.runClient(ctx, args[0])
	if err != nil {
		return err
	}
	run, err := c.GetRun(ctx, ref, o.Debug)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(o.Out, run)
	}
	printStatus(o.Out, run)
	if steps, err := c.Steps(ctx, ref); err == nil {
		printChanges(o.Out, steps)
	}
	if o.Debug {
		printEvaluations(o.Out, run.Evaluations)
	}
	return nil
}

func printStatus(w io.Writer, r api.Run) {
	title := r.ID
	if r.Name != "" {
		title += "  (" + r.Name + ")"
	}
	fmt.Fprintf(w, "run %s\n", termtext.Quote(title))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  workspace\t%s\n", termtext.Quote(r.Workspace))
	if r.Isolation == "worktree" {
		wt := r.Worktree + " on " + r.Branch
		if r.BaseCommit != "" {
			wt += fmt.Sprintf(" (from %s at %s)", orDetached(r.BaseBranch), shortID(r.BaseCommit))
		}
		switch r.WorktreeState {
		case "":
			wt += "  [not added yet]"
		case "gone":
			wt += "  [gone: removed by hand; the branch keeps every recorded iteration]"
		case "removed":
			wt += "  [removed by loopctl clean; the branch stays]"
		}
		fmt.Fprintf(tw, "  worktree\t%s\n", termtext.Quote(wt))
	}
	state := string(r.Status)
	switch {
	case r.CurrentStep != nil:
		s := r.CurrentStep
		state += fmt.Sprintf("  (step #%d %s, iteration %d, running %s)", s.Seq, s.Phase, s.Iteration, ms(s.DurationMS))
	case r.Status == api.RunWaiting && !r.WaitUntil.IsZero():
		why := "usage limit"
		if r.Reason == "api_unavailable" {
			why = "model API unavailable"
		}
		state += "  (" + why + "; resumes at " + r.WaitUntil.Local().Format(time.DateTime) + ")"
	case r.Status == api.RunWaiting && r.Reason == "needs_answer":
		state += "  (the agent asked a question: loopctl answer " + shortID(r.ID) + " TEXT)"
	}
	if r.StopRequested != "" {
		state += "  [stop requested: " + r.StopRequested + "]"
	}
	if r.PauseRequest {
		state += "  [pause requested]"
	}
	fmt.Fprintf(tw, "  status\t%s\n", termtext.Quote(state))
	if r.Reason != "" {
		fmt.Fprintf(tw, "  reason\t%s\n", termtext.Quote(r.Reason))
		fmt.Fprintf(tw, "  \t%s\n", termtext.Quote(r.Description))
	}
	if r.ExitCode != nil {
		fmt.Fprintf(tw, "  exit code\t%d\n", *r.ExitCode)
	}
	fmt.Fprintf(tw, "  iteration\t%d  (%d steps, %s running)\n", r.Iteration, r.Steps, ms(r.ElapsedMS))
	fmt.Fprintf(tw, "  failures\timplementation %d · review %d · verification %d (consecutive)\n",
		r.Counters.Implementation, r.Counters.Review, r.Counters.Verification)
	if t := failingTrend(r.FailingTrend); t != "" {
		fmt.Fprintf(tw, "  tests\t%s\n", t)
	}
	if b := baselineLine(r.Baseline); b != "" {
		fmt.Fprintf(tw, "  baseline\t%s\n", termtext.Quote(b))
	}
	fmt.Fprintf(tw, "  usage\t%s\n", usageLine(r.Usage))
	fmt.Fprintf(tw, "  created\t%s\n", ago(r.CreatedAt))
	if r.LandedCommit != "" {
		fmt.Fprintf(tw, "  landed\t%s is now %s (loopctl land)\n", termtext.Quote(r.BaseBranch), shortCommit(r.LandedCommit))
	}
	tw.Flush()
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", termtext.Quote(warn))
	}
	if len(r.Conditions) > 0 {
		fmt.Fprintf(w, "\nstop conditions:\n")
		printConditions(w, r.Conditions)
	}
}

func orDetached(branch string) string {
	if branch == "" {
		return "detached HEAD"
	}
	return branch
}

// printChanges lists what each iteration's implementation step changed,
// from the change ledger (the last 20 iterations).
func printChanges(w io.Writer, steps []api.Step) {
	var lines []string
	for _, s := range steps {
		if s.Phase == api.PhaseImplementation && s.Changes != nil {
			line := fmt.Sprintf("  iteration %d\t%s", s.Iteration, changeSummary(s.Changes))
			if s.Changes.Commit != "" {
				line += "\t" + shortID(s.Changes.Commit)
			}
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\nchanges (the change ledger):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, l := range lines[max(len(lines)-20, 0):] {
		fmt.Fprintln(tw, l)
	}
	tw.Flush()
}

// changeSummary is "3 files +10 -2", "1 file +1 -0", "2 files +0 -0 (2
// binary)" or "no change".
func changeSummary(c *api.Changes) string {
	var s string
	switch c.FilesChanged {
	case 0:
		return "no change"
	case 1:
		s = fmt.Sprintf("1 file +%d -%d", c.Insertions, c.Deletions)
	default:
		s = fmt.Sprintf("%d files +%d -%d", c.FilesChanged, c.Insertions, c.Deletions)
	}
	if c.BinaryFiles > 0 {
		s += fmt.Sprintf(" (%d binary)", c.BinaryFiles)
	}
	return s
}

func printConditions(w io.Writer, cs []api.Condition) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range cs {
		met := "  "
		if c.Met {
			met = "✔ "
		}
		fmt.Fprintf(tw, "  %s%s\t%s\t%s\t%s\n", met, c.Kind, termtext.Quote(c.Description), bar(c.Progress, 20), termtext.Quote(truncate(conditionDetail(c), 60)))
	}
	tw.Flush()
}

func printEvaluations(w io.Writer, evs []api.Evaluation) {
	fmt.Fprintf(w, "\nevaluations (oldest first, last %d):\n", len(evs))
	for _, e := range evs {
		fmt.Fprintf(w, "\n  %s  step %d  iteration %d  %dµs\n", e.At.Local().Format("15:04:05.000"), e.StepID, e.Iteration, e.DurationUS)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, c := range e.Results {
			p := "n/a"
			if c.Progress != nil {
				p = fmt.Sprintf("%.3f", *c.Progress)
			}
			fmt.Fprintf(tw, "    %s\t%s\tmet=%v\tprogress=%s\t%dµs\t%s\n", c.Kind, c.Type, c.Met, p, c.DurationUS, termtext.Quote(truncate(c.Reason, 60)))
		}
		tw.Flush()
	}
}

// failingTrend renders the failing-test counts of the verification
// failures since the last pass: "failing 5 → 4 → 3" ("?" where a count
// was not parsed), so a falling count reads as progress.
func failingTrend(counts []int) string {
	if len(counts) == 0 {
		return ""
	}
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = "?"
		if n >= 0 {
			parts[i] = strconv.Itoa(n)
		}
	}
	return "failing " + strings.Join(parts, " → ")
}

// baselineLine is verify_baseline's record: the tests failing before the
// run (pre-existing) and which of them the newest verification ignored.
func baselineLine(b *api.Baseline) string {
	switch {
	case b == nil:
		return ""
	case b.Seq == 0:
		return "the verification runs once before iteration 1 (verify_baseline)"
	case !b.Known:
		return fmt.Sprintf("step #%d: no test results could be read, so no failure is ignored", b.Seq)
	case len(b.Failing) == 0:
		return fmt.Sprintf("step #%d: every test passed before the run", b.Seq)
	}
	line := fmt.Sprintf("step #%d: %d failing before the run (%s)", b.Seq, len(b.Failing), firstNames(b.Failing))
	if b.IgnoredSeq > 0 {
		if len(b.Ignored) == 0 {
			line += fmt.Sprintf("; step #%d ignored none", b.IgnoredSeq)
		} else {
			line += fmt.Sprintf("; step #%d ignored %d pre-existing: %s", b.IgnoredSeq, len(b.Ignored), firstNames(b.Ignored))
		}
	}
	return line
}

// firstNames is the first three names and how many more.
func firstNames(names []string) string {
	shown := names[:min(len(names), 3)]
	out := strings.Join(shown, ", ")
	if more := len(names) - len(shown); more > 0 {
		out += fmt.Sprintf(" (+%d more)", more)
	}
	return out
}
