package stop

import (
	"strconv"
	"testing"
	"time"
)

// benchSet returns 100 conditions of mixed fast types (no scripts, no file reads) over
// the three classes, with nothing met, so every condition is evaluated.
func benchSet() Set {
	mk := []func(i int) Condition{
		func(i int) Condition { return MaxIterations{Count: 1000 + i} },
		func(i int) Condition { return MaxDuration{Duration: time.Duration(10+i) * time.Hour} },
		func(i int) Condition { return MaxTokens{Count: int64(10_000_000 + i)} },
		func(i int) Condition { return MaxInputTokens{Count: int64(10_000_000 + i)} },
		func(i int) Condition { return MaxOutputTokens{Count: int64(1_000_000 + i)} },
		func(i int) Condition { return MaxCost{Dollars: float64(100 + i)} },
		func(i int) Condition { return MaxCost{Dollars: float64(100 + i), Model: "claude-sonnet-4-5"} },
		func(i int) Condition { return TestFailureStreak{Count: 10 + i} },
		func(i int) Condition { return NoProgress{Iterations: 10 + i} },
		func(i int) Condition { return MaxConsecutiveFailures{Phase: "verification", Limit: 10 + i} },
		func(i int) Condition { return StuckTask{Count: 10 + i} },
		func(int) Condition { return AllTestsPass{} },
		func(i int) Condition {
			return SpecificTestsPass{Tests: []string{"TestA" + strconv.Itoa(i), "TestParse*", "test_x"}}
		},
		func(i int) Condition { return OutputPattern{Pattern: "NEVER-" + strconv.Itoa(i)} },
		func(i int) Condition { return OutputPattern{Pattern: `FATAL \d+ ` + strconv.Itoa(i), IsRegex: true} },
		func(i int) Condition { return OnError{Pattern: "panic " + strconv.Itoa(i)} },
		func(int) Condition { return UserSignal{} },
		func(int) Condition { return Never{} },
		func(i int) Condition { return And(MaxIterations{Count: 500 + i}, AllTestsPass{}) },
		func(i int) Condition { return Or(UserSignal{}, MaxTokens{Count: int64(5_000_000 + i)}) },
		func(i int) Condition { return Not(MaxIterations{Count: 1}) },
	}
	var s Set
	classes := []Class{ClassLimit, ClassSuccess, ClassFailure}
	for i := range 100 {
		s.Add(classes[i%3], mk[i%len(mk)](i))
	}
	return s
}

func benchContext() Context {
	return Context{
		RunID: "bench", Step: 1, Iteration: 12, Elapsed: 95 * time.Minute,
		LastOutput: "ok  \tgithub.com/loopd/loopd/internal/stop\t0.3s\n" + string(make([]byte, 8<<10)),
		HasError:   true, LastError: "exit status 1",
		TestsKnown: true, PassedTests: []string{"pkg/TestA1", "TestParseInt", "tests/t.py::test_x", "TestB"},
		FailedTests:       []string{"TestC"},
		TestFailureStreak: 2, IterationsSinceProgress: 1,
		Usage:               Usage{InputTokens: 120_000, OutputTokens: 40_000, CacheReadTokens: 900_000, CacheWriteTokens: 60_000, PricedCostUSD: 1.9, PricedKnown: true},
		ConsecutiveFailures: map[string]int{"verification": 2},
		StuckTaskFailures:   1,
	}
}

// BenchmarkEvaluate100 evaluates 100 non-script conditions per op (target ≤ 50 µs).
func BenchmarkEvaluate100(b *testing.B) {
	set := benchSet()
	if set.Len() != 100 {
		b.Fatalf("%d conditions", set.Len())
	}
	e := NewEvaluator(set, Options{})
	c := benchContext()
	if ev := e.Evaluate(b.Context(), c); ev.Stop != nil || len(ev.Results) != 100 {
		b.Fatalf("benchmark set stops or skips: %+v", ev.Stop)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Step = int64(i + 2)
		e.Evaluate(b.Context(), c)
	}
}
