package stop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type condCase struct {
	name     string
	cond     Condition
	ctx      Context
	met      bool
	progress float64 // noProgress for nil
	reason   string  // substring of Result.Reason
}

func runCondCases(t *testing.T, cases []condCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := evalOne(t, tc.cond, tc.ctx)
			if r.Met != tc.met {
				t.Errorf("Met = %v, want %v (reason %q, err %q)", r.Met, tc.met, r.Reason, r.Err)
			}
			if got := progressOf(r); !near(got, tc.progress) {
				t.Errorf("Progress = %v, want %v", got, tc.progress)
			}
			if !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("Reason = %q, want it to contain %q", r.Reason, tc.reason)
			}
			if r.Description != tc.cond.Description() {
				t.Errorf("Description = %q, want %q", r.Description, tc.cond.Description())
			}
		})
	}
}

// Seed 000, testing requirement 1.
func TestMaxIterationsTriggersAtCount(t *testing.T) {
	c := MaxIterations{Count: 3}
	runCondCases(t, []condCase{
		{"zero", c, Context{Iteration: 0}, false, 0, "0/3 done"},
		{"one", c, Context{Iteration: 1}, false, 1.0 / 3, "1/3 done"},
		{"two", c, Context{Iteration: 2}, false, 2.0 / 3, "2/3 done"},
		{"at count", c, Context{Iteration: 3}, true, 1, "Reached 3 iterations"},
		{"past count", c, Context{Iteration: 9}, true, 1, "Reached 3 iterations"},
	})
}

// Seed 000, testing requirement 2.
func TestMaxDurationTriggersAfterElapsed(t *testing.T) {
	c := MaxDuration{Duration: 2 * time.Hour}
	runCondCases(t, []condCase{
		{"not started", c, Context{}, false, 0, "0s / 2h elapsed"},
		{"half", c, Context{Elapsed: time.Hour + 500*time.Millisecond}, false, 0.5 + 0.5/7200, "1h / 2h elapsed"},
		{"just before", c, Context{Elapsed: 2*time.Hour - time.Nanosecond}, false, 1 - 1/7.2e12, "elapsed"},
		{"at limit", c, Context{Elapsed: 2 * time.Hour}, true, 1, "Reached duration limit of 2h"},
		{"after", c, Context{Elapsed: 3 * time.Hour}, true, 1, "Reached duration limit of 2h"},
	})
}

// Seed 000, testing requirement 3.
func TestTestFailureStreakCounts(t *testing.T) {
	c := TestFailureStreak{Count: 4}
	runCondCases(t, []condCase{
		{"none", c, Context{}, false, 0, "0/4 failures"},
		{"three", c, Context{TestFailureStreak: 3}, false, 0.75, "3/4 failures"},
		{"four", c, Context{TestFailureStreak: 4}, true, 1, "4 consecutive test failures"},
	})
}

// Seed 000, testing requirement 4.
func TestOutputPatternMatchesStringsAndRegex(t *testing.T) {
	out := Context{LastOutput: "running...\nok  \tgithub.com/x/y\t0.12s\nDONE: 12 passed"}
	runCondCases(t, []condCase{
		{"plain match", OutputPattern{Pattern: "DONE: 12"}, out, true, 1, "Output matched pattern: DONE: 12"},
		{"plain is literal", OutputPattern{Pattern: "DONE: \\d+"}, out, false, noProgress, "does not match"},
		{"plain no match", OutputPattern{Pattern: "FAIL"}, out, false, noProgress, ""},
		{"regex match", OutputPattern{Pattern: `(?m)^ok\s+\S+`, IsRegex: true}, out, true, 1, "Output matched"},
		{"regex no match", OutputPattern{Pattern: `^FAIL`, IsRegex: true}, out, false, noProgress, ""},
		{"regex digits", OutputPattern{Pattern: `DONE: \d+ passed$`, IsRegex: true}, out, true, 1, ""},
		{"empty output", OutputPattern{Pattern: "x"}, Context{}, false, noProgress, ""},
	})
	t.Run("bad regex is an error, not a match", func(t *testing.T) {
		r := evalOne(t, OutputPattern{Pattern: "(", IsRegex: true}, Context{LastOutput: "("})
		if r.Met || !strings.Contains(r.Err, "invalid regex") {
			t.Errorf("got Met=%v Err=%q, want not met with an invalid regex error", r.Met, r.Err)
		}
	})
}

// Seed 000, testing requirement 5.
func TestFileConditionsDetectChanges(t *testing.T) {
	ws := t.TempDir()
	created := FileCreated{Path: "out/DONE.md"}
	contains := FileContains{Path: "out/DONE.md", Content: "status: ready"}

	r := evalOne(t, created, run(ws))
	if r.Met || r.Err != "" || !strings.Contains(r.Reason, "does not exist") {
		t.Fatalf("before creation: %+v", r)
	}
	if r := evalOne(t, contains, run(ws)); r.Met || r.Err != "" {
		t.Fatalf("contains before creation: %+v", r)
	}

	writeFile(t, ws, "out/DONE.md", "status: working\n", 0o644)
	if r := evalOne(t, created, run(ws)); !r.Met || r.Reason != "File created: out/DONE.md" {
		t.Fatalf("after creation: %+v", r)
	}
	if r := evalOne(t, contains, run(ws)); r.Met {
		t.Fatalf("contains before the content is there: %+v", r)
	}

	writeFile(t, ws, "out/DONE.md", "status: ready\n", 0o644)
	if r := evalOne(t, contains, run(ws)); !r.Met || !strings.Contains(r.Reason, "contains expected content") {
		t.Fatalf("contains after the change: %+v", r)
	}
}

func TestFileContainsFindsContentAcrossChunks(t *testing.T) {
	ws := t.TempDir()
	needle := "NEEDLE-" + strings.Repeat("x", 100)
	// Place the needle across the 64 KiB read boundary.
	content := strings.Repeat("a", 64<<10-50) + needle + strings.Repeat("b", 1<<20)
	writeFile(t, ws, "big.log", content, 0o644)
	if r := evalOne(t, FileContains{Path: "big.log", Content: needle}, run(ws)); !r.Met {
		t.Errorf("needle across chunks not found: %+v", r)
	}
	if r := evalOne(t, FileContains{Path: "big.log", Content: "NEEDLE-y"}, run(ws)); r.Met {
		t.Errorf("absent needle found: %+v", r)
	}
}

func TestFileConditionsStayInsideTheWorkspace(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, outside, "secret", "password", 0o644)
	ws := t.TempDir()
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "link")); err != nil {
		t.Skip("symlinks unsupported:", err)
	}
	for _, c := range []Condition{
		FileCreated{Path: "../" + filepath.Base(outside) + "/secret"},
		FileCreated{Path: filepath.Join(outside, "secret")},
		FileContains{Path: "link", Content: "password"},
	} {
		r := evalOne(t, c, run(ws))
		if r.Met || r.Err == "" {
			t.Errorf("%s: got Met=%v Err=%q, want an error and not met", c.Description(), r.Met, r.Err)
		}
	}
}

// Seed 000, testing requirement 6: composite truth tables.
func TestCompositeConditions(t *testing.T) {
	a := UserSignal{}          // met when UserSignal
	b := OnError{Pattern: "x"} // met when HasError with "x"
	ctx := func(av, bv bool) Context {
		return Context{UserSignal: av, HasError: bv, LastError: "x"}
	}
	type row struct{ a, b, all, any, notA, notAll bool }
	rows := []row{
		{false, false, false, false, true, true},
		{false, true, false, true, true, true},
		{true, false, false, true, false, true},
		{true, true, true, true, false, false},
	}
	for _, r := range rows {
		c := ctx(r.a, r.b)
		for _, tc := range []struct {
			name string
			cond Condition
			want bool
		}{
			{"all", And(a, b), r.all},
			{"any", Or(a, b), r.any},
			{"not a", Not(a), r.notA},
			{"not all", Not(And(a, b)), r.notAll},
			{"any of all", Or(And(a, b), Never{}), r.all},
			{"all of any and not", And(Or(a, b), Not(And(a, b))), r.any && !r.all},
		} {
			if got := evalOne(t, tc.cond, c).Met; got != tc.want {
				t.Errorf("a=%v b=%v %s: Met = %v, want %v", r.a, r.b, tc.name, got, tc.want)
			}
		}
	}

	t.Run("all progress is the average, any the max", func(t *testing.T) {
		c := Context{Iteration: 1, TestFailureStreak: 3}
		all := All{Conditions: []Condition{MaxIterations{Count: 4}, TestFailureStreak{Count: 4}, UserSignal{}}}
		if got := progressOf(evalOne(t, all, c)); !near(got, (0.25+0.75+0)/3) {
			t.Errorf("all progress = %v", got)
		}
		anyc := Any{Conditions: []Condition{MaxIterations{Count: 4}, TestFailureStreak{Count: 4}, UserSignal{}}}
		if got := progressOf(evalOne(t, anyc, c)); !near(got, 0.75) {
			t.Errorf("any progress = %v", got)
		}
		if got := progressOf(evalOne(t, Any{Conditions: []Condition{UserSignal{}, Never{}}}, c)); got != noProgress {
			t.Errorf("unmeasurable any progress = %v, want none", got)
		}
		if got := progressOf(evalOne(t, Not(MaxIterations{Count: 4}), c)); !near(got, 1) {
			t.Errorf("met not progress = %v, want 1", got)
		}
	})

	t.Run("any reports the child's reason", func(t *testing.T) {
		r := evalOne(t, Or(UserSignal{}, MaxIterations{Count: 2}), Context{Iteration: 2})
		if !r.Met || r.Reason != "Reached 2 iterations" {
			t.Errorf("got %+v", r)
		}
	})

	t.Run("not of an unknown child is not met", func(t *testing.T) {
		ws := t.TempDir()
		for _, inner := range []Condition{
			CustomScript{Script: "missing.sh"},
			MaxCost{Dollars: 1},
			OutputPattern{Pattern: "(", IsRegex: true},
		} {
			c := run(ws)
			c.Usage = Usage{InputTokens: 10, Model: "mystery"}
			r := evalOne(t, Not(inner), c)
			if r.Met {
				t.Errorf("NOT (%s) met although the child is unknown: %+v", inner.Description(), r)
			}
		}
	})
}

// Seed 000, testing requirement 8.
func TestCustomScriptExecutesAndReturnsResult(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, "scripts/ok.sh", "#!/bin/sh\necho \"  checked $1 $2 in $(basename \"$PWD\") with $CHECK_MODE  \"\n", 0o755)
	writeFile(t, ws, "scripts/fail.sh", "#!/bin/sh\necho nope\necho 'not ready yet' >&2\nexit 3\n", 0o755)
	writeFile(t, ws, "scripts/quiet.sh", "#!/bin/sh\nexit 0\n", 0o755)
	writeFile(t, ws, "scripts/noexec.sh", "#!/bin/sh\nexit 0\n", 0o644)

	c := run(ws)
	c.Env = []string{"CHECK_MODE=strict", "PATH=/usr/bin:/bin"}
	r := evalOne(t, CustomScript{Script: "scripts/ok.sh", Args: []string{"a b", "c"}}, c)
	if want := "checked a b c in " + filepath.Base(ws) + " with strict"; !r.Met || r.Reason != want {
		t.Errorf("ok.sh: Met=%v Reason=%q, want met with %q", r.Met, r.Reason, want)
	}

	r = evalOne(t, CustomScript{Script: "scripts/fail.sh"}, c)
	if r.Met || r.Err != "" || r.Reason != "exit status 3: not ready yet" {
		t.Errorf("fail.sh: %+v", r)
	}

	r = evalOne(t, CustomScript{Script: "scripts/quiet.sh"}, c)
	if !r.Met || r.Reason != "Script succeeded" {
		t.Errorf("quiet.sh: %+v", r)
	}

	for _, name := range []string{"scripts/missing.sh", "scripts/noexec.sh", "../escape.sh", "scripts"} {
		r = evalOne(t, CustomScript{Script: name}, c)
		if r.Met || r.Err == "" {
			t.Errorf("%s: got Met=%v Err=%q, want an error and not met", name, r.Met, r.Err)
		}
	}
}

func TestAllTestsPass(t *testing.T) {
	c := AllTestsPass{}
	runCondCases(t, []condCase{
		{"unknown", c, Context{PassedTests: []string{"a"}}, false, noProgress, "test results unknown"},
		{"no tests", c, Context{TestsKnown: true}, false, 0, "0/0 tests passing"},
		{"some failing", c, Context{TestsKnown: true, PassedTests: []string{"a", "b", "c"}, FailedTests: []string{"d"}}, false, 0.75, "3/4 tests passing"},
		{"all pass", c, Context{TestsKnown: true, PassedTests: []string{"a", "b"}}, true, 1, "All 2 tests passed"},
	})
}

func TestSpecificTestsPass(t *testing.T) {
	passed := []string{
		"pkg/TestFoo", "other/TestFooBar", "tests/test_a.py::test_x", "TestParseInt", "TestParseFloat",
		"com.example.FooTest.testBar", "dup/TestDup", "dup2/TestDup", "TestExact", "TestBoth",
	}
	failed := []string{"TestParseBroken", "TestBoth", "x/TestHalf"}
	known := Context{TestsKnown: true, PassedTests: append(passed, "y/TestHalf"), FailedTests: failed}
	cases := []struct {
		want string
		ok   bool
	}{
		{"TestExact", true},
		{"pkg/TestFoo", true},
		{"TestFoo", true},         // unique suffix after '/'; TestFooBar does not end with it
		{"test_x", true},          // after "::"
		{"testBar", true},         // after '.'
		{"FooTest.testBar", true}, // multi-part suffix
		{"estFoo", false},         // not on a separator boundary
		{"TestDup", false},        // ambiguous: two passed tests end with it
		{"TestBoth", false},       // passed and failed
		{"TestHalf", false},       // one suffix match passed, one failed
		{"TestParse*", false},     // matches passed tests and a failed one
		{"TestParse[IF]*", true},  // matches passed tests only
		{"Nothing*", false},       // glob without a match
		{"TestMissing", false},
	}
	for _, tc := range cases {
		if got := testPassing(tc.want, known.PassedTests, known.FailedTests); got != tc.ok {
			t.Errorf("testPassing(%q) = %v, want %v", tc.want, got, tc.ok)
		}
	}
	runCondCases(t, []condCase{
		{"unknown", SpecificTestsPass{Tests: []string{"TestFoo"}}, Context{}, false, noProgress, "unknown"},
		{"partial", SpecificTestsPass{Tests: []string{"TestFoo", "TestDup", "TestBoth", "TestMissing"}}, known,
			false, 0.25, "1/4 passing, waiting for: TestDup, TestBoth, TestMissing"},
		{"all", SpecificTestsPass{Tests: []string{"TestFoo", "test_x", "TestParse[IF]*"}}, known, true, 1, "All 3 specified tests passed"},
	})
}

func TestNoProgressOnErrorUserSignalNever(t *testing.T) {
	runCondCases(t, []condCase{
		{"no progress below", NoProgress{Iterations: 3}, Context{IterationsSinceProgress: 2}, false, 2.0 / 3, "2/3 iterations without progress"},
		{"no progress at", NoProgress{Iterations: 3}, Context{IterationsSinceProgress: 3}, true, 1, "No progress for 3 iterations"},
		{"any error, none", OnError{}, Context{}, false, noProgress, ""},
		{"any error", OnError{}, Context{HasError: true, LastError: "agent crashed"}, true, 1, "Error occurred: agent crashed"},
		{"any error without text", OnError{}, Context{HasError: true}, true, 1, "Error occurred: unknown"},
		{"error matching", OnError{Pattern: "rate limit"}, Context{HasError: true, LastError: "429 rate limit hit"}, true, 1, "429 rate limit hit"},
		{"error not matching", OnError{Pattern: "rate limit"}, Context{HasError: true, LastError: "timeout"}, false, noProgress, ""},
		{"error text without failure", OnError{Pattern: "x"}, Context{LastError: "x"}, false, noProgress, ""},
		{"user signal off", UserSignal{}, Context{}, false, noProgress, ""},
		{"user signal on", UserSignal{}, Context{UserSignal: true}, true, 1, "User signal received"},
		{"never", Never{}, Context{UserSignal: true, Iteration: 1 << 30}, false, noProgress, ""},
	})
}

func TestTokenLimits(t *testing.T) {
	u := Usage{InputTokens: 100, CacheReadTokens: 500, CacheWriteTokens: 200, OutputTokens: 200}
	c := Context{Usage: u}
	runCondCases(t, []condCase{
		// Input tokens count cache reads and writes: 100 + 500 + 200 = 800.
		{"input below", MaxInputTokens{Count: 1000}, c, false, 0.8, "800/1000 input tokens"},
		{"input at", MaxInputTokens{Count: 800}, c, true, 1, "Reached 800 input tokens (used 800)"},
		{"output below", MaxOutputTokens{Count: 400}, c, false, 0.5, "200/400 output tokens"},
		{"output at", MaxOutputTokens{Count: 200}, c, true, 1, ""},
		// Total = 800 + 200.
		{"total below", MaxTokens{Count: 1001}, c, false, 1000.0 / 1001, "1000/1001 tokens"},
		{"total at", MaxTokens{Count: 1000}, c, true, 1, "Reached 1000 tokens (used 1000)"},
		{"total above", MaxTokens{Count: 999}, c, true, 1, ""},
	})
}

func TestMaxCost(t *testing.T) {
	tokens := Usage{InputTokens: 1_000_000, OutputTokens: 100_000} // gpt-4o: 2.50 + 1.00
	runCondCases(t, []condCase{
		{"priced below", MaxCost{Dollars: 5}, Context{Usage: Usage{PricedCostUSD: 1.25, PricedKnown: true, ReportedCostUSD: 9, ReportedKnown: true}},
			false, 0.25, "$1.25 / $5.00"},
		{"priced at budget", MaxCost{Dollars: 5}, Context{Usage: Usage{PricedCostUSD: 5, PricedKnown: true}},
			true, 1, "Cost $5.00 reached the $5.00 budget"},
		{"reported when not priced", MaxCost{Dollars: 2}, Context{Usage: Usage{InputTokens: 5, PricedKnown: false, ReportedCostUSD: 2.5, ReportedKnown: true}},
			true, 1, "reported by the agent"},
		{"nothing used yet", MaxCost{Dollars: 2}, Context{Usage: Usage{Model: "mystery"}}, false, 0, "$0.00 / $2.00"},
		{"re-priced with a model", MaxCost{Dollars: 3.5, Model: "gpt-4o"}, Context{Usage: tokens}, true, 1, "priced as gpt-4o"},
		{"re-priced below", MaxCost{Dollars: 7, Model: "openai/gpt-4o-2024-08-06"}, Context{Usage: tokens}, false, 0.5, "$3.50 / $7.00"},
		{"unknown model falls back", MaxCost{Dollars: 7, Model: "gpt-9"}, Context{Usage: Usage{InputTokens: 1, PricedCostUSD: 1.4, PricedKnown: true}},
			false, 0.2, "not in the pricing table"},
	})

	t.Run("unmeasurable is reported, never $0", func(t *testing.T) {
		r := evalOne(t, MaxCost{Dollars: 1}, Context{Usage: Usage{InputTokens: 10_000_000, Model: "mystery-1"}})
		if r.Met || !r.Unmeasurable || r.Progress != nil {
			t.Fatalf("got %+v, want unmeasurable, not met, no progress", r)
		}
		if want := "cost unknown: model mystery-1 is not in the pricing table and the agent reported no cost"; r.Reason != want {
			t.Errorf("Reason = %q, want %q", r.Reason, want)
		}
	})
}

func TestFailureStreakConditions(t *testing.T) {
	c := Context{ConsecutiveFailures: map[string]int{"verification": 2, "review": 5}, StuckTaskFailures: 3}
	runCondCases(t, []condCase{
		{"verification below", MaxConsecutiveFailures{Phase: "verification", Limit: 3}, c, false, 2.0 / 3, "2/3 consecutive verification failures"},
		{"review at", MaxConsecutiveFailures{Phase: "review", Limit: 5}, c, true, 1, "5 consecutive review failures"},
		{"implementation none", MaxConsecutiveFailures{Phase: "implementation", Limit: 3}, c, false, 0, ""},
		{"stuck task at", StuckTask{Count: 3}, c, true, 1, "failed verification 3 times in a row"},
		{"stuck task below", StuckTask{Count: 4}, c, false, 0.75, "3/4 failures on the same task"},
	})
	if r := evalOne(t, MaxConsecutiveFailures{Phase: "verify", Limit: 1}, c); r.Met || r.Err == "" {
		t.Errorf("unknown phase: %+v", r)
	}
}

func TestInvalidConditionsAreErrorsNotStops(t *testing.T) {
	for _, c := range []Condition{
		MaxIterations{}, MaxDuration{}, TestFailureStreak{Count: -1}, NoProgress{}, MaxTokens{},
		MaxCost{}, StuckTask{}, All{}, Any{}, Not(nil), SpecificTestsPass{}, OutputPattern{},
		FileContains{Path: "x"},
	} {
		r := evalOne(t, c, Context{Iteration: 100, TestsKnown: true, PassedTests: []string{"a"}, Workspace: t.TempDir()})
		if r.Met || r.Err == "" {
			t.Errorf("%T %+v: got Met=%v Err=%q, want an error and not met", c, c, r.Met, r.Err)
		}
	}
}
