package stop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Seed 000, testing requirement 7 (priorities); the evaluation order is tested by
// TestSequentialEvaluationRespectsPriorityOrder.
func TestPrioritiesDescriptionsAndReasons(t *testing.T) {
	cases := []struct {
		cond     Condition
		priority int
		desc     string
		reason   string
	}{
		{MaxIterations{Count: 5}, 80, "after 5 iterations", "max_iterations:5"},
		{MaxDuration{Duration: 150 * time.Minute}, 80, "after 2h 30m", "max_duration:2h 30m"},
		{TestFailureStreak{Count: 3}, 70, "after 3 consecutive test failures", "test_failure_streak:3"},
		{AllTestsPass{}, 60, "when all tests pass", "condition:all_tests_pass"},
		{SpecificTestsPass{Tests: []string{"a", "b"}}, 60, "when tests pass: a, b", "condition:specific_tests_pass"},
		{NoProgress{Iterations: 4}, 70, "after 4 iterations with no progress", "no_progress:4"},
		{FileCreated{Path: "DONE.md"}, 40, "when DONE.md is created", "condition:file_created"},
		{FileContains{Path: "a.txt", Content: "ok"}, 40, "when a.txt contains 'ok'", "condition:file_contains"},
		{OutputPattern{Pattern: "DONE"}, 50, "when output contains 'DONE'", "condition:output_pattern"},
		{OutputPattern{Pattern: "D+", IsRegex: true}, 50, "when output matches regex /D+/", "condition:output_pattern"},
		{OnError{}, 100, "on any error", "condition:on_error"},
		{OnError{Pattern: "boom"}, 100, "on error matching 'boom'", "condition:on_error"},
		{CustomScript{Script: "check.sh"}, 30, "when script check.sh succeeds", "condition:custom_script"},
		{UserSignal{}, 90, "on user signal", "condition:user_signal"},
		{And(MaxIterations{Count: 2}, AllTestsPass{}), 20, "when ALL: [after 2 iterations AND when all tests pass]", "condition:all"},
		{Or(UserSignal{}, OnError{}), 20, "when ANY: [on user signal OR on any error]", "condition:any"},
		{Not(UserSignal{}), 10, "NOT (on user signal)", "condition:not"},
		{Never{}, 0, "never (manual stop only)", "condition:never"},
		{MaxTokens{Count: 1000000}, 80, "when 1000000 tokens are used", "max_tokens:1000000"},
		{MaxInputTokens{Count: 500}, 80, "when 500 input tokens are used", "max_input_tokens:500"},
		{MaxOutputTokens{Count: 200}, 80, "when 200 output tokens are used", "max_output_tokens:200"},
		{MaxCost{Dollars: 5}, 80, "when cost reaches $5.00", "max_cost:5.00"},
		{MaxCost{Dollars: 0.5, Model: "gpt-4o"}, 80, "when cost reaches $0.50 (priced as gpt-4o)", "max_cost:0.50"},
		{MaxConsecutiveFailures{Phase: "verification", Limit: 3}, 70, "after 3 consecutive verification failures", "max_consecutive_failures:verification:3"},
		{StuckTask{Count: 3}, 70, "when the same plan task fails verification 3 times in a row", "stuck_task:3"},
	}
	for _, tc := range cases {
		if got := tc.cond.Priority(); got != tc.priority {
			t.Errorf("%T Priority = %d, want %d", tc.cond, got, tc.priority)
		}
		if got := tc.cond.Description(); got != tc.desc {
			t.Errorf("%T Description = %q, want %q", tc.cond, got, tc.desc)
		}
		if got := tc.cond.Reason(); got != tc.reason {
			t.Errorf("%T Reason = %q, want %q", tc.cond, got, tc.reason)
		}
	}
}

func TestBuildersFlattenLikeTheSeed(t *testing.T) {
	a, b, c := MaxIterations{Count: 1}, UserSignal{}, Never{}
	ab := And(a, b)
	abc := And(ab, c)
	if !reflect.DeepEqual(abc, All{Conditions: []Condition{a, b, c}}) {
		t.Errorf("And(All, c) = %#v", abc)
	}
	abd := And(ab, OnError{})
	if !reflect.DeepEqual(abc.Conditions[2], c) || !reflect.DeepEqual(abd.Conditions[2], OnError{}) {
		t.Errorf("builders share backing arrays: %#v %#v", abc, abd)
	}
	if got := And(a, ab); !reflect.DeepEqual(got, All{Conditions: []Condition{a, ab}}) {
		t.Errorf("And(a, All) = %#v", got)
	}
	if got := Or(Or(a, b), c); !reflect.DeepEqual(got, Any{Conditions: []Condition{a, b, c}}) {
		t.Errorf("Or(Any, c) = %#v", got)
	}
	if got := Not(a); got != (Negation{Condition: a}) {
		t.Errorf("Not(a) = %#v", got)
	}
}

// Seed 000, testing requirement 7, and seed 001, testing requirement 1.
func TestSequentialEvaluationRespectsPriorityOrder(t *testing.T) {
	set := Set{
		Conditions:        []Condition{Never{}, MaxIterations{Count: 9}, OutputPattern{Pattern: "x"}, MaxTokens{Count: 9}, UserSignal{}},
		SuccessConditions: []Condition{AllTestsPass{}, MaxIterations{Count: 8}, Not(Never{})},
		FailureConditions: []Condition{StuckTask{Count: 9}, OnError{}, MaxIterations{Count: 7}},
	}
	e := NewEvaluator(set, Options{Sequential: true, Clock: newFakeClock()})
	ev := e.Evaluate(t.Context(), Context{RunID: "r"})
	var got []string
	for _, r := range ev.Results {
		got = append(got, fmt.Sprintf("%s:%s[%d]", r.Class, r.Condition.Type(), r.Index))
	}
	want := []string{
		"failure:on_error[1]",
		"limit:user_signal[4]",
		"failure:max_iterations[2]", // priority 80: failure, success, limit, then declaration order
		"success:max_iterations[1]",
		"limit:max_iterations[1]",
		"limit:max_tokens[3]",
		"failure:stuck_task[0]",
		"success:all_tests_pass[0]",
		"limit:output_pattern[2]",
		"success:not[2]",
		"limit:never[0]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order\n got %v\nwant %v", got, want)
	}
}

func TestVerdictResolution(t *testing.T) {
	type classed struct {
		class Class
		cond  Condition
	}
	iter3 := Context{RunID: "r", Iteration: 3, UserSignal: true, HasError: true, LastError: "boom", TestsKnown: true, PassedTests: []string{"a"}}
	cases := []struct {
		name   string
		conds  []classed
		reason string
		class  Class
	}{
		{"nothing met", []classed{{ClassLimit, MaxIterations{Count: 5}}, {ClassFailure, StuckTask{Count: 1}}}, "", ""},
		{"failure beats success beats limit", []classed{
			{ClassLimit, MaxIterations{Count: 3}}, {ClassSuccess, AllTestsPass{}}, {ClassFailure, Not(Never{})},
		}, "condition:not", ClassFailure},
		{"success beats limit of higher priority", []classed{
			{ClassLimit, OnError{}}, {ClassSuccess, AllTestsPass{}},
		}, "condition:all_tests_pass", ClassSuccess},
		{"within a class, priority", []classed{
			{ClassLimit, MaxIterations{Count: 3}}, {ClassLimit, UserSignal{}},
		}, "condition:user_signal", ClassLimit},
		{"within a priority, declaration order", []classed{
			{ClassLimit, MaxTokens{Count: 1}}, {ClassLimit, MaxIterations{Count: 3}}, {ClassLimit, MaxIterations{Count: 2}},
		}, "max_tokens:1", ClassLimit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var set Set
			for _, c := range tc.conds {
				set.Add(c.class, c.cond)
			}
			c := iter3
			c.Usage = Usage{OutputTokens: 5}
			for _, seq := range []bool{true, false} {
				ev := NewEvaluator(set, Options{Sequential: seq}).Evaluate(t.Context(), c)
				switch {
				case tc.reason == "" && ev.Stop != nil:
					t.Errorf("sequential=%v: unexpected verdict %+v", seq, ev.Stop)
				case tc.reason != "" && (ev.Stop == nil || ev.Stop.Reason != tc.reason || ev.Stop.Class != tc.class):
					t.Errorf("sequential=%v: verdict %+v, want %s (%s)", seq, ev.Stop, tc.reason, tc.class)
				}
			}
		})
	}
}

// slowSet mixes slow conditions (scripts, files, composites with them) and fast ones.
func slowSet(t *testing.T) (Set, Context) {
	ws := t.TempDir()
	writeFile(t, ws, "yes.sh", "#!/bin/sh\necho yes $1\n", 0o755)
	writeFile(t, ws, "no.sh", "#!/bin/sh\necho no >&2\nexit 1\n", 0o755)
	writeFile(t, ws, "DONE", "state: done\n", 0o644)
	set := Set{
		Conditions: []Condition{
			MaxIterations{Count: 10}, CustomScript{Script: "no.sh"}, FileCreated{Path: "missing"},
			And(MaxIterations{Count: 2}, FileContains{Path: "DONE", Content: "done"}),
			CustomScript{Script: "absent.sh"}, MaxTokens{Count: 100},
		},
		SuccessConditions: []Condition{CustomScript{Script: "yes.sh", Args: []string{"ok"}}, FileContains{Path: "DONE", Content: "state: done"}, AllTestsPass{}},
		FailureConditions: []Condition{Not(CustomScript{Script: "no.sh"}), OnError{Pattern: "fatal"}},
	}
	c := run(ws)
	c.Iteration = 3
	c.Usage = Usage{InputTokens: 40}
	return set, c
}

// comparable strips what legitimately differs between runs (timings).
func comparableResults(rs []Result) []Result {
	out := make([]Result, len(rs))
	for i, r := range rs {
		r.Duration = 0
		out[i] = r
	}
	return out
}

// Seed 001, testing requirement 2, with and without stop_on_first.
func TestParallelEvaluationProducesSameResults(t *testing.T) {
	for _, stopOnFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("stop_on_first=%v", stopOnFirst), func(t *testing.T) {
			set, c := slowSet(t)
			set.StopOnFirst = stopOnFirst
			seq := NewEvaluator(set, Options{Sequential: true, CacheTTL: -1}).Evaluate(t.Context(), c)
			par := NewEvaluator(set, Options{MaxParallel: 3, CacheTTL: -1}).Evaluate(t.Context(), c)
			if !reflect.DeepEqual(comparableResults(seq.Results), comparableResults(par.Results)) {
				t.Errorf("results differ\nsequential: %+v\nparallel:   %+v", seq.Results, par.Results)
			}
			if !reflect.DeepEqual(seq.Stop, par.Stop) {
				t.Errorf("verdicts differ: %+v vs %+v", seq.Stop, par.Stop)
			}
			if stopOnFirst {
				// In priority order the first met condition is the success file_contains
				// (40), although the failure not(no.sh) (10) would win without stop_on_first.
				if n := len(seq.Results); n == 0 || !seq.Results[n-1].Met {
					t.Fatalf("stop_on_first results do not end at a met condition: %+v", seq.Results)
				}
				for _, r := range seq.Results[:len(seq.Results)-1] {
					if r.Met {
						t.Errorf("met condition before the last one: %+v", r)
					}
				}
				if seq.Stop == nil || seq.Stop.Reason != "condition:file_contains" || seq.Stop.Class != ClassSuccess {
					t.Errorf("stop_on_first verdict %+v", seq.Stop)
				}
			} else {
				if len(seq.Results) != set.Len() {
					t.Errorf("%d results for %d conditions", len(seq.Results), set.Len())
				}
				if seq.Stop == nil || seq.Stop.Reason != "condition:not" || seq.Stop.Class != ClassFailure {
					t.Errorf("verdict %+v, want the failure not(no.sh)", seq.Stop)
				}
			}
		})
	}
}

// countingScript writes a script that appends a line to runs.log every time it runs.
func countingScript(t *testing.T, ws string) (CustomScript, func() int) {
	writeFile(t, ws, "count.sh", "#!/bin/sh\necho run >> runs.log\necho counted\n", 0o755)
	return CustomScript{Script: "count.sh"}, func() int {
		b, err := os.ReadFile(filepath.Join(ws, "runs.log"))
		if err != nil {
			return 0
		}
		return strings.Count(string(b), "run\n")
	}
}

// Seed 001, testing requirement 3.
func TestCacheReturnsCachedResultForTheSameStep(t *testing.T) {
	ws := t.TempDir()
	script, runs := countingScript(t, ws)
	clock := newFakeClock()
	e := NewEvaluator(Set{SuccessConditions: []Condition{script, Or(Never{}, script)}}, Options{Clock: clock, CacheTTL: time.Minute})
	c := run(ws)
	first := e.Evaluate(t.Context(), c)
	if runs() != 2 || first.Results[0].Cached || first.Results[1].Cached {
		t.Fatalf("first evaluation: runs=%d results=%+v", runs(), first.Results)
	}
	clock.Advance(59 * time.Second)
	second := e.Evaluate(t.Context(), c)
	if runs() != 2 {
		t.Errorf("script ran again within the TTL for the same step: runs=%d", runs())
	}
	for i, r := range second.Results {
		if !r.Cached || !r.Met || r.Reason != "counted" {
			t.Errorf("result %d: %+v, want a cached met result", i, r)
		}
	}
}

// Seed 001, testing requirement 4.
func TestCacheInvalidatesAfterTTL(t *testing.T) {
	ws := t.TempDir()
	script, runs := countingScript(t, ws)
	clock := newFakeClock()
	e := NewEvaluator(Set{SuccessConditions: []Condition{script}}, Options{Clock: clock, CacheTTL: time.Second})
	c := run(ws)
	e.Evaluate(t.Context(), c)
	clock.Advance(time.Second)
	if r := e.Evaluate(t.Context(), c).Results[0]; r.Cached || runs() != 2 {
		t.Errorf("after the TTL: cached=%v runs=%d", r.Cached, runs())
	}

	t.Run("a negative TTL disables the cache", func(t *testing.T) {
		e := NewEvaluator(Set{SuccessConditions: []Condition{script}}, Options{Clock: clock, CacheTTL: -1})
		e.Evaluate(t.Context(), c)
		e.Evaluate(t.Context(), c)
		if runs() != 4 {
			t.Errorf("runs = %d, want 4", runs())
		}
	})
}

// The seed keyed its cache by the condition alone, so a result computed at one step was
// served at the next; 1,000 quick steps with max_iterations = 7 must stop at exactly 7.
func TestCacheNeverReusedForADifferentStep(t *testing.T) {
	ws := t.TempDir()
	clock := newFakeClock()
	set := Set{
		Conditions: []Condition{
			MaxIterations{Count: 7},
			And(MaxIterations{Count: 7}, Not(FileCreated{Path: "never-there"})),
		},
		SuccessConditions: []Condition{FileCreated{Path: "DONE"}},
	}
	e := NewEvaluator(set, Options{Clock: clock, CacheTTL: time.Hour})
	stoppedAt := 0
	for step := 1; step <= 1000; step++ {
		clock.Advance(time.Millisecond)
		ev := e.Evaluate(t.Context(), Context{RunID: "r", Step: int64(step), Iteration: step, Workspace: ws})
		if ev.Stop != nil {
			stoppedAt = ev.Iteration
			if ev.Stop.Reason != "max_iterations:7" {
				t.Errorf("verdict %+v", ev.Stop)
			}
			if !ev.Results[len(ev.Results)-1].Met {
				t.Errorf("the composite with a slow leaf is stale: %+v", ev.Results)
			}
			break
		}
	}
	if stoppedAt != 7 {
		t.Fatalf("stopped at iteration %d, want exactly 7", stoppedAt)
	}

	// A slow leaf sees a file that appears at step 500 at step 500, not later.
	e = NewEvaluator(Set{SuccessConditions: []Condition{FileCreated{Path: "DONE"}}}, Options{Clock: clock, CacheTTL: time.Hour})
	for step := 1; step <= 1000; step++ {
		if step == 500 {
			writeFile(t, ws, "DONE", "", 0o644)
		}
		ev := e.Evaluate(t.Context(), Context{RunID: "r", Step: int64(step), Workspace: ws})
		if ev.Stop != nil {
			if step != 500 {
				t.Fatalf("file created at step 500 seen at step %d", step)
			}
			return
		}
		if step > 500 {
			t.Fatal("file never seen")
		}
	}
}

// Seed 001, testing requirement 5.
func TestProgressTrackingDetectsChanges(t *testing.T) {
	set := Set{Conditions: []Condition{MaxTokens{Count: 1_000_000}, UserSignal{}}, FailureConditions: []Condition{NoProgress{Iterations: 4}}}
	e := NewEvaluator(set, Options{Clock: newFakeClock()})
	ctx := func(tokens int64, since int) Context {
		return Context{RunID: "r", Usage: Usage{OutputTokens: tokens}, IterationsSinceProgress: since}
	}
	type seen struct {
		typ      Type
		prev     float64 // noProgress when first seen
		cur, del float64
	}
	progressed := func(ev Evaluation) []seen {
		var out []seen
		for _, p := range ev.Progressed {
			s := seen{p.Condition.Type(), noProgress, p.Current, p.Delta}
			if p.Previous != nil {
				s.prev = *p.Previous
			}
			out = append(out, s)
		}
		return out
	}
	steps := []struct {
		ctx  Context
		want []seen
	}{
		{ctx(0, 0), []seen{{TypeMaxTokens, noProgress, 0, 0}, {TypeNoProgress, noProgress, 0, 0}}}, // first time seen
		{ctx(500, 0), nil}, // 0.0005: below the threshold
		{ctx(1500, 0), []seen{{TypeMaxTokens, 0, 0.0015, 0.0015}}}, // accumulated past it
		{ctx(1500, 1), []seen{{TypeNoProgress, 0, 0.25, 0.25}}},
		{ctx(1500, 0), []seen{{TypeNoProgress, 0.25, 0, -0.25}}}, // progress can go down
		{ctx(1500, 0), nil},
	}
	for i, s := range steps {
		got := progressed(e.Evaluate(t.Context(), s.ctx))
		if len(got) != len(s.want) {
			t.Fatalf("step %d: progressed %+v, want %+v", i, got, s.want)
		}
		for j := range got {
			g, w := got[j], s.want[j]
			if g.typ != w.typ || !near(g.prev, w.prev) || !near(g.cur, w.cur) || !near(g.del, w.del) {
				t.Errorf("step %d: progressed %+v, want %+v", i, got, s.want)
			}
		}
	}

	t.Run("restore after a restart does not re-emit unchanged progress", func(t *testing.T) {
		last := e.History()[len(e.History())-1].Results
		fresh := NewEvaluator(set, Options{Clock: newFakeClock()})
		fresh.Restore(last)
		got := progressed(fresh.Evaluate(t.Context(), ctx(1500, 0)))
		if len(got) != 0 {
			t.Errorf("restored evaluator re-emitted %+v", got)
		}
		got = progressed(fresh.Evaluate(t.Context(), ctx(600_000, 0)))
		if len(got) != 1 || !near(got[0].prev, 0.0015) || !near(got[0].cur, 0.6) {
			t.Errorf("after restore: %+v", got)
		}
	})
}

// Seed 001, testing requirement 6.
func TestHistoryKeepsTheLast100Evaluations(t *testing.T) {
	e := NewEvaluator(Set{Conditions: []Condition{MaxIterations{Count: 1000}}}, Options{Clock: newFakeClock()})
	if len(e.History()) != 0 {
		t.Fatal("history not empty")
	}
	for step := 1; step <= 150; step++ {
		e.Evaluate(t.Context(), Context{RunID: "r", Step: int64(step), Iteration: step})
		if step == 42 {
			h := e.History()
			if len(h) != 42 || h[0].Step != 1 || h[41].Step != 42 {
				t.Fatalf("history after 42: %d entries, %d..%d", len(h), h[0].Step, h[len(h)-1].Step)
			}
		}
	}
	h := e.History()
	if len(h) != historySize {
		t.Fatalf("history has %d entries", len(h))
	}
	for i, ev := range h {
		if want := int64(51 + i); ev.Step != want {
			t.Fatalf("history[%d].Step = %d, want %d", i, ev.Step, want)
		}
		if len(ev.Results) != 1 || ev.Results[0].Reason != strconv.Itoa(int(ev.Step))+"/1000 done" {
			t.Fatalf("history[%d] results %+v", i, ev.Results)
		}
	}

	t.Run("another run starts afresh", func(t *testing.T) {
		e.Evaluate(t.Context(), Context{RunID: "other", Step: 1})
		if h := e.History(); len(h) != 1 || h[0].RunID != "other" {
			t.Errorf("history after switching runs: %d entries", len(h))
		}
	})
}

// Seed 001, testing requirement 7: every state change is reported — progress changes
// (for CONDITION_PROGRESSED) and the verdict. The debug log of every evaluation is the
// scheduler's (TestEvaluationLogReportsEveryEvaluation in internal/scheduler).
func TestEvaluationReportsEveryStateChange(t *testing.T) {
	clock := newFakeClock()
	e := NewEvaluator(Set{Conditions: []Condition{MaxIterations{Count: 2}}}, Options{Clock: clock})

	ev := e.Evaluate(t.Context(), Context{RunID: "r", Step: 10, Iteration: 1})
	if ev.Stop != nil || len(ev.Progressed) != 1 || ev.Progressed[0].Current != 0.5 {
		t.Fatalf("iteration 1: %+v", ev)
	}
	if ev.At != clock.Now() || ev.RunID != "r" || ev.Step != 10 || ev.Iteration != 1 {
		t.Errorf("evaluation header %+v", ev)
	}
	ev = e.Evaluate(t.Context(), Context{RunID: "r", Step: 11, Iteration: 2})
	want := &Verdict{Condition: MaxIterations{Count: 2}, Class: ClassLimit, Reason: "max_iterations:2",
		Description: "after 2 iterations", Detail: "Reached 2 iterations"}
	if !reflect.DeepEqual(ev.Stop, want) {
		t.Errorf("verdict %+v, want %+v", ev.Stop, want)
	}
	if len(ev.Progressed) != 1 || *ev.Progressed[0].Previous != 0.5 || ev.Progressed[0].Current != 1 {
		t.Errorf("progressed %+v", ev.Progressed)
	}
}

func TestCanceledEvaluationIsNotATimeout(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, "ok.sh", "#!/bin/sh\nexit 0\n", 0o755)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	e := NewEvaluator(Set{SuccessConditions: []Condition{CustomScript{Script: "ok.sh"}, FileCreated{Path: "ok.sh"}}}, Options{})
	for _, r := range e.Evaluate(ctx, Context{RunID: "r", Workspace: ws}).Results {
		if r.Met || r.TimedOut || r.Err != "evaluation canceled" {
			t.Errorf("%+v", r)
		}
	}
}

// Seed 002 acceptance criteria, through the evaluator.
func TestTokenAndCostStops(t *testing.T) {
	cases := []struct {
		name   string
		set    Set
		ctx    Context
		reason string // "" for no verdict
	}{
		{"maxIterations(3) stops on iteration 3", Set{Conditions: []Condition{MaxIterations{Count: 3}}}, Context{Iteration: 3}, "max_iterations:3"},
		{"maxIterations(3) goes on at 2", Set{Conditions: []Condition{MaxIterations{Count: 3}}}, Context{Iteration: 2}, ""},
		{"maxTokens(1000) stops at 1000", Set{Conditions: []Condition{MaxTokens{Count: 1000}}},
			Context{Usage: Usage{InputTokens: 100, CacheReadTokens: 600, OutputTokens: 300}}, "max_tokens:1000"},
		{"maxTokens(1000) goes on at 999", Set{Conditions: []Condition{MaxTokens{Count: 1000}}},
			Context{Usage: Usage{InputTokens: 100, CacheReadTokens: 600, OutputTokens: 299}}, ""},
		{"maxCost(0.50) stops at $0.50", Set{Conditions: []Condition{MaxCost{Dollars: 0.5}}},
			Context{Usage: Usage{PricedCostUSD: 0.5, PricedKnown: true}}, "max_cost:0.50"},
		{"maxCost(0.50) goes on below", Set{Conditions: []Condition{MaxCost{Dollars: 0.5}}},
			Context{Usage: Usage{PricedCostUSD: 0.4999, PricedKnown: true}}, ""},
		{"no condition triggers", Set{Conditions: []Condition{MaxIterations{Count: 10}, MaxCost{Dollars: 1}, MaxInputTokens{Count: 5000}}},
			Context{Iteration: 1, Usage: Usage{InputTokens: 10, PricedKnown: true}}, ""},
		{"first triggered in priority then declaration order", Set{Conditions: []Condition{
			MaxOutputTokens{Count: 10}, MaxIterations{Count: 1}, MaxCost{Dollars: 0.01},
		}}, Context{Iteration: 1, Usage: Usage{OutputTokens: 10, PricedCostUSD: 1, PricedKnown: true}}, "max_output_tokens:10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := NewEvaluator(tc.set, Options{}).Evaluate(t.Context(), tc.ctx)
			switch {
			case tc.reason == "" && ev.Stop != nil:
				t.Errorf("unexpected verdict %+v", ev.Stop)
			case tc.reason != "" && (ev.Stop == nil || ev.Stop.Reason != tc.reason || ev.Stop.Class != ClassLimit):
				t.Errorf("verdict %+v, want %s", ev.Stop, tc.reason)
			}
		})
	}
}

func TestProgressBar(t *testing.T) {
	p := func(v float64) *float64 { return &v }
	cases := []struct {
		r    Result
		want string
	}{
		{Result{Progress: p(0.5)}, "[#####-----]  50%"},
		{Result{Progress: p(0.999)}, "[#########-]  99%"},
		{Result{Progress: p(1)}, "[##########] 100%"},
		{Result{Progress: p(0)}, "[----------]   0%"},
		{Result{}, "[          ]  n/a"},
	}
	for _, tc := range cases {
		if got := tc.r.ProgressBar(10); got != tc.want {
			t.Errorf("ProgressBar = %q, want %q", got, tc.want)
		}
	}
}
