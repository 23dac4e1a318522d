package stop

import "time"

// Context is everything the evaluator knows about a run at one evaluation. The scheduler
// derives it from persisted steps, so it is the same before and after a daemon restart.
type Context struct {
	RunID string
	// Step is the id of the step just finished; 0 for the evaluation at resume or
	// recovery before any new step. It is part of the cache key: a result is never
	// reused for a different Step.
	Step int64
	// Iteration is the number of iterations fully completed (the pipeline of that
	// iteration ended).
	Iteration int
	// Elapsed is the wall time the run has spent RUNNING, derived from steps.
	Elapsed time.Duration
	// Workspace is the absolute path of the workspace; file_* and custom_script paths
	// are relative to it.
	Workspace string
	// LastOutput is the tail of the last step's output, bounded by the caller (~64 KiB).
	LastOutput string
	// LastError is the last step's error text, "" when it succeeded.
	LastError string
	// HasError reports that the last step failed.
	HasError bool
	// TestsKnown reports that the last verification's test results are known.
	TestsKnown  bool
	PassedTests []string
	FailedTests []string
	// TestFailureStreak counts consecutive verification steps with failing tests.
	TestFailureStreak int
	// IterationsSinceProgress counts iterations without progress (docs/stop-conditions.md, no_progress).
	IterationsSinceProgress int
	// UserSignal is set by `loopctl signal RUN`.
	UserSignal bool
	// Usage holds the run's token and cost totals.
	Usage Usage
	// ConsecutiveFailures maps a phase ("implementation", "review", "verification")
	// to its current failure streak.
	ConsecutiveFailures map[string]int
	// StuckTaskFailures counts how many times in a row the same plan task failed
	// verification.
	StuckTaskFailures int
	// Env is the environment of custom_script (the caller adds the run's env file).
	// nil means the daemon's own environment.
	Env []string
}

// Usage holds token and cost totals. Token semantics: InputTokens excludes cache reads
// and writes; see InputTotal and Total for what the token limits count.
type Usage struct {
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	// CacheWrite1hTokens are the part of CacheWriteTokens written to the cache for
	// one hour (Anthropic), priced higher than 5-minute writes.
	CacheWrite1hTokens int64
	// Model is the model the tokens were priced with (config "model"); it names the
	// model in the "cost unknown" message.
	Model string
	// PricedCostUSD is the cost priced from the table for Model, summed over steps.
	PricedCostUSD float64
	// PricedKnown reports that Model was in the pricing table.
	PricedKnown bool
	// ReportedCostUSD is what the agents reported, summed over steps.
	ReportedCostUSD float64
	// ReportedKnown reports that at least one step reported a cost.
	ReportedKnown bool
}

// InputTotal returns every input token the model processed: InputTokens plus cache
// reads and cache writes. max_input_tokens counts this.
func (u Usage) InputTotal() int64 {
	return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// Total returns InputTotal plus OutputTokens. max_tokens counts this.
func (u Usage) Total() int64 { return u.InputTotal() + u.OutputTokens }

// Clock tells the time. The evaluator reads time only through its Clock, so tests and
// the scheduler control it.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now returns f().
func (f ClockFunc) Now() time.Time { return f() }

// SystemClock is the wall clock. Options.Clock defaults to it.
var SystemClock Clock = ClockFunc(time.Now)
