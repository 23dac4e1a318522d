package stop

import (
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// evalOne evaluates c alone as a limit and returns its result.
func evalOne(t *testing.T, c Condition, ctx Context) Result {
	t.Helper()
	e := NewEvaluator(Set{Conditions: []Condition{c}}, Options{Clock: newFakeClock(), CacheTTL: -1})
	ev := e.Evaluate(t.Context(), ctx)
	if len(ev.Results) != 1 {
		t.Fatalf("got %d results, want 1", len(ev.Results))
	}
	return ev.Results[0]
}

// noProgress marks an expected nil progress in tables.
const noProgress = -1.0

func progressOf(r Result) float64 {
	if r.Progress == nil {
		return noProgress
	}
	return *r.Progress
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// writeFile writes a file under dir, creating parents, with mode perm.
func writeFile(t *testing.T, dir, name, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	return p
}

// everyType holds one condition of every type, with non-default fields, for round-trip
// tests and fuzz seeds.
func everyType() []Condition {
	return []Condition{
		MaxIterations{Count: 5},
		MaxDuration{Duration: 2*time.Hour + 30*time.Minute},
		TestFailureStreak{Count: 3},
		AllTestsPass{},
		SpecificTestsPass{Tests: []string{"TestFoo", "pkg/TestBar", "TestParse*"}},
		NoProgress{Iterations: 4},
		FileCreated{Path: "DONE.md"},
		FileContains{Path: "out/status.txt", Content: "<ready & done>"},
		OutputPattern{Pattern: "ALL TESTS PASSED"},
		OutputPattern{Pattern: `^ok\s+\d+`, IsRegex: true},
		OnError{},
		OnError{Pattern: "rate limit"},
		CustomScript{Script: "scripts/check.sh", Args: []string{"--strict", "a b"}},
		CustomScript{Script: "check.sh"},
		UserSignal{},
		All{Conditions: []Condition{MaxIterations{Count: 2}, AllTestsPass{}}},
		Any{Conditions: []Condition{UserSignal{}, Not(FileCreated{Path: "x"})}},
		Not(Never{}),
		Never{},
		MaxTokens{Count: 1_000_000},
		MaxInputTokens{Count: 900_000},
		MaxOutputTokens{Count: 100_000},
		MaxCost{Dollars: 5},
		MaxCost{Dollars: 0.5, Model: "gpt-4o"},
		MaxConsecutiveFailures{Phase: "verification", Limit: 3},
		StuckTask{Count: 3},
	}
}

// run is a Context with a workspace.
func run(workspace string) Context {
	return Context{RunID: "run-1", Step: 1, Workspace: workspace}
}
