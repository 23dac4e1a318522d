package main

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rivo/uniseg"

	"github.com/loopd/loopd/internal/api"
)

// watchModel is everything the live view shows, built from three feeds:
// the run's events, periodic refreshes of the run, and the current step's
// output. It does no I/O and reads no clock: the TUI feeds it and draws what
// view returns for a given time and screen size, and tests do the same
// with fixed inputs.
type watchModel struct {
	run    api.Run   // the latest refresh
	runAt  time.Time // when run was requested: the run's elapsed time counts on from here
	step   stepView  // the latest step started
	recent []recentEvent
	timer  stepTimer

	tail     *tailBuffer
	tailSeq  int       // the step whose output tail holds
	tailGen  int       // bumped on every (re)start of the output feed, to drop stale chunks
	tailDone bool      // the output feed of tailSeq ended
	tailEnd  time.Time // when it ended

	note string // a transient problem, e.g. the daemon is unreachable; cleared by the next refresh
}

// stepView is what the view knows of the latest step.
type stepView struct {
	Seq        int
	Phase      api.Phase
	Iteration  int
	Status     api.StepStatus
	StartedAt  time.Time
	DurationMS int64 // once ended
}

// recentEvent is an event as listed in the view.
type recentEvent struct {
	ev     api.Event
	detail string
}

// watchRecentEvents is how many of the latest events the view lists.
const watchRecentEvents = 4

// stepTimer tells how long a step took from its STEP_STARTED and
// STEP_FINISHED events: their payloads do not carry the duration.
type stepTimer struct {
	started map[int]time.Time // by step seq, until the step ends
}

// took observes ev and returns how long the step it finishes took, or -1.
func (t *stepTimer) took(ev api.Event) time.Duration {
	var p stepPayload
	if !strings.HasPrefix(ev.Type, "STEP_") || json.Unmarshal(ev.Payload, &p) != nil {
		return -1
	}
	switch ev.Type {
	case "STEP_STARTED":
		if t.started == nil {
			t.started = map[int]time.Time{}
		}
		t.started[p.Seq] = ev.TS.Time
	case "STEP_FINISHED", "STEP_INTERRUPTED":
		start, ok := t.started[p.Seq]
		delete(t.started, p.Seq)
		switch {
		case p.DurationMS != nil:
			return time.Duration(*p.DurationMS) * time.Millisecond
		case ok:
			return max(ev.TS.Sub(start), 0)
		}
	}
	return -1
}

func newWatchModel(run api.Run, at time.Time) *watchModel {
	m := &watchModel{tail: newTailBuffer()}
	m.setRun(run, at)
	return m
}

// setRun takes a refreshed run, requested at at.
func (m *watchModel) setRun(run api.Run, at time.Time) {
	m.run, m.runAt = run, at
	m.note = "" // the daemon answers again
	// The run can be ahead of the events (they are still replaying), or
	// behind them (it was requested before the step's STEP_FINISHED): a
	// step the events said ended is never shown running again.
	cs := run.CurrentStep
	if cs != nil && (cs.Seq > m.step.Seq || cs.Seq == m.step.Seq && m.step.Status == api.StepRunning) {
		m.step = stepView{Seq: cs.Seq, Phase: cs.Phase, Iteration: cs.Iteration, Status: cs.Status,
			StartedAt: cs.StartedAt.Time, DurationMS: cs.DurationMS}
	}
}

// stepPayload is the part of STEP_* event payloads the view uses.
type stepPayload struct {
	Seq        int            `json:"seq"`
	Phase      api.Phase      `json:"phase"`
	Iteration  int            `json:"iteration"`
	Status     api.StepStatus `json:"status"`
	DurationMS *int64         `json:"duration_ms"`
}

// applyEvent takes the run's next event.
func (m *watchModel) applyEvent(ev api.Event) {
	took := m.timer.took(ev)
	m.recent = append(m.recent, recentEvent{ev, watchEventDetail(ev, took)})
	if len(m.recent) > watchRecentEvents {
		m.recent = slices.Delete(m.recent, 0, len(m.recent)-watchRecentEvents)
	}
	var p stepPayload
	switch ev.Type {
	case "STEP_STARTED":
		if json.Unmarshal(ev.Payload, &p) == nil && p.Seq >= m.step.Seq {
			m.step = stepView{Seq: p.Seq, Phase: p.Phase, Iteration: p.Iteration, Status: api.StepRunning, StartedAt: ev.TS.Time}
		}
	case "STEP_FINISHED", "STEP_INTERRUPTED":
		if json.Unmarshal(ev.Payload, &p) == nil && p.Seq == m.step.Seq {
			m.step.Status = p.Status
			if took >= 0 {
				m.step.DurationMS = took.Milliseconds()
			} else if !m.step.StartedAt.IsZero() {
				m.step.DurationMS = max(ev.TS.Sub(m.step.StartedAt).Milliseconds(), 0)
			}
		}
	}
}

// startTail points the output tail at step seq, emptied, and returns the
// generation that chunks of the new feed must carry.
func (m *watchModel) startTail(seq int) int {
	m.tail.Reset()
	m.tailSeq, m.tailDone = seq, false
	m.tailGen++
	return m.tailGen
}

// appendOutput adds a chunk of output from feed gen; chunks of an older
// feed are dropped.
func (m *watchModel) appendOutput(gen int, text string) {
	if gen == m.tailGen {
		m.tail.WriteString(text)
	}
}

// outputEnded records that feed gen ended at at.
func (m *watchModel) outputEnded(gen int, at time.Time) {
	if gen == m.tailGen {
		m.tailDone, m.tailEnd = true, at
	}
}

// wantTail reports whether the output feed must be (re)started: a new step
// started, or the step whose feed ended is still running according to a
// refresh made after the feed ended (the daemon restarted mid-step and
// adopted it: its output goes on).
func (m *watchModel) wantTail() bool {
	if m.step.Seq == 0 {
		return false
	}
	if m.step.Seq != m.tailSeq {
		return true
	}
	cs := m.run.CurrentStep
	return m.tailDone && cs != nil && cs.Seq == m.tailSeq && m.runAt.After(m.tailEnd)
}

// tone is the role of a piece of text; the TUI maps it to a style.
type tone uint8

const (
	toneNormal  tone = iota
	toneDim          // secondary: labels, hints, empty bar cells
	toneHeading      // section titles
	toneGood         // progressing well, completed
	toneWarn         // getting close, paused, interrupted
	toneBad          // a limit or failure reached, failed, aborted
)

// span is a run of text in one tone.
type span struct {
	text string
	tone tone
}

// viewLine is one screen line.
type viewLine []span

// String is the line's text, without tones.
func (l viewLine) String() string {
	var b strings.Builder
	for _, s := range l {
		b.WriteString(s.text)
	}
	return b.String()
}

func (l viewLine) width() int { return cells(l.String()) }

// view lays the model out for a screen of width×height cells at now.
// Sections, by priority when the screen is short: the run's state, the
// stop conditions, the step's output, recent events.
func (m *watchModel) view(now time.Time, width, height int) []viewLine {
	width = max(width, 20)
	top := m.headerLines(now, width)
	conds := m.conditionLines(width)
	events := m.eventLines(width)

	var out []viewLine
	out = append(out, top...)
	if len(conds) > 0 {
		out = append(out, nil, viewLine{{"stop conditions", toneHeading}})
		out = append(out, conds...)
	}
	// The output gets what is left, but at least a few lines: events are
	// dropped first on a short screen.
	const minOutput = 4
	if height-len(out)-(len(events)+2)-2 >= minOutput && len(events) > 0 {
		out = append(out, nil, viewLine{{"recent events", toneHeading}})
		out = append(out, events...)
	}
	out = append(out, nil, m.outputHeading(width))
	if n := height - len(out); n > 0 {
		out = append(out, m.outputLines(width, n)...)
	}
	if len(out) > height {
		out = out[:height]
	}
	for i, l := range out {
		out[i] = clip(l, width)
	}
	return out
}

// clip cuts a line to width cells, marking a cut with "…".
func clip(l viewLine, width int) viewLine {
	if l.width() <= width {
		return l
	}
	var out viewLine
	used := 0
	for _, s := range l {
		w := cells(s.text)
		if used+w <= width-1 {
			out = append(out, s)
			used += w
			continue
		}
		s.text = strings.TrimSuffix(fit(s.text, width-used), "…") + "…"
		return append(out, s)
	}
	return out
}

func (m *watchModel) headerLines(now time.Time, width int) []viewLine {
	r := m.run
	title := "run " + shortID(r.ID)
	if r.Name != "" {
		title += "  (" + r.Name + ")"
	}
	hint := "q: quit (the run goes on)"
	first := viewLine{{"loopctl watch · ", toneDim}, {title, toneHeading}}
	if gap := width - first.width() - cells(hint); gap >= 2 {
		first = append(first, span{strings.Repeat(" ", gap), toneNormal}, span{hint, toneDim})
	}

	state := viewLine{label("status"), {string(r.Status), statusTone(r.Status)}}
	if r.Status != api.RunPending || m.step.Seq > 0 {
		state = append(state, span{fmt.Sprintf(" · iteration %d", r.Iteration), toneNormal})
	}
	if s := m.step; s.Seq > 0 {
		state = append(state, span{fmt.Sprintf(" · step #%d %s", s.Seq, s.Phase), toneNormal})
		if s.Status == api.StepRunning {
			state = append(state, span{" · running " + clock(now.Sub(s.StartedAt)), toneNormal})
		} else {
			state = append(state, span{" · " + string(s.Status) + " after " + ms(s.DurationMS), stepTone(s.Status)})
		}
	}
	if r.Status == api.RunWaiting && !r.WaitUntil.IsZero() {
		why := "usage limit"
		if r.Reason == "api_unavailable" {
			why = "model API unavailable"
		}
		state = append(state, span{" · " + why + ", resumes at " + r.WaitUntil.Local().Format(time.TimeOnly), toneWarn})
	}

	elapsed := r.ElapsedMS
	if r.Status == api.RunRunning && !m.runAt.IsZero() {
		elapsed += max(now.Sub(m.runAt), 0).Milliseconds()
	}
	times := viewLine{label("elapsed"), {fmt.Sprintf("%s · %d steps · failure streaks: implementation %d, review %d, verification %d",
		clock(time.Duration(elapsed)*time.Millisecond), r.Steps, r.Counters.Implementation, r.Counters.Review, r.Counters.Verification), toneNormal}}
	u := r.Usage
	usage := viewLine{label("usage"), {fmt.Sprintf("%s in · %s out · %s cache read · %s cache write · %s",
		count(u.InputTokens), count(u.OutputTokens), count(u.CacheReadTokens), count(u.CacheWriteTokens), cost(u)), toneNormal}}
	lines := []viewLine{first, state, times, usage}
	if r.Goal != "" {
		lines = append(lines, viewLine{label("goal"), {fit(oneLine(firstLine(r.Goal)), width-labelWidth), toneNormal}})
	}
	if r.Reason != "" {
		lines = append(lines, viewLine{label("reason"), {fit(oneLine(r.Reason+" — "+r.Description), width-labelWidth), statusTone(r.Status)}})
	}
	var notes []string
	if m.note != "" {
		notes = append(notes, m.note)
	}
	if r.StopRequested != "" {
		notes = append(notes, "stop requested ("+r.StopRequested+")")
	}
	if r.PauseRequest {
		notes = append(notes, "pause requested")
	}
	notes = append(notes, r.Warnings...)
	for _, n := range notes {
		lines = append(lines, viewLine{label("note"), {fit(oneLine(n), width-labelWidth), toneWarn}})
	}
	return lines
}

const labelWidth = 11

// clock formats a time that is still running, to the second: the view
// is redrawn once a second, so milliseconds would only flicker.
func clock(d time.Duration) string {
	if d < time.Second {
		return "0s"
	}
	return duration(d)
}

func label(s string) span { return span{fmt.Sprintf("%-*s", labelWidth, s), toneDim} }

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// conditionLines draws every condition: limits and failure conditions (and
// measurable success conditions) as a bar of their progress fraction, the
// completion gate and other success conditions as met or not yet.
func (m *watchModel) conditionLines(width int) []viewLine {
	cs := slices.Clone(m.run.Conditions)
	// Limits first, then failures, then successes (the completion gate
	// last): the order of "how close is this run to being stopped".
	rank := map[string]int{"limit": 0, "failure": 1, "success": 2}
	slices.SortStableFunc(cs, func(a, b api.Condition) int {
		ra, rb := rank[a.Kind], rank[b.Kind]
		if a.Type == "completion" {
			ra = 3
		}
		if b.Type == "completion" {
			rb = 3
		}
		return ra - rb
	})
	descW := 0
	for _, c := range cs {
		descW = max(descW, cells(conditionName(c)))
	}
	// Columns: mark 4, kind 8, description, 2, bar, percentage 6, then
	// the condition's own reason in what is left. The description comes
	// first: a reason often only repeats it with numbers.
	barW := min(max(width/5, 10), 30)
	descW = min(descW, max(width-4-8-2-barW-6, 8))
	var lines []viewLine
	for _, c := range cs {
		mark := "  "
		if c.Met {
			mark = "✔ "
		}
		l := viewLine{{"  " + mark, metTone(c)}, {fmt.Sprintf("%-8s", c.Kind), toneDim}, {pad(conditionName(c), descW) + "  ", toneNormal}}
		detail := conditionDetail(c)
		switch {
		case c.Type == "completion" || (c.Kind == "success" && c.Progress == nil):
			state, t := "not met yet", toneDim
			if c.Met {
				state, t = "met", toneGood
			}
			l = append(l, span{pad(state, barW+6), t})
			if c.Type == "completion" {
				detail = c.Description
				if c.Met && c.Reason != "" {
					detail = c.Reason
				}
			}
		default:
			l = append(l, progressBar(c, barW)...)
		}
		if rest := width - l.width() - 2; rest > 4 && detail != "" {
			l = append(l, span{"  " + fit(oneLine(detail), rest), toneDim})
		}
		lines = append(lines, l)
	}
	return lines
}

// conditionName is how a condition is named in its row.
func conditionName(c api.Condition) string {
	if c.Type == "completion" {
		return "completion gate"
	}
	if c.Description != "" {
		return oneLine(c.Description)
	}
	return c.Type
}

// progressBar is a bar of width cells and a percentage, floored as
// `loopctl status` floors it, so both commands show the same numbers.
func progressBar(c api.Condition, width int) []span {
	if c.Progress == nil {
		return []span{{strings.Repeat("░", width), toneDim}, {"   n/a", toneDim}}
	}
	f := min(max(*c.Progress, 0), 1)
	n := int(math.Floor(f * float64(width)))
	t := toneGood
	switch {
	case c.Kind == "success":
	case c.Met || f >= 0.8:
		t = toneBad
	case f >= 0.5:
		t = toneWarn
	}
	return []span{
		{strings.Repeat("█", n), t},
		{strings.Repeat("░", width-n), toneDim},
		{fmt.Sprintf(" %4d%%", int(math.Floor(f*100))), t},
	}
}

func (m *watchModel) eventLines(width int) []viewLine {
	var lines []viewLine
	for _, re := range m.recent {
		ev := re.ev
		l := viewLine{{"  " + ev.TS.Local().Format(time.TimeOnly) + "  ", toneDim}, {fmt.Sprintf("%-20s ", ev.Type), eventTone(ev)}}
		if rest := width - l.width(); rest > 4 {
			l = append(l, span{fit(re.detail, rest), toneNormal})
		}
		lines = append(lines, l)
	}
	return lines
}

func (m *watchModel) outputHeading(width int) viewLine {
	s := m.step
	if s.Seq == 0 {
		return viewLine{{"output", toneHeading}}
	}
	return viewLine{{"output", toneHeading}, {fit(fmt.Sprintf(" · step #%d %s, iteration %d", s.Seq, s.Phase, s.Iteration), width-6), toneDim}}
}

// outputLines are the last n lines of the step's output, each cut to the
// screen's width.
func (m *watchModel) outputLines(width, n int) []viewLine {
	if m.step.Seq == 0 {
		return []viewLine{{{"  no step has started yet", toneDim}}}
	}
	if m.tailSeq != m.step.Seq || m.tail.Empty() {
		return []viewLine{{{"  no output yet", toneDim}}}
	}
	var lines []viewLine
	for _, l := range m.tail.Lines(n) {
		lines = append(lines, viewLine{{"  " + fit(l, width-2), toneNormal}})
	}
	return lines
}

// watchEventDetail is eventDetail made printable, with how long a
// finished step took when known (took ≥ 0).
func watchEventDetail(ev api.Event, took time.Duration) string {
	d := oneLine(eventDetail(ev))
	if took >= 0 {
		d += " in " + duration(took)
	}
	return d
}

func statusTone(s api.RunStatus) tone {
	switch s {
	case api.RunRunning, api.RunCompleted:
		return toneGood
	case api.RunPaused, api.RunWaiting, api.RunInterrupted:
		return toneWarn
	case api.RunFailed, api.RunAborted:
		return toneBad
	}
	return toneNormal
}

func stepTone(s api.StepStatus) tone {
	switch s {
	case api.StepSucceeded:
		return toneGood
	case api.StepFailed:
		return toneBad
	case api.StepCanceled, api.StepInterrupted:
		return toneWarn
	}
	return toneNormal
}

func metTone(c api.Condition) tone {
	if c.Kind == "success" {
		return toneGood
	}
	return toneBad
}

func eventTone(ev api.Event) tone {
	switch ev.Type {
	case "RUN_COMPLETED":
		return toneGood
	case "RUN_FAILED", "RUN_ABORTED":
		return toneBad
	case "RUN_INTERRUPTED", "RUN_PAUSED", "RUN_WAITING", "STEP_INTERRUPTED":
		return toneWarn
	case "STEP_FINISHED":
		var p stepPayload
		if json.Unmarshal(ev.Payload, &p) == nil {
			return stepTone(p.Status)
		}
	}
	return toneDim
}

// cells is the display width of s in terminal cells (wide characters
// take two).
func cells(s string) int { return uniseg.StringWidth(s) }

// fit cuts s to at most w cells, between grapheme clusters, marking a cut
// with "…".
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if cells(s) <= w {
		return s
	}
	var b strings.Builder
	used, state := 0, -1
	for s != "" {
		var cluster string
		var cw int
		cluster, s, cw, state = uniseg.FirstGraphemeClusterInString(s, state)
		if used+cw > w-1 {
			break
		}
		b.WriteString(cluster)
		used += cw
	}
	return b.String() + "…"
}

// pad fits s to exactly w cells.
func pad(s string, w int) string {
	s = fit(s, w)
	return s + strings.Repeat(" ", max(w-cells(s), 0))
}
