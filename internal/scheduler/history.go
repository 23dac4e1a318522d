package scheduler

import (
	"slices"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// Pipeline is the part of a run's frozen config that decides which phase
// comes next.
type Pipeline struct {
	Review       bool // a review_command is configured
	Verification bool // at least one verify_command is configured
}

// Next is the step a run should execute next.
type Next struct {
	Phase     api.Phase
	Iteration int
	// Retry is set when the same phase of the same iteration runs again
	// because its last attempt was interrupted, canceled or rate limited.
	Retry bool
}

// History is everything a run's counters are derived from: its persisted
// steps, in seq order. Nothing here is kept only in memory, so the numbers
// are identical before and after any daemon restart.
type History struct {
	Steps    []storage.Step
	Pipeline Pipeline
}

// NewHistory orders steps by seq (the order they ran in, whatever order
// they were read in) and returns their history.
func NewHistory(steps []storage.Step, p Pipeline) History {
	steps = slices.Clone(steps)
	slices.SortFunc(steps, func(a, b storage.Step) int { return a.Seq - b.Seq })
	return History{Steps: steps, Pipeline: p}
}

// counts reports whether a step counts toward iterations and failure
// streaks: it ran to a real outcome. INTERRUPTED steps (outcome lost),
// CANCELED steps (killed by a stop) and steps that hit the agent's usage
// limit count for nothing; their phase runs again.
func counts(s *storage.Step) bool {
	return (s.Status == api.StepSucceeded || s.Status == api.StepFailed) && s.RateLimitedUntil == nil
}

// Next decides the next step from the last step that counted.
func (h *History) Next() Next {
	if len(h.Steps) == 0 {
		return Next{Phase: api.PhaseImplementation, Iteration: 1}
	}
	last := &h.Steps[len(h.Steps)-1]
	if !counts(last) {
		return Next{Phase: last.Phase, Iteration: last.Iteration, Retry: true}
	}
	if phase, ok := h.following(last); ok {
		return Next{Phase: phase, Iteration: last.Iteration}
	}
	return Next{Phase: api.PhaseImplementation, Iteration: last.Iteration + 1}
}

// following returns the phase after a counted step within its iteration,
// or false when the iteration ends with it. A failure in any phase ends the
// iteration: the loop goes back to implementation, never review after
// review.
func (h *History) following(s *storage.Step) (api.Phase, bool) {
	if s.Status != api.StepSucceeded {
		return "", false
	}
	switch s.Phase {
	case api.PhaseImplementation:
		if h.Pipeline.Review {
			return api.PhaseReview, true
		}
		if h.Pipeline.Verification {
			return api.PhaseVerification, true
		}
	case api.PhaseReview:
		if h.Pipeline.Verification {
			return api.PhaseVerification, true
		}
	}
	return "", false
}

// IterationEnded reports whether the last step ended its iteration.
func (h *History) IterationEnded() bool {
	if len(h.Steps) == 0 {
		return false
	}
	last := &h.Steps[len(h.Steps)-1]
	if !counts(last) {
		return false
	}
	_, more := h.following(last)
	return !more
}

// Iteration is the number of the current (or last) iteration: the
// iteration of the newest step, 0 before the first.
func (h *History) Iteration() int {
	if len(h.Steps) == 0 {
		return 0
	}
	return h.Steps[len(h.Steps)-1].Iteration
}

// CompletedIterations counts iterations whose pipeline has ended; this is
// what max_iterations limits.
func (h *History) CompletedIterations() int {
	n := h.Iteration()
	if n > 0 && !h.IterationEnded() {
		n--
	}
	return n
}

// Streaks returns the consecutive-failure count of each phase: a counted
// failure increments its phase, a success resets it; other steps change
// nothing.
func (h *History) Streaks() map[api.Phase]int {
	streaks := map[api.Phase]int{}
	for i := range h.Steps {
		s := &h.Steps[i]
		if !counts(s) {
			continue
		}
		if s.Status == api.StepFailed {
			streaks[s.Phase]++
		} else {
			streaks[s.Phase] = 0
		}
	}
	return streaks
}

// Counters returns the streaks in their wire form.
func (h *History) Counters() api.Counters {
	st := h.Streaks()
	return api.Counters{
		Implementation: st[api.PhaseImplementation],
		Review:         st[api.PhaseReview],
		Verification:   st[api.PhaseVerification],
	}
}

// TestFailureStreak counts the verification steps at the end of the
// history whose tests failed, consecutively.
func (h *History) TestFailureStreak() int {
	n := 0
	for i := range h.Steps {
		s := &h.Steps[i]
		if s.Phase != api.PhaseVerification || !counts(s) {
			continue
		}
		if s.Status == api.StepFailed {
			n++
		} else {
			n = 0
		}
	}
	return n
}

// StuckTask returns how many times in a row the same plan task failed
// verification (seed 003): a failure on the same task increments, on
// another task restarts at 1, a pass resets to 0.
func (h *History) StuckTask() (task string, failures int) {
	for i := range h.Steps {
		s := &h.Steps[i]
		if s.Phase != api.PhaseVerification || !counts(s) || s.PlanTask == "" {
			continue
		}
		switch {
		case s.Status == api.StepSucceeded:
			task, failures = "", 0
		case s.PlanTask == task:
			failures++
		default:
			task, failures = s.PlanTask, 1
		}
	}
	return task, failures
}

// IterationsSinceProgress counts the ended iterations, newest first, that
// made no progress: the workspace fingerprint after the agent did not
// change, no more tests passed, and no more plan items were checked than
// in the iteration before. The first iteration is compared with nothing
// and always counts as progress.
func (h *History) IterationsSinceProgress() int {
	type signal struct {
		fingerprint string
		passed      int
		checked     int
	}
	var iters []signal
	cur := -1
	for i := range h.Steps {
		s := &h.Steps[i]
		if !counts(s) {
			continue
		}
		if s.Phase == api.PhaseImplementation && s.Iteration != cur {
			cur = s.Iteration
			iters = append(iters, signal{passed: -1, checked: -1})
		}
		if len(iters) == 0 {
			continue
		}
		sig := &iters[len(iters)-1]
		if s.Fingerprint != "" {
			sig.fingerprint = s.Fingerprint
		}
		if s.TestsPassed != nil {
			sig.passed = max(sig.passed, *s.TestsPassed)
		}
		if s.PlanChecked != nil {
			sig.checked = max(sig.checked, *s.PlanChecked)
		}
	}
	if !h.IterationEnded() && len(iters) > 0 {
		iters = iters[:len(iters)-1] // the current iteration has not ended yet
	}
	n := 0
	for i := len(iters) - 1; i > 0; i-- {
		a, b := iters[i-1], iters[i]
		progressed := b.fingerprint != a.fingerprint || b.passed > a.passed || b.checked > a.checked
		if progressed {
			break
		}
		n++
	}
	return n
}

// ElapsedMS is the wall time the run has spent executing steps: the sum of
// step durations (an INTERRUPTED step counts until its last output, which
// is when it was recorded to end).
func (h *History) ElapsedMS(now int64) int64 {
	var total int64
	for i := range h.Steps {
		s := &h.Steps[i]
		switch {
		case s.EndedAt != nil:
			total += *s.EndedAt - s.StartedAt
		default:
			total += max(now-s.StartedAt, 0)
		}
	}
	return total
}

// Usage sums token usage and cost over every step, whatever its status:
// tokens spent by a step that was canceled or interrupted were still spent.
func (h *History) Usage() api.Usage {
	var u api.Usage
	for i := range h.Steps {
		s := &h.Steps[i]
		u.InputTokens += s.InputTokens
		u.OutputTokens += s.OutputTokens
		u.CacheReadTokens += s.CacheReadTokens
		u.CacheWriteTokens += s.CacheWriteTokens
		if s.ReportedCostUSD != nil {
			u.ReportedCostUSD += *s.ReportedCostUSD
		}
		switch {
		case s.PricedCostUSD != nil:
			u.CostUSD += *s.PricedCostUSD
		case s.ReportedCostUSD != nil:
			u.CostUSD += *s.ReportedCostUSD
		case s.UsageFound:
			u.CostUnknown = true
		}
		if s.Model != "" {
			u.Model = s.Model
		}
	}
	return u
}

// LastIn returns the newest counted step of a phase in an iteration.
func (h *History) LastIn(iteration int, phase api.Phase) *storage.Step {
	for i := len(h.Steps) - 1; i >= 0; i-- {
		s := &h.Steps[i]
		if s.Iteration == iteration && s.Phase == phase && counts(s) {
			return s
		}
		if s.Iteration < iteration {
			break
		}
	}
	return nil
}

// LastFailure returns the newest counted FAILED step of an iteration: the
// feedback for the next one.
func (h *History) LastFailure(iteration int) *storage.Step {
	for i := len(h.Steps) - 1; i >= 0; i-- {
		s := &h.Steps[i]
		if s.Iteration < iteration {
			break
		}
		if s.Iteration == iteration && counts(s) && s.Status == api.StepFailed {
			return s
		}
	}
	return nil
}

// LastVerification returns the newest counted verification step.
func (h *History) LastVerification() *storage.Step {
	for i := len(h.Steps) - 1; i >= 0; i-- {
		if s := &h.Steps[i]; s.Phase == api.PhaseVerification && counts(s) {
			return s
		}
	}
	return nil
}

// Last returns the newest step, or nil.
func (h *History) Last() *storage.Step {
	if len(h.Steps) == 0 {
		return nil
	}
	return &h.Steps[len(h.Steps)-1]
}
