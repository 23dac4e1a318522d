package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
	"github.com/loopd/loopd/internal/usagefmt"
)

// printJSON writes v as indented JSON, with the characters a terminal
// would act on that the encoder leaves raw (DEL, C1 controls, bidi
// overrides) escaped too: --json output is read on terminals as well as by
// programs, and decodes to the same values.
func printJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(termtext.EscapeJSON(b.Bytes()))
	return err
}

// jsonLines writes NDJSON copied from the daemon a whole line at a time,
// each with termtext.EscapeJSON applied, as printJSON does.
type jsonLines struct {
	w   io.Writer
	buf []byte
}

func (j *jsonLines) Write(p []byte) (int, error) {
	j.buf = append(j.buf, p...)
	if i := bytes.LastIndexByte(j.buf, '\n'); i >= 0 {
		_, err := j.w.Write(termtext.EscapeJSON(j.buf[:i+1]))
		j.buf = append(j.buf[:0], j.buf[i+1:]...)
		if err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes a last line that has no line feed.
func (j *jsonLines) Flush() error {
	if len(j.buf) == 0 {
		return nil
	}
	_, err := j.w.Write(termtext.EscapeJSON(j.buf))
	j.buf = j.buf[:0]
	return err
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ago formats how long ago t was.
func ago(t api.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration(time.Since(t.Time)) + " ago"
}

// duration formats d compactly: 850ms, 12s, 3m05s, 2h04m, 3d02h.
func duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.0fs", math.Floor(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func ms(n int64) string { return duration(time.Duration(n) * time.Millisecond) }

// count formats a token count, as the dashboard does.
func count(n int64) string { return usagefmt.Tokens(n) }

// cost formats a usage's cost, as the dashboard does.
func cost(u api.Usage) string { return usagefmt.Cost(u) }

func usageLine(u api.Usage) string {
	// An agent that reported no cost (Codex, Gemini, most commands) shows
	// none, never "$0.00": unknown is not free.
	reported := "no agent-reported cost"
	if v, ok := u.ReportedCost(); ok {
		reported = "agent-reported " + usagefmt.USD(v)
	}
	return fmt.Sprintf("%s in · %s out · %s cache read · %s cache write · %s (%s)",
		count(u.InputTokens), count(u.OutputTokens), count(u.CacheReadTokens), count(u.CacheWriteTokens), cost(u), reported)
}

// bar draws a progress bar of width cells for a fraction, "n/a" for nil.
func bar(p *float64, width int) string {
	if p == nil {
		return "[" + strings.Repeat(" ", width) + "]  n/a"
	}
	f := min(max(*p, 0), 1)
	n := int(math.Floor(f * float64(width)))
	return fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat("-", width-n), int(math.Floor(f*100)))
}

// testsSummary is "12 passed, 2 failed (TestParseFails, TestTable/case_b)".
func testsSummary(t *api.Tests) string {
	if t == nil {
		return ""
	}
	if t.Summary != "" {
		return t.Summary
	}
	var parts []string
	if t.Passed != nil {
		parts = append(parts, fmt.Sprintf("%d passed", *t.Passed))
	}
	if t.Failed != nil {
		s := fmt.Sprintf("%d failed", *t.Failed)
		if len(t.FailedNames) > 0 {
			s += " (" + strings.Join(t.FailedNames[:min(3, len(t.FailedNames))], ", ") + ")"
		}
		parts = append(parts, s)
	}
	if t.Skipped != nil && *t.Skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped", *t.Skipped))
	}
	return strings.Join(parts, ", ")
}

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// outcomeLine describes how a run ended (or where it is).
func outcomeLine(r api.Run) string {
	s := fmt.Sprintf("run %s %s", shortID(r.ID), r.Status)
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	if r.Description != "" {
		s += " — " + r.Description
	}
	return termtext.Quote(s)
}

// conditionDetail is what a stop condition last said: its reason, or why
// it could not be evaluated.
func conditionDetail(c api.Condition) string {
	switch {
	case c.TimedOut:
		return "timed out: " + c.Reason
	case c.Error != "":
		return "error: " + c.Error
	}
	return c.Reason
}
