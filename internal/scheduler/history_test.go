package scheduler

import (
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// steps builds a history from a compact notation: "I+" implementation
// succeeded, "V-" verification failed, "R-" review failed, "I!"
// interrupted, "I~" canceled, "I$" rate limited. Iterations advance at each
// counted implementation step, as the scheduler numbers them.
func steps(spec ...string) []storage.Step {
	var out []storage.Step
	it := 0
	retry := false
	for i, s := range spec {
		phase := map[byte]api.Phase{'I': api.PhaseImplementation, 'R': api.PhaseReview, 'V': api.PhaseVerification}[s[0]]
		if phase == api.PhaseImplementation && !retry {
			it++
		}
		st := storage.Step{Seq: i + 1, Phase: phase, Iteration: max(it, 1), StartedAt: int64(i * 1000)}
		end := int64(i*1000 + 500)
		st.EndedAt = &end
		retry = false
		switch s[1] {
		case '+':
			st.Status = api.StepSucceeded
		case '-':
			st.Status = api.StepFailed
		case '!':
			st.Status, retry = api.StepInterrupted, true
		case '~':
			st.Status, retry = api.StepCanceled, true
		case '$':
			until := int64(1)
			st.Status, st.RateLimitedUntil, retry = api.StepFailed, &until, true
		}
		out = append(out, st)
	}
	return out
}

func TestHistoryDerivation(t *testing.T) {
	verify := Pipeline{Verification: true}
	both := Pipeline{Review: true, Verification: true}
	tests := []struct {
		name      string
		pipeline  Pipeline
		steps     []string
		next      Next
		completed int
		streaks   api.Counters
		testFails int
	}{
		{"empty", verify, nil, Next{Phase: api.PhaseImplementation, Iteration: 1}, 0, api.Counters{}, 0},
		{"after implementation", verify, []string{"I+"}, Next{Phase: api.PhaseVerification, Iteration: 1}, 0, api.Counters{}, 0},
		{"verification failed", verify, []string{"I+", "V-"}, Next{Phase: api.PhaseImplementation, Iteration: 2}, 1,
			api.Counters{Verification: 1}, 1},
		{"three verification failures", verify, []string{"I+", "V-", "I+", "V-", "I+", "V-"},
			Next{Phase: api.PhaseImplementation, Iteration: 4}, 3, api.Counters{Verification: 3}, 3},
		{"a pass resets the streak", verify, []string{"I+", "V-", "I+", "V-", "I+", "V+", "I+", "V-"},
			Next{Phase: api.PhaseImplementation, Iteration: 5}, 4, api.Counters{Verification: 1}, 1},
		{"implementation failure ends the iteration", verify, []string{"I-", "I-"},
			Next{Phase: api.PhaseImplementation, Iteration: 3}, 2, api.Counters{Implementation: 2}, 0},
		{"review failure goes back to implementation, never review again", both, []string{"I+", "R-"},
			Next{Phase: api.PhaseImplementation, Iteration: 2}, 1, api.Counters{Review: 1}, 0},
		{"review approved then verification", both, []string{"I+", "R+"}, Next{Phase: api.PhaseVerification, Iteration: 1}, 0,
			api.Counters{}, 0},
		{"interrupted step counts for nothing and re-runs", verify, []string{"I+", "V-", "I+", "V!"},
			Next{Phase: api.PhaseVerification, Iteration: 2, Retry: true}, 1, api.Counters{Verification: 1}, 1},
		{"interrupted implementation re-runs the same iteration", verify, []string{"I+", "V-", "I!"},
			Next{Phase: api.PhaseImplementation, Iteration: 2, Retry: true}, 1, api.Counters{Verification: 1}, 1},
		{"canceled step is not a failure", verify, []string{"I+", "V-", "I~"},
			Next{Phase: api.PhaseImplementation, Iteration: 2, Retry: true}, 1, api.Counters{Verification: 1}, 1},
		{"rate-limited step counts neither an iteration nor a failure", verify, []string{"I+", "V-", "I$"},
			Next{Phase: api.PhaseImplementation, Iteration: 2, Retry: true}, 1, api.Counters{Verification: 1}, 1},
		{"no verification: an implementation ends the iteration", Pipeline{}, []string{"I+", "I+"},
			Next{Phase: api.PhaseImplementation, Iteration: 3}, 2, api.Counters{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := steps(tt.steps...)
			// Read in any order: derivation is by seq.
			rand.Shuffle(len(st), func(i, j int) { st[i], st[j] = st[j], st[i] })
			h := NewHistory(st, tt.pipeline)
			if got := h.Next(); got != tt.next {
				t.Errorf("Next = %+v, want %+v", got, tt.next)
			}
			if got := h.CompletedIterations(); got != tt.completed {
				t.Errorf("CompletedIterations = %d, want %d", got, tt.completed)
			}
			if got := h.Counters(); got != tt.streaks {
				t.Errorf("Counters = %+v, want %+v", got, tt.streaks)
			}
			if got := h.TestFailureStreak(); got != tt.testFails {
				t.Errorf("TestFailureStreak = %d, want %d", got, tt.testFails)
			}
		})
	}
}

func TestHistoryElapsed(t *testing.T) {
	st := steps("I+", "V!", "V+")
	end := st[1].StartedAt + 100 // interrupted: ended at its last output
	st[1].EndedAt = &end
	h := NewHistory(st, Pipeline{Verification: true})
	if got := h.ElapsedMS(0); got != 1100 {
		t.Errorf("ElapsedMS = %d, want 1100 (two 500ms steps, 100ms of the interrupted one)", got)
	}
	running := storage.Step{Seq: 4, Phase: api.PhaseImplementation, Iteration: 2, Status: api.StepRunning, StartedAt: 10_000}
	h.Append(running)
	if got := h.ElapsedMS(10_250); got != 1350 {
		t.Errorf("ElapsedMS with a running step = %d, want 1350", got)
	}
}

func TestHistoryUsageCountsEveryStep(t *testing.T) {
	priced, reported := 0.5, 0.25
	st := steps("I+", "I!", "I~")
	st[0].InputTokens, st[0].PricedCostUSD, st[0].UsageFound = 100, &priced, true
	st[1].InputTokens, st[1].ReportedCostUSD, st[1].UsageFound = 50, &reported, true // interrupted: its tokens were still spent
	st[2].OutputTokens, st[2].UsageFound = 7, true                                   // canceled, no cost known
	h := NewHistory(st, Pipeline{})
	u := h.Usage()
	if u.InputTokens != 150 || u.OutputTokens != 7 || u.CostUSD != 0.75 || u.ReportedCostUSD == nil || *u.ReportedCostUSD != 0.25 || !u.CostUnknown {
		t.Errorf("Usage = %+v", u)
	}
}

func TestStuckTask(t *testing.T) {
	st := steps("I+", "V-", "I+", "V-", "I+", "V-", "I+", "V-")
	tasks := []string{"a", "a", "a", "a", "b", "b", "b", "b"}
	for i := range st {
		st[i].PlanTask = tasks[i]
	}
	h := NewHistory(st, Pipeline{Verification: true})
	task, n := h.StuckTask()
	if task != "b" || n != 2 {
		t.Errorf("StuckTask = %q %d, want b 2 (a new task restarts the count)", task, n)
	}
	st = append(st, steps("I+", "V+")...)
	for i := range st[8:] {
		st[8+i].Seq, st[8+i].PlanTask = 9+i, "b"
	}
	h = NewHistory(st, Pipeline{Verification: true})
	if _, n := h.StuckTask(); n != 0 {
		t.Errorf("after a pass: %d, want 0", n)
	}
}

func TestIterationsSinceProgress(t *testing.T) {
	st := steps("I+", "V-", "I+", "V-", "I+", "V-", "I+", "V-")
	fps := []string{"a", "", "b", "", "b", "", "b", ""}
	for i := range st {
		st[i].Fingerprint = fps[i]
	}
	h := NewHistory(st, Pipeline{Verification: true})
	if got := h.IterationsSinceProgress(); got != 2 {
		t.Errorf("IterationsSinceProgress = %d, want 2", got)
	}
	// More tests passing is progress even when the files did not change.
	three := 3
	st[7].TestsPassed = &three
	h = NewHistory(st, Pipeline{Verification: true})
	if got := h.IterationsSinceProgress(); got != 0 {
		t.Errorf("with more tests passing: %d, want 0", got)
	}
}

// The folded counters agree with their definitions (the straightforward
// passes over every step, below) on random histories, after every step
// and while the newest step is still running.
func TestHistoryFoldMatchesDefinitions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	phases := []api.Phase{api.PhaseImplementation, api.PhaseReview, api.PhaseVerification}
	statuses := []api.StepStatus{api.StepSucceeded, api.StepFailed, api.StepFailed, api.StepInterrupted, api.StepCanceled}
	for round := range 200 {
		p := Pipeline{Review: rng.IntN(2) == 0, Verification: rng.IntN(4) > 0, ProgressResets: rng.IntN(2) == 0}
		h := NewHistory(nil, p)
		iteration := 1
		for seq := 1; seq <= 60; seq++ {
			s := storage.Step{Seq: seq, Phase: phases[rng.IntN(3)], Iteration: iteration, Status: api.StepRunning,
				StartedAt: int64(seq * 1000)}
			s.PlanTask, s.InputTokens = []string{"", "a", "b"}[rng.IntN(3)], int64(rng.IntN(100))
			if rng.IntN(5) == 0 {
				iteration++
			}
			h.Append(s)
			check(t, round, &h)
			s.Status = statuses[rng.IntN(len(statuses))]
			if rng.IntN(10) > 0 {
				end := s.StartedAt + int64(rng.IntN(900))
				s.EndedAt = &end
			}
			if rng.IntN(8) == 0 {
				until := int64(1)
				s.RateLimitedUntil = &until
			}
			s.Fingerprint = []string{"", "x", "y"}[rng.IntN(3)]
			if rng.IntN(2) == 0 {
				n := rng.IntN(5)
				s.TestsPassed = &n
			}
			if rng.IntN(3) == 0 {
				n := rng.IntN(4)
				s.PlanChecked = &n
			}
			if rng.IntN(4) > 0 {
				n := rng.IntN(4)
				s.TestsFailed = &n
			}
			switch rng.IntN(4) {
			case 0:
				c := rng.Float64()
				s.PricedCostUSD = &c
			case 1:
				c := rng.Float64()
				s.ReportedCostUSD = &c
			case 2:
				s.UsageFound, s.Model = true, "m"+string(rune('a'+rng.IntN(3)))
			}
			h.SetLast(s)
			check(t, round, &h)
		}
	}
}

func check(t *testing.T, round int, h *History) {
	t.Helper()
	n := len(h.Steps)
	if got, want := h.Streaks(), defStreaks(h); !maps.Equal(got, want) && !(len(got) == 3 && zeroOr(got, want)) {
		t.Fatalf("round %d, %d steps: Streaks = %v, want %v", round, n, got, want)
	}
	if got, want := h.FailingTrend(), defFailingTrend(h); !slices.Equal(got, want) {
		t.Fatalf("round %d, %d steps: FailingTrend = %v, want %v", round, n, got, want)
	}
	// A restarted daemon folds the persisted steps afresh: the same numbers.
	fresh := NewHistory(h.Steps, h.Pipeline)
	if got, want := fresh.Counters(), h.Counters(); got != want {
		t.Fatalf("round %d, %d steps: Counters after a restart = %+v, want %+v", round, n, got, want)
	}
	if got, want := h.TestFailureStreak(), defTestFailureStreak(h); got != want {
		t.Fatalf("round %d, %d steps: TestFailureStreak = %d, want %d", round, n, got, want)
	}
	gt, gn := h.StuckTask()
	wt, wn := defStuckTask(h)
	if gt != wt || gn != wn {
		t.Fatalf("round %d, %d steps: StuckTask = %q %d, want %q %d", round, n, gt, gn, wt, wn)
	}
	if got, want := h.IterationsSinceProgress(), defIterationsSinceProgress(h); got != want {
		t.Fatalf("round %d, %d steps: IterationsSinceProgress = %d, want %d", round, n, got, want)
	}
	now := int64(n*1000 + 400)
	if got, want := h.ElapsedMS(now), defElapsedMS(h, now); got != want {
		t.Fatalf("round %d, %d steps: ElapsedMS = %d, want %d", round, n, got, want)
	}
	if got, want := h.Usage(), defUsage(h); !reflect.DeepEqual(got, want) { // compares the reported cost, not its pointer
		t.Fatalf("round %d, %d steps: Usage = %+v, want %+v", round, n, got, want)
	}
	if got, want := h.LastVerification(), defLastVerification(h); got != want {
		t.Fatalf("round %d, %d steps: LastVerification = %p, want %p", round, n, got, want)
	}
}

// zeroOr reports whether got has want's counts, with zeros for the phases
// want never saw.
func zeroOr(got, want map[api.Phase]int) bool {
	for k, v := range got {
		if want[k] != v {
			return false
		}
	}
	return true
}

// The definitions: one pass over every step each.

func defStreaks(h *History) map[api.Phase]int {
	streaks := map[api.Phase]int{}
	prevFailing := -1 // failing tests of the previous failed verification, -1 unknown
	for i := range h.Steps {
		s := &h.Steps[i]
		if !counts(s) || s.Phase == api.PhaseSetup {
			continue
		}
		switch {
		case s.Status == api.StepFailed && s.Phase == api.PhaseVerification && h.Pipeline.ProgressResets &&
			s.TestsFailed != nil && prevFailing >= 0 && *s.TestsFailed < prevFailing:
			streaks[s.Phase] = 1
		case s.Status == api.StepFailed:
			streaks[s.Phase]++
		default:
			streaks[s.Phase] = 0
		}
		if s.Phase == api.PhaseVerification {
			prevFailing = -1
			if s.Status == api.StepFailed && s.TestsFailed != nil {
				prevFailing = *s.TestsFailed
			}
		}
	}
	return streaks
}

func defFailingTrend(h *History) []int {
	var trend []int
	for i := range h.Steps {
		s := &h.Steps[i]
		if s.Phase != api.PhaseVerification || !counts(s) {
			continue
		}
		if s.Status != api.StepFailed {
			trend = nil
			continue
		}
		n := -1
		if s.TestsFailed != nil {
			n = *s.TestsFailed
		}
		trend = append(trend, n)
	}
	if len(trend) > trendLen {
		trend = trend[len(trend)-trendLen:]
	}
	return trend
}

func defTestFailureStreak(h *History) int {
	n := 0
	prevFailing := -1 // failing tests of the previous failed verification, -1 unknown
	for i := range h.Steps {
		s := &h.Steps[i]
		if s.Phase != api.PhaseVerification || !counts(s) {
			continue
		}
		switch {
		case s.Status == api.StepFailed && h.Pipeline.ProgressResets && s.TestsFailed != nil && prevFailing >= 0 &&
			*s.TestsFailed < prevFailing:
			n = 1
		case s.Status == api.StepFailed:
			n++
		default:
			n = 0
		}
		prevFailing = -1
		if s.Status == api.StepFailed && s.TestsFailed != nil {
			prevFailing = *s.TestsFailed
		}
	}
	return n
}

// TestProgressResetsTestFailureStreak: failing tests going 5 → 4 → 3 is
// progress for test_failure_streak as for max_consecutive_failures; with
// progress_resets_streak=false every failure counts, and a failure that
// is not fewer (or not counted) extends the streak either way.
func TestProgressResetsTestFailureStreak(t *testing.T) {
	failing := func(counts ...int) []storage.Step {
		var spec []string
		for range counts {
			spec = append(spec, "I+", "V-")
		}
		st := steps(spec...)
		for i, n := range counts {
			if n >= 0 {
				st[2*i+1].TestsFailed = &n
			}
		}
		return st
	}
	for _, tc := range []struct {
		name   string
		counts []int
		resets bool
		want   int
	}{
		{"fewer each time", []int{5, 4, 3}, true, 1},
		{"fewer each time, progress_resets_streak=false", []int{5, 4, 3}, false, 3},
		{"the same count is no progress", []int{5, 4, 4}, true, 2},
		{"more is no progress", []int{3, 4, 5}, true, 3},
		{"an unparsed count is never progress, nor compared with", []int{5, -1, 3}, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory(failing(tc.counts...), Pipeline{Verification: true, ProgressResets: tc.resets})
			if got := h.TestFailureStreak(); got != tc.want {
				t.Errorf("TestFailureStreak = %d, want %d", got, tc.want)
			}
			if got := h.Counters().Verification; got != tc.want {
				t.Errorf("verification streak = %d, want %d (both streaks read progress alike)", got, tc.want)
			}
		})
	}
}

func defStuckTask(h *History) (task string, failures int) {
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

func defIterationsSinceProgress(h *History) int {
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
		iters = iters[:len(iters)-1]
	}
	n := 0
	for i := len(iters) - 1; i > 0; i-- {
		if progressed(iters[i-1], iters[i]) {
			break
		}
		n++
	}
	return n
}

func defElapsedMS(h *History, now int64) int64 {
	var total int64
	for i := range h.Steps {
		s := &h.Steps[i]
		if s.EndedAt != nil {
			total += *s.EndedAt - s.StartedAt
		} else {
			total += max(now-s.StartedAt, 0)
		}
	}
	return total
}

func defUsage(h *History) api.Usage {
	var t tally
	for i := range h.Steps {
		t.addUsage(&h.Steps[i])
	}
	return t.usage
}

func defLastVerification(h *History) *storage.Step {
	for i := len(h.Steps) - 1; i >= 0; i-- {
		if s := &h.Steps[i]; s.Phase == api.PhaseVerification && counts(s) {
			return s
		}
	}
	return nil
}

// TestHistorySetupStep: a worktree run's setup step comes once, before
// iteration 1, until it succeeds; it is in no iteration and no streak.
func TestHistorySetupStep(t *testing.T) {
	setup := func(status api.StepStatus) storage.Step {
		end := int64(10)
		return storage.Step{Seq: 1, Phase: api.PhaseSetup, Iteration: 0, Status: status, EndedAt: &end}
	}
	p := Pipeline{Verification: true, Setup: true}
	tests := []struct {
		name  string
		steps []storage.Step
		next  Next
	}{
		{"first step is the setup", nil, Next{Phase: api.PhaseSetup}},
		{"after a successful setup, iteration 1", []storage.Step{setup(api.StepSucceeded)}, Next{Phase: api.PhaseImplementation, Iteration: 1}},
		{"a failed setup runs again (on resume)", []storage.Step{setup(api.StepFailed)}, Next{Phase: api.PhaseSetup, Retry: true}},
		{"an interrupted setup runs again", []storage.Step{setup(api.StepInterrupted)}, Next{Phase: api.PhaseSetup, Retry: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistory(tt.steps, p)
			if got := h.Next(); got != tt.next {
				t.Fatalf("Next() = %+v, want %+v", got, tt.next)
			}
			if c := h.Counters(); c != (api.Counters{}) || h.CompletedIterations() != 0 {
				t.Fatalf("the setup step counted: %+v, %d iterations", c, h.CompletedIterations())
			}
		})
	}
	// Without a setup_command there is no setup step.
	if h := NewHistory(nil, Pipeline{}); h.Next().Phase != api.PhaseImplementation {
		got := h.Next()
		t.Fatalf("Next() without setup = %+v", got)
	}
}

// TestHistoryBaselineStep: with verify_baseline the baseline runs once,
// after any setup and before iteration 1, until one records an outcome
// (a failing one included); it is in no iteration and no streak, and a
// run that already has iterations never goes back to it.
func TestHistoryBaselineStep(t *testing.T) {
	at := func(seq int, phase api.Phase, it int, status api.StepStatus) storage.Step {
		end := int64(seq * 10)
		return storage.Step{Seq: seq, Phase: phase, Iteration: it, Status: status, EndedAt: &end}
	}
	base := Pipeline{Verification: true, Baseline: true}
	withSetup := Pipeline{Verification: true, Baseline: true, Setup: true}
	tests := []struct {
		name  string
		p     Pipeline
		steps []storage.Step
		next  Next
	}{
		{"the first step is the baseline", base, nil, Next{Phase: api.PhaseBaseline}},
		{"after the setup, the baseline", withSetup, []storage.Step{at(1, api.PhaseSetup, 0, api.StepSucceeded)}, Next{Phase: api.PhaseBaseline}},
		{"the setup first", withSetup, nil, Next{Phase: api.PhaseSetup}},
		{"a failing baseline is an outcome: iteration 1", base, []storage.Step{at(1, api.PhaseBaseline, 0, api.StepFailed)},
			Next{Phase: api.PhaseImplementation, Iteration: 1}},
		{"a passing baseline: iteration 1", base, []storage.Step{at(1, api.PhaseBaseline, 0, api.StepSucceeded)},
			Next{Phase: api.PhaseImplementation, Iteration: 1}},
		{"an interrupted baseline runs again", base, []storage.Step{at(1, api.PhaseBaseline, 0, api.StepInterrupted)},
			Next{Phase: api.PhaseBaseline, Retry: true}},
		{"a canceled baseline runs again", base, []storage.Step{at(1, api.PhaseBaseline, 0, api.StepCanceled)},
			Next{Phase: api.PhaseBaseline, Retry: true}},
		{"turned on by resume --set after iteration 1: none", base, []storage.Step{at(1, api.PhaseImplementation, 1, api.StepSucceeded),
			at(2, api.PhaseVerification, 1, api.StepFailed)}, Next{Phase: api.PhaseImplementation, Iteration: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistory(tt.steps, tt.p)
			if got := h.Next(); got != tt.next {
				t.Fatalf("Next() = %+v, want %+v", got, tt.next)
			}
			if len(tt.steps) > 0 && tt.steps[0].Phase != api.PhaseImplementation {
				if c := h.Counters(); c != (api.Counters{}) || h.CompletedIterations() != 0 || h.TestFailureStreak() != 0 || h.LastVerification() != nil {
					t.Fatalf("the baseline counted: %+v, %d iterations, test streak %d", c, h.CompletedIterations(), h.TestFailureStreak())
				}
			}
		})
	}
	h := NewHistory([]storage.Step{at(1, api.PhaseBaseline, 0, api.StepInterrupted), at(2, api.PhaseBaseline, 0, api.StepFailed)}, base)
	if b := h.Baseline(); b == nil || b.Seq != 2 {
		t.Fatalf("Baseline() = %+v, want the counted step 2", b)
	}
}
