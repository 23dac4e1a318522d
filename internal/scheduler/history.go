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
	Setup        bool // a worktree run with a setup_command: it runs once, before iteration 1
	// Baseline (verify_baseline, with a verify_command): the verification
	// runs once on the untouched workspace, after any setup and before
	// iteration 1.
	Baseline bool
	// ProgressResets (progress_resets_streak): a failed verification with
	// fewer failing tests than the previous failed one restarts the
	// verification streak at 1.
	ProgressResets bool
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
//
// The counters are folds over the steps. Every step but the newest is
// final, so their fold is kept (extended as steps are added) and only the
// newest is folded afresh: the counters cost the same after step 10,000
// as after step 10. Steps may therefore change only through Append and
// SetLast.
type History struct {
	Steps    []storage.Step
	Pipeline Pipeline

	prefix  tally // the fold of Steps[:folded]
	folded  int
	scratch tally
}

// NewHistory orders steps by seq (the order they ran in, whatever order
// they were read in) and returns their history.
func NewHistory(steps []storage.Step, p Pipeline) History {
	steps = slices.Clone(steps)
	slices.SortFunc(steps, func(a, b storage.Step) int { return a.Seq - b.Seq })
	return History{Steps: steps, Pipeline: p}
}

// Append adds the newest step.
func (h *History) Append(s storage.Step) { h.Steps = append(h.Steps, s) }

// SetLast replaces the newest step (a running step that ended).
func (h *History) SetLast(s storage.Step) { h.Steps[len(h.Steps)-1] = s }

// sum returns the fold of every step.
func (h *History) sum() *tally {
	for n := len(h.Steps) - 1; h.folded < n; h.folded++ {
		h.prefix.add(h.Steps, h.folded, h.Pipeline)
	}
	h.scratch = h.prefix
	// A new backing array: the scratch must not append into the prefix's.
	h.scratch.failing = slices.Clip(h.scratch.failing)
	if len(h.Steps) > 0 {
		h.scratch.add(h.Steps, len(h.Steps)-1, h.Pipeline)
	}
	return &h.scratch
}

// tally is the fold of a run of steps: everything the counters need.
type tally struct {
	streaks      [3]int // consecutive counted failures by phase (phaseIndex)
	testFailures int    // consecutive counted verification failures
	stuckTask    string // the plan task of the latest verification failures, and how many in a row
	stuckCount   int
	// failing holds the failing-test counts of the counted verification
	// failures since the last passing verification (newest last; at most
	// trendLen), -1 where the count was not parsed: the trend status shows,
	// and what progress_resets_streak compares.
	failing []int

	endedMS int64   // summed durations of ended steps
	running []int64 // start times of steps without an end (only ever the newest)
	usage   api.Usage

	lastVerification int // index+1 of the newest counted verification step, 0 = none

	// Progress signals per iteration: the current (newest) iteration's so
	// far, and, of the iterations before it, the newest one's and how many
	// in a row at the end made no progress.
	iter, prevIter      signal
	iterNum, iterations int // the current iteration's number, and how many have started
	noProgress          int
}

// signal is what an iteration achieved: the workspace fingerprint after
// the agent, the most tests passing, the most plan items checked.
type signal struct {
	fingerprint string
	passed      int
	checked     int
}

// progressed reports whether b made progress over a.
func progressed(a, b signal) bool {
	return b.fingerprint != a.fingerprint || b.passed > a.passed || b.checked > a.checked
}

func phaseIndex(p api.Phase) int {
	switch p {
	case api.PhaseReview:
		return 1
	case api.PhaseVerification:
		return 2
	}
	return 0
}

// add folds steps[i] in.
func (t *tally) add(steps []storage.Step, i int, p Pipeline) {
	s := &steps[i]
	if s.EndedAt != nil {
		t.endedMS += *s.EndedAt - s.StartedAt
	} else {
		t.running = append(t.running, s.StartedAt)
	}
	t.addUsage(s)
	if !counts(s) || s.Phase == api.PhaseSetup || s.Phase == api.PhaseBaseline {
		return // the setup and baseline steps are in no iteration and no failure streak
	}
	failed := s.Status == api.StepFailed
	// Progress (fewer failing tests than the previous failed verification)
	// restarts both verification streaks: max_consecutive_failures and
	// test_failure_streak alike would otherwise declare stuck a loop that
	// fixes one test per iteration.
	progress := failed && s.Phase == api.PhaseVerification && p.ProgressResets && t.fewerFailing(s)
	switch {
	case progress:
		t.streaks[phaseIndex(s.Phase)] = 1 // progress: the streak starts again
	case failed:
		t.streaks[phaseIndex(s.Phase)]++
	default:
		t.streaks[phaseIndex(s.Phase)] = 0
	}
	if s.Phase == api.PhaseVerification {
		t.lastVerification = i + 1
		if failed {
			if progress {
				t.testFailures = 1
			} else {
				t.testFailures++
			}
			n := -1
			if s.TestsFailed != nil {
				n = *s.TestsFailed
			}
			if len(t.failing) == trendLen {
				// Copy rather than shift in place: the prefix and the
				// scratch may share the array.
				t.failing = slices.Clone(t.failing[1:])
			}
			t.failing = append(t.failing, n)
		} else {
			t.testFailures = 0
			t.failing = nil
		}
		if s.PlanTask != "" {
			switch {
			case !failed:
				t.stuckTask, t.stuckCount = "", 0
			case s.PlanTask == t.stuckTask:
				t.stuckCount++
			default:
				t.stuckTask, t.stuckCount = s.PlanTask, 1
			}
		}
	}
	if s.Phase == api.PhaseImplementation && (t.iterations == 0 || s.Iteration != t.iterNum) {
		if t.iterations > 0 {
			t.endIteration()
		}
		t.iterNum, t.iterations = s.Iteration, t.iterations+1
		t.iter = signal{passed: -1, checked: -1}
	}
	if t.iterations == 0 {
		return // before the first implementation step: no iteration to credit
	}
	if s.Fingerprint != "" {
		t.iter.fingerprint = s.Fingerprint
	}
	if s.TestsPassed != nil {
		t.iter.passed = max(t.iter.passed, *s.TestsPassed)
	}
	if s.PlanChecked != nil {
		t.iter.checked = max(t.iter.checked, *s.PlanChecked)
	}
}

// trendLen bounds the failing-test trend kept for status.
const trendLen = 8

// fewerFailing reports whether verification step s failed fewer tests than
// the previous failed verification, both counts parsed. A failure whose
// tests could not be counted is never progress.
func (t *tally) fewerFailing(s *storage.Step) bool {
	if s.TestsFailed == nil || len(t.failing) == 0 {
		return false
	}
	prev := t.failing[len(t.failing)-1]
	return prev >= 0 && *s.TestsFailed < prev
}

// endIteration closes the current iteration: compared with the one before
// (the first is compared with nothing), it extends or ends the run of
// iterations without progress.
func (t *tally) endIteration() {
	if t.iterations > 1 {
		if progressed(t.prevIter, t.iter) {
			t.noProgress = 0
		} else {
			t.noProgress++
		}
	}
	t.prevIter = t.iter
}

func (t *tally) addUsage(s *storage.Step) {
	u := &t.usage
	u.InputTokens += s.InputTokens
	u.OutputTokens += s.OutputTokens
	u.CacheReadTokens += s.CacheReadTokens
	u.CacheWriteTokens += s.CacheWriteTokens
	u.ReasoningTokens += s.ReasoningTokens
	if s.ReportedCostUSD != nil {
		// A new value each time, never updated in place: tallies are
		// copied (prefix to scratch) and must not share it.
		sum, _ := u.ReportedCost()
		sum += *s.ReportedCostUSD
		u.ReportedCostUSD = &sum
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

// counts reports whether a step counts toward iterations and failure
// streaks: it ran to a real outcome. INTERRUPTED steps (outcome lost),
// CANCELED steps (killed by a stop) and steps that hit the agent's usage
// limit or found the model API unavailable count for nothing; their phase
// runs again.
func counts(s *storage.Step) bool {
	return (s.Status == api.StepSucceeded || s.Status == api.StepFailed) && s.RateLimitedUntil == nil && !s.APIUnavailable
}

// APIOutage reports the unbroken series of attempts, at the end of the
// history, that found the model API unavailable and made the run wait:
// how many, and when the first of them started (Unix ms). The step with id
// current (the one being classified) is left out. It is derived from the
// persisted steps only, so the back-off and max_api_wait survive daemon
// restarts; a step that ended the wait (ABORTED fatal:api_unavailable, so
// with no wait recorded) breaks the series, which a resumed run starts
// afresh.
func (h *History) APIOutage(current int64) (n int, since int64) {
	for i := len(h.Steps) - 1; i >= 0; i-- {
		s := &h.Steps[i]
		if s.ID == current && current != 0 {
			continue
		}
		if !s.APIUnavailable || s.RateLimitedUntil == nil {
			break
		}
		n, since = n+1, s.StartedAt
	}
	return n, since
}

// Next decides the next step from the last step that counted.
func (h *History) Next() Next {
	if h.Pipeline.Setup && !h.setupDone() {
		// Until it has succeeded: a failed setup is run again on resume.
		return Next{Phase: api.PhaseSetup, Iteration: 0, Retry: len(h.Steps) > 0}
	}
	if h.Pipeline.Baseline && !h.baselineDone() {
		// Until one has recorded an outcome, whatever it was: failing
		// tests are what a baseline is for.
		return Next{Phase: api.PhaseBaseline, Iteration: 0, Retry: h.hasPhase(api.PhaseBaseline)}
	}
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

// NextIfSucceeded is what Next will say once the newest step, the running
// one, has ended as a success: the step started ahead of that end. ok is
// false when the newest step is a setup or baseline (run once; what comes
// after depends on more than their outcome) or there is none.
func (h *History) NextIfSucceeded() (Next, bool) {
	if len(h.Steps) == 0 {
		return Next{}, false
	}
	last := h.Steps[len(h.Steps)-1] // a copy: the history is not changed
	switch last.Phase {
	case api.PhaseImplementation, api.PhaseReview, api.PhaseVerification:
	default:
		return Next{}, false
	}
	// With a step of an iteration in the history, setup and baseline are
	// done (setupDone, baselineDone): Next looks at the newest step only.
	last.Status, last.Question, last.RateLimitedUntil, last.APIUnavailable = api.StepSucceeded, "", nil, false
	if phase, ok := h.following(&last); ok {
		return Next{Phase: phase, Iteration: last.Iteration}, true
	}
	return Next{Phase: api.PhaseImplementation, Iteration: last.Iteration + 1}, true
}

// setupDone reports whether a setup step succeeded (setup steps come
// before every other step).
func (h *History) setupDone() bool {
	for i := range h.Steps {
		s := &h.Steps[i]
		if s.Phase != api.PhaseSetup {
			return true // a run whose setup_command was added by resume --set does not go back
		}
		if s.Status == api.StepSucceeded {
			return true
		}
	}
	return false
}

// baselineDone reports whether the baseline has an outcome: a counted
// baseline step, or any step of an iteration (a run whose verify_baseline
// was turned on by resume --set does not go back: its workspace is no
// longer the untouched one).
func (h *History) baselineDone() bool {
	for i := range h.Steps {
		s := &h.Steps[i]
		switch {
		case s.Phase == api.PhaseBaseline && counts(s):
			return true
		case s.Phase != api.PhaseSetup && s.Phase != api.PhaseBaseline:
			return true
		}
	}
	return false
}

func (h *History) hasPhase(p api.Phase) bool {
	for i := range h.Steps {
		if h.Steps[i].Phase == p {
			return true
		}
	}
	return false
}

// Baseline returns the run's counted baseline step, or nil.
func (h *History) Baseline() *storage.Step {
	for i := range h.Steps {
		s := &h.Steps[i]
		if s.Phase == api.PhaseBaseline && counts(s) {
			return s
		}
		if s.Phase != api.PhaseSetup && s.Phase != api.PhaseBaseline {
			break // setup and baseline steps come before every other
		}
	}
	return nil
}

// following returns the phase after a counted step within its iteration,
// or false when the iteration ends with it. A failure in any phase ends the
// iteration: the loop goes back to implementation, never review after
// review.
func (h *History) following(s *storage.Step) (api.Phase, bool) {
	if s.Status != api.StepSucceeded || s.Question != "" {
		// A question ends the iteration: nothing is verified or reviewed
		// until the answer came and the agent went on.
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
	t := h.sum()
	return map[api.Phase]int{
		api.PhaseImplementation: t.streaks[0],
		api.PhaseReview:         t.streaks[1],
		api.PhaseVerification:   t.streaks[2],
	}
}

// Counters returns the streaks in their wire form.
func (h *History) Counters() api.Counters {
	t := h.sum()
	return api.Counters{Implementation: t.streaks[0], Review: t.streaks[1], Verification: t.streaks[2]}
}

// FailingTrend returns the failing-test counts of the verification failures
// since the last passing verification, oldest first (at most the newest
// eight; -1 where the count was not parsed); nil when the last
// verification passed or none failed.
func (h *History) FailingTrend() []int { return slices.Clone(h.sum().failing) }

// TestFailureStreak counts the verification steps at the end of the
// history whose tests failed, consecutively.
func (h *History) TestFailureStreak() int { return h.sum().testFailures }

// StuckTask returns how many times in a row the same plan task failed
// verification (seed 003): a failure on the same task increments, on
// another task restarts at 1, a pass resets to 0.
func (h *History) StuckTask() (task string, failures int) {
	t := h.sum()
	return t.stuckTask, t.stuckCount
}

// IterationsSinceProgress counts the ended iterations, newest first, that
// made no progress: the workspace fingerprint after the agent did not
// change, no more tests passed, and no more plan items were checked than
// in the iteration before. The first iteration is compared with nothing
// and always counts as progress.
func (h *History) IterationsSinceProgress() int {
	t := *h.sum()
	if h.IterationEnded() && t.iterations > 0 {
		t.endIteration() // the current iteration counts once it has ended
	}
	return t.noProgress
}

// ElapsedMS is the wall time the run has spent executing steps: the sum of
// step durations (an INTERRUPTED step counts until its last output, which
// is when it was recorded to end).
func (h *History) ElapsedMS(now int64) int64 {
	t := h.sum()
	total := t.endedMS
	for _, start := range t.running {
		total += max(now-start, 0)
	}
	return total
}

// Usage sums token usage and cost over every step, whatever its status:
// tokens spent by a step that was canceled or interrupted were still spent.
func (h *History) Usage() api.Usage { return h.sum().usage }

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
	if i := h.sum().lastVerification; i > 0 {
		return &h.Steps[i-1]
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
