// Package postmortem writes the report of an ended run from its persisted
// history: runs/<id>/postmortem.md for people and runs/<id>/summary.json for
// scripts (docs/reference.md and docs/http-api.md).
package postmortem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
)

// File names inside runs/<id>/.
const (
	MarkdownFile = "postmortem.md"
	SummaryFile  = "summary.json"
)

// Input is everything a report is built from.
type Input struct {
	Run   api.Run
	Steps []api.Step
	// Events are the run's events, or only its first and last
	// TimelineEnds events when it has more (EventCount says how many).
	Events []api.Event
	// EventCount is how many events the run has in all; 0 means
	// len(Events).
	EventCount int
	// LastFailureTail is the output tail of the last failing verification
	// step (or of the last failing step when no verification failed).
	LastFailureTail string
}

// PhaseSummary counts a phase's steps.
type PhaseSummary struct {
	Steps         int `json:"steps"`
	Passed        int `json:"passed"`
	Failed        int `json:"failed"`
	Canceled      int `json:"canceled"`
	Interrupted   int `json:"interrupted"`
	LongestStreak int `json:"longest_failure_streak"`
}

// Failure is the last failing step.
type Failure struct {
	Seq         int       `json:"seq"`
	Phase       api.Phase `json:"phase"`
	Iteration   int       `json:"iteration"`
	Error       string    `json:"error"`
	FailedTests []string  `json:"failed_tests,omitempty"`
	OutputTail  string    `json:"output_tail"`
}

// TimelineEntry is one event of the run, summarised.
type TimelineEntry struct {
	Seq    int64    `json:"seq"`
	TS     api.Time `json:"ts"`
	Type   string   `json:"type"`
	Detail string   `json:"detail,omitempty"`
}

// Summary is summary.json.
type Summary struct {
	RunID       string                     `json:"run_id"`
	Name        string                     `json:"name"`
	Workspace   string                     `json:"workspace"`
	Goal        string                     `json:"goal"`
	Status      api.RunStatus              `json:"status"`
	Reason      string                     `json:"reason"`
	Description string                     `json:"description"`
	Condition   json.RawMessage            `json:"condition,omitempty"`
	ExitCode    int                        `json:"exit_code"`
	Iterations  int                        `json:"iterations"`
	Phases      map[api.Phase]PhaseSummary `json:"phases"`
	Usage       api.Usage                  `json:"usage"`
	CreatedAt   api.Time                   `json:"created_at"`
	StartedAt   api.Time                   `json:"started_at"`
	EndedAt     api.Time                   `json:"ended_at"`
	DurationMS  int64                      `json:"duration_ms"` // wall time from start to end
	RunningMS   int64                      `json:"running_ms"`  // time spent executing steps
	LastFailure *Failure                   `json:"last_failure,omitempty"`
	Timeline    []TimelineEntry            `json:"timeline"`
}

// maxTimeline bounds the timeline of very long runs: the first and the
// last TimelineEnds entries are kept, and the gap says how many are left
// out.
const maxTimeline = 2 * TimelineEnds

// TimelineEnds is how many of a run's first, and of its last, events the
// timeline shows: all a caller needs to load.
const TimelineEnds = 100

// Build computes the summary of a run.
func Build(in Input) Summary {
	r := in.Run
	s := Summary{
		RunID: r.ID, Name: r.Name, Workspace: r.Workspace, Goal: r.Goal, Status: r.Status,
		Reason: r.Reason, Description: r.Description, Condition: r.Condition,
		ExitCode: r.Status.ExitCode(), Iterations: r.Iteration, Usage: r.Usage,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, EndedAt: r.EndedAt, RunningMS: r.ElapsedMS,
		Phases: map[api.Phase]PhaseSummary{},
	}
	if !r.StartedAt.IsZero() && !r.EndedAt.IsZero() {
		s.DurationMS = r.EndedAt.Sub(r.StartedAt.Time).Milliseconds()
	}
	streak := map[api.Phase]int{}
	var lastFail, lastVerifyFail *api.Step
	for i := range in.Steps {
		st := &in.Steps[i]
		ps := s.Phases[st.Phase]
		ps.Steps++
		switch st.Status {
		case api.StepSucceeded:
			ps.Passed++
			streak[st.Phase] = 0
		case api.StepFailed:
			ps.Failed++
			streak[st.Phase]++
			ps.LongestStreak = max(ps.LongestStreak, streak[st.Phase])
			if st.Phase == api.PhaseBaseline {
				break // verify_baseline: failures before the run are not the run's
			}
			lastFail = st
			if st.Phase == api.PhaseVerification {
				lastVerifyFail = st
			}
		case api.StepCanceled:
			ps.Canceled++
		case api.StepInterrupted:
			ps.Interrupted++
		}
		s.Phases[st.Phase] = ps
	}
	if lastVerifyFail != nil {
		lastFail = lastVerifyFail
	}
	if lastFail != nil {
		f := &Failure{Seq: lastFail.Seq, Phase: lastFail.Phase, Iteration: lastFail.Iteration,
			Error: lastFail.Error, OutputTail: in.LastFailureTail}
		if lastFail.Tests != nil {
			f.FailedTests = lastFail.Tests.FailedNames
		}
		s.LastFailure = f
	}
	s.Timeline = timeline(in.Events, in.EventCount)
	return s
}

// timeline summarises evs, a run's events (all of them, or only its first
// and last TimelineEnds when total says there are more), keeping the first
// and last TimelineEnds with the count of those left out between them.
func timeline(evs []api.Event, total int) []TimelineEntry {
	total = max(total, len(evs))
	if total <= maxTimeline || len(evs) < maxTimeline {
		out := make([]TimelineEntry, 0, len(evs))
		for _, ev := range evs {
			out = append(out, entry(ev))
		}
		return out
	}
	out := make([]TimelineEntry, 0, maxTimeline+1)
	for _, ev := range evs[:TimelineEnds] {
		out = append(out, entry(ev))
	}
	next := evs[len(evs)-TimelineEnds]
	out = append(out, TimelineEntry{Seq: next.Seq, TS: next.TS, Type: "…",
		Detail: fmt.Sprintf("%d events omitted", total-maxTimeline)})
	for _, ev := range evs[len(evs)-TimelineEnds:] {
		out = append(out, entry(ev))
	}
	return out
}

func entry(ev api.Event) TimelineEntry {
	return TimelineEntry{Seq: ev.Seq, TS: ev.TS, Type: ev.Type, Detail: ev.Summary()}
}

// Write writes postmortem.md and summary.json into dir atomically (each is
// written to a temporary file and renamed), and returns the summary.
func Write(dir string, in Input) (Summary, error) {
	s := Build(in)
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return s, fmt.Errorf("encode summary: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return s, fmt.Errorf("write postmortem: %w", err)
	}
	if err := writeFile(filepath.Join(dir, SummaryFile), append(js, '\n')); err != nil {
		return s, err
	}
	return s, writeFile(filepath.Join(dir, MarkdownFile), []byte(Markdown(s)))
}

func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Markdown renders the human report. It is read on terminals (cat,
// loopctl postmortem) and holds what a repository wrote (the goal, test
// names, the verification's output): control characters are quoted, so
// that they are shown, never obeyed.
func Markdown(s Summary) string {
	var b bytes.Buffer
	title := s.RunID
	if s.Name != "" {
		title = s.Name + " (" + s.RunID + ")"
	}
	fmt.Fprintf(&b, "# Postmortem: run %s\n\n", title)
	fmt.Fprintf(&b, "**%s** — `%s`  \n%s\n\n", s.Status, s.Reason, s.Description)
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| workspace | `%s` |\n", s.Workspace)
	fmt.Fprintf(&b, "| exit code | %d |\n", s.ExitCode)
	fmt.Fprintf(&b, "| iterations | %d |\n", s.Iterations)
	fmt.Fprintf(&b, "| duration | %s (steps running: %s) |\n", ms(s.DurationMS), ms(s.RunningMS))
	u := s.Usage
	cost := fmt.Sprintf("$%.4f", u.CostUSD)
	if u.CostUnknown {
		cost += " (incomplete: some usage could not be priced and had no reported cost)"
	}
	fmt.Fprintf(&b, "| tokens | %d input, %d output, %d cache read, %d cache write |\n",
		u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens)
	reported := "no cost reported by the agent"
	if v, ok := u.ReportedCost(); ok {
		reported = fmt.Sprintf("agent-reported $%.4f", v)
	}
	fmt.Fprintf(&b, "| cost | %s (%s) |\n", cost, reported)
	if len(s.Condition) > 0 {
		fmt.Fprintf(&b, "| condition | `%s` |\n", s.Condition)
	}
	fmt.Fprintf(&b, "\n## Goal\n\n%s\n", quote(s.Goal))
	fmt.Fprintf(&b, "\n## Steps per phase\n\n| phase | steps | passed | failed | canceled | interrupted | longest failure streak |\n|---|---|---|---|---|---|---|\n")
	for _, p := range api.Phases {
		ps, ok := s.Phases[p]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d |\n", p, ps.Steps, ps.Passed, ps.Failed, ps.Canceled, ps.Interrupted, ps.LongestStreak)
	}
	if f := s.LastFailure; f != nil {
		fmt.Fprintf(&b, "\n## Last failure\n\nStep #%d, %s, iteration %d: %s\n", f.Seq, f.Phase, f.Iteration, f.Error)
		if len(f.FailedTests) > 0 {
			fmt.Fprintf(&b, "\nFailing tests: %s\n", strings.Join(f.FailedTests, ", "))
		}
		if f.OutputTail != "" {
			fmt.Fprintf(&b, "\n```\n%s\n```\n", strings.TrimRight(f.OutputTail, "\n"))
		}
	}
	fmt.Fprintf(&b, "\n## Timeline\n\n")
	for _, e := range s.Timeline {
		ts := ""
		if !e.TS.IsZero() {
			ts = e.TS.UTC().Format(time.TimeOnly)
		}
		fmt.Fprintf(&b, "- `%s` %s", ts, e.Type)
		if e.Detail != "" {
			fmt.Fprintf(&b, " — %s", e.Detail)
		}
		b.WriteString("\n")
	}
	return termtext.QuoteLines(b.String())
}

func quote(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

func ms(d int64) string {
	return (time.Duration(d) * time.Millisecond).Round(time.Millisecond).String()
}
