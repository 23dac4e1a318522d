package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func fraction(f float64) *float64 { return &f }

func event(seq int64, typ string, at time.Time, payload any) api.Event {
	b, _ := json.Marshal(payload)
	return api.Event{Seq: seq, RunID: "r1", Type: typ, TS: api.Time{Time: at}, Payload: b}
}

// runningRun is a run in its third iteration, verifying, with a limit at
// 30%, a budget that cannot be measured, a failure streak at 2 of 3 and
// the completion gate not met.
func runningRun() api.Run {
	return api.Run{
		ID: "01jabcdef0123456789", Name: "widget", Goal: "make the widget work\nand more", Status: api.RunRunning,
		Iteration: 3, Steps: 7, ElapsedMS: 125_000, Counters: api.Counters{Verification: 2},
		Usage: api.Usage{InputTokens: 12_345, OutputTokens: 600, CostUSD: 0.42},
		Conditions: []api.Condition{
			{Type: "completion", Kind: "success", Description: "when promise, verify hold after the same iteration"},
			{Type: "max_consecutive_failures", Kind: "failure", Description: "after 3 consecutive verification failures",
				Progress: fraction(2.0 / 3), Reason: "2/3 consecutive verification failures"},
			{Type: "max_iterations", Kind: "limit", Description: "after 10 iterations", Progress: fraction(0.3), Reason: "3/10 done"},
			{Type: "max_cost", Kind: "limit", Description: "when cost reaches $1.00", Reason: "cost unknown: model not priced", Unmeasured: true},
		},
		CurrentStep: &api.Step{Seq: 7, Phase: api.PhaseVerification, Iteration: 3, Status: api.StepRunning, StartedAt: api.Time{Time: t0}},
	}
}

func render(lines []viewLine) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// lineWith returns the one line that contains every part.
func lineWith(t *testing.T, lines []viewLine, parts ...string) viewLine {
	t.Helper()
	var found []viewLine
	for _, l := range lines {
		s := l.String()
		all := true
		for _, p := range parts {
			all = all && strings.Contains(s, p)
		}
		if all {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d lines contain %q, want 1; view:\n%s", len(found), parts, render(lines))
	}
	return found[0]
}

func TestWatchViewShowsRunConditionsAndOutput(t *testing.T) {
	m := newWatchModel(runningRun(), t0.Add(2*time.Second))
	m.applyEvent(event(40, "STEP_STARTED", t0, map[string]any{"seq": 7, "phase": "verification", "iteration": 3}))
	gen := m.startTail(7)
	for i := range 50 {
		m.appendOutput(gen, fmt.Sprintf("\x1b[32mok\x1b[0m  output line %d ✓\n", i+1))
	}
	m.appendOutput(gen, "partial 日本")
	const width, height = 100, 40
	lines := m.view(t0.Add(12*time.Second), width, height)
	text := render(lines)

	if len(lines) > height {
		t.Errorf("view has %d lines for a height of %d", len(lines), height)
	}
	for _, l := range lines {
		if w := l.width(); w > width {
			t.Errorf("line is %d cells wide, more than %d: %q", w, width, l.String())
		}
	}
	if strings.ContainsAny(text, "\x1b\r\t") {
		t.Errorf("view holds control characters:\n%q", text)
	}
	lineWith(t, lines, "run 01jabcdef01", "(widget)", "q: quit")
	lineWith(t, lines, "RUNNING", "iteration 3", "step #7 verification", "running 12s")
	// 125 s at the refresh, made 10 s before now.
	lineWith(t, lines, "elapsed", "2m15s", "7 steps", "verification 2")
	lineWith(t, lines, "12.3k in", "600 out", "$0.42")
	lineWith(t, lines, "goal", "make the widget work")

	// Bars are width/5 = 20 cells; percentages are floored, as in status.
	iter := lineWith(t, lines, "after 10 iterations")
	if s := iter.String(); !strings.Contains(s, strings.Repeat("█", 6)+strings.Repeat("░", 14)+"   30%") || !strings.Contains(s, "3/10 done") {
		t.Errorf("iterations row = %q", s)
	}
	streak := lineWith(t, lines, "after 3 consecutive verification failures")
	if s := streak.String(); !strings.Contains(s, strings.Repeat("█", 13)+strings.Repeat("░", 7)+"   66%") {
		t.Errorf("failure streak row = %q", s)
	}
	if s := lineWith(t, lines, "when cost reaches $1.00").String(); !strings.Contains(s, strings.Repeat("░", 20)+"   n/a") {
		t.Errorf("unmeasurable budget row = %q", s)
	}
	gate := lineWith(t, lines, "completion gate")
	if s := gate.String(); !strings.Contains(s, "not met yet") || !strings.Contains(s, "when promise") {
		t.Errorf("completion row = %q", s)
	}
	// Limits, then failure conditions, then the completion gate.
	if i, f, c := strings.Index(text, "after 10 iterations"), strings.Index(text, "consecutive verification failures"),
		strings.Index(text, "completion gate"); !(i < f && f < c) {
		t.Errorf("conditions out of order:\n%s", text)
	}
	// Colours follow how close a bar is to stopping the run.
	if got := toneOf(streak, "█"); got != toneWarn {
		t.Errorf("a 66%% failure streak is drawn in tone %d, want warn", got)
	}
	if got := toneOf(iter, "█"); got != toneGood {
		t.Errorf("a 30%% limit is drawn in tone %d, want good", got)
	}

	lineWith(t, lines, "output", "step #7 verification, iteration 3")
	last := lines[len(lines)-1].String()
	if last != "  partial 日本" {
		t.Errorf("last line = %q, want the line still being written", last)
	}
	lineWith(t, lines, "ok  output line 50 ✓")
	if strings.Contains(text, "output line 1 ") {
		t.Errorf("the first output lines do not fit and must not be shown:\n%s", text)
	}
	if len(lines) != height {
		t.Errorf("output does not fill the screen: %d of %d lines", len(lines), height)
	}
}

func toneOf(l viewLine, text string) tone {
	for _, s := range l {
		if strings.Contains(s.text, text) {
			return s.tone
		}
	}
	return 255
}

func TestWatchViewOnAShortNarrowScreen(t *testing.T) {
	m := newWatchModel(runningRun(), t0)
	for i := range 6 {
		m.applyEvent(event(int64(i+1), "CONDITION_PROGRESSED", t0, map[string]any{"description": "x", "progress": 0.5}))
	}
	gen := m.startTail(7)
	m.appendOutput(gen, "first\nsecond\nthird\n")
	lines := m.view(t0, 60, 22)
	text := render(lines)
	if len(lines) > 22 {
		t.Fatalf("%d lines on a 22-line screen", len(lines))
	}
	for _, l := range lines {
		if l.width() > 60 {
			t.Errorf("line wider than 60: %q", l.String())
		}
	}
	if strings.Contains(text, "recent events") {
		t.Errorf("recent events must give way to the output on a short screen:\n%s", text)
	}
	for _, want := range []string{"RUNNING", "after 10 iterations", "completion gate", "second", "third"} {
		if !strings.Contains(text, want) {
			t.Errorf("view lacks %q:\n%s", want, text)
		}
	}
	// A tall screen lists the latest events, newest last.
	text = render(m.view(t0, 100, 60))
	if !strings.Contains(text, "recent events") || strings.Count(text, "CONDITION_PROGRESSED") != watchRecentEvents {
		t.Errorf("want the last %d events:\n%s", watchRecentEvents, text)
	}
}

func TestWatchViewEndedRun(t *testing.T) {
	r := runningRun()
	r.Status, r.Reason, r.Description, r.CurrentStep = api.RunAborted, "max_iterations:10", "the run reached 10 iterations", nil
	r.Conditions[2].Met, r.Conditions[2].Progress = true, fraction(1)
	m := newWatchModel(r, t0)
	m.applyEvent(event(1, "STEP_STARTED", t0, map[string]any{"seq": 20, "phase": "verification", "iteration": 10}))
	m.applyEvent(event(2, "STEP_FINISHED", t0.Add(4500*time.Millisecond), map[string]any{"seq": 20, "phase": "verification", "status": "FAILED", "error": "tests failed"}))
	lines := m.view(t0.Add(time.Hour), 100, 40)
	lineWith(t, lines, "ABORTED", "step #20 verification", "FAILED after 4s")
	lineWith(t, lines, "reason", "max_iterations:10 — the run reached 10 iterations")
	row := lineWith(t, lines, "after 10 iterations")
	if s := row.String(); !strings.Contains(s, "✔") || !strings.Contains(s, strings.Repeat("█", 20)+"  100%") {
		t.Errorf("met limit row = %q", s)
	}
	if got := toneOf(row, "█"); got != toneBad {
		t.Errorf("a met limit is drawn in tone %d, want bad", got)
	}
	lineWith(t, lines, "STEP_FINISHED", "#20 verification FAILED: tests failed in 4s")
	if got := lineWith(t, lines, "ABORTED"); toneOf(got, "ABORTED") != toneBad {
		t.Errorf("ABORTED is not drawn as bad")
	}
}

func TestWatchModelFollowsTheLatestStep(t *testing.T) {
	r := runningRun()
	r.CurrentStep = nil
	m := newWatchModel(r, t0)
	if m.wantTail() {
		t.Fatal("no step yet, but the model wants its output")
	}
	// Events replay in order; a refresh may already know a later step.
	m.applyEvent(event(1, "STEP_STARTED", t0, map[string]any{"seq": 1, "phase": "implementation", "iteration": 1}))
	if !m.wantTail() || m.step.Seq != 1 {
		t.Fatalf("step = %+v, wantTail = %v", m.step, m.wantTail())
	}
	gen1 := m.startTail(1)
	m.appendOutput(gen1, "one\n")
	if m.wantTail() {
		t.Fatal("output of step 1 is already followed")
	}
	r.CurrentStep = &api.Step{Seq: 3, Phase: api.PhaseImplementation, Iteration: 2, Status: api.StepRunning, StartedAt: api.Time{Time: t0}}
	m.setRun(r, t0.Add(time.Second))
	m.applyEvent(event(2, "STEP_STARTED", t0, map[string]any{"seq": 2, "phase": "verification", "iteration": 1}))
	if m.step.Seq != 3 {
		t.Fatalf("an older STEP_STARTED replaced the current step: %+v", m.step)
	}
	gen3 := m.startTail(3)
	m.appendOutput(gen1, "late chunk of step 1\n")
	m.appendOutput(gen3, "three\n")
	if got := m.tail.String(); got != "three" {
		t.Errorf("tail = %q: a chunk from the old feed leaked in", got)
	}

	// The feed ends while the step still runs (the daemon restarted):
	// a refresh made after that restarts it, an older one does not.
	m.outputEnded(gen3, t0.Add(5*time.Second))
	m.setRun(r, t0.Add(4*time.Second))
	if m.wantTail() {
		t.Error("a refresh older than the feed's end restarts it")
	}
	m.setRun(r, t0.Add(6*time.Second))
	if !m.wantTail() {
		t.Error("the step still runs after its feed ended: want it followed again")
	}
	m.applyEvent(event(3, "STEP_FINISHED", t0.Add(7*time.Second), map[string]any{"seq": 3, "phase": "implementation", "status": "SUCCEEDED"}))
	m.setRun(r, t0.Add(6500*time.Millisecond)) // requested before the step ended, answered after its event
	r.CurrentStep = nil
	m.setRun(r, t0.Add(8*time.Second))
	if m.wantTail() || m.step.Status != api.StepSucceeded || m.step.DurationMS != 7000 {
		t.Errorf("after the step ended: wantTail %v, step %+v", m.wantTail(), m.step)
	}
}

func TestFitAndPad(t *testing.T) {
	tests := []struct {
		in   string
		w    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"too long", 5, "too …"},
		{"日本語テキスト", 7, "日本語…"},                   // wide characters: 2 cells each
		{"e\u0301e\u0301e\u0301", 2, "e\u0301…"}, // a combining accent stays with its letter
		{"x", 0, ""},
	}
	for _, tt := range tests {
		if got := fit(tt.in, tt.w); got != tt.want || cells(got) > max(tt.w, 0) {
			t.Errorf("fit(%q, %d) = %q, want %q", tt.in, tt.w, got, tt.want)
		}
	}
	if got := pad("日本", 6); got != "日本  " {
		t.Errorf("pad = %q", got)
	}
}
