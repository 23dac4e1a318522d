package scheduler

import (
	"math/rand/v2"
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
	h.Steps = append(h.Steps, running)
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
	if u.InputTokens != 150 || u.OutputTokens != 7 || u.CostUSD != 0.75 || u.ReportedCostUSD != 0.25 || !u.CostUnknown {
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
