package stop

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Type is the JSON "type" tag of a condition.
type Type string

// The condition types of SPEC section 5.
const (
	TypeMaxIterations          Type = "max_iterations"           // a limit on completed iterations
	TypeMaxDuration            Type = "max_duration"             // a limit on RUNNING wall time
	TypeTestFailureStreak      Type = "test_failure_streak"      // consecutive verifications with failing tests
	TypeAllTestsPass           Type = "all_tests_pass"           // the last verification's tests all passed
	TypeSpecificTestsPass      Type = "specific_tests_pass"      // named tests passed
	TypeNoProgress             Type = "no_progress"              // iterations without workspace or test progress
	TypeFileCreated            Type = "file_created"             // a file exists in the workspace
	TypeFileContains           Type = "file_contains"            // a workspace file contains a string
	TypeOutputPattern          Type = "output_pattern"           // the last step's output matches
	TypeOnError                Type = "on_error"                 // the last step failed (optionally matching)
	TypeCustomScript           Type = "custom_script"            // a workspace script exits 0
	TypeUserSignal             Type = "user_signal"              // `loopctl signal RUN` was used
	TypeAll                    Type = "all"                      // every child condition is met
	TypeAny                    Type = "any"                      // at least one child condition is met
	TypeNot                    Type = "not"                      // the child condition is (known to be) not met
	TypeNever                  Type = "never"                    // never met: the run stops only by hand
	TypeMaxTokens              Type = "max_tokens"               // a limit on input+output tokens
	TypeMaxInputTokens         Type = "max_input_tokens"         // a limit on input tokens (cache included)
	TypeMaxOutputTokens        Type = "max_output_tokens"        // a limit on output tokens
	TypeMaxCost                Type = "max_cost"                 // a budget in USD
	TypeMaxConsecutiveFailures Type = "max_consecutive_failures" // a phase failed N times in a row
	TypeStuckTask              Type = "stuck_task"               // the same plan task failed verification N times in a row
)

// Types returns every condition type in a stable order.
func Types() []Type {
	return slices.Clone(allTypes)
}

var allTypes = []Type{
	TypeMaxIterations, TypeMaxDuration, TypeTestFailureStreak, TypeAllTestsPass,
	TypeSpecificTestsPass, TypeNoProgress, TypeFileCreated, TypeFileContains,
	TypeOutputPattern, TypeOnError, TypeCustomScript, TypeUserSignal, TypeAll, TypeAny,
	TypeNot, TypeNever, TypeMaxTokens, TypeMaxInputTokens, TypeMaxOutputTokens,
	TypeMaxCost, TypeMaxConsecutiveFailures, TypeStuckTask,
}

// Class says what a met condition does to the run. It comes from the list a condition
// is declared in (Set.Conditions, Set.SuccessConditions, Set.FailureConditions), never
// from its type.
type Class string

const (
	// ClassLimit conditions (Set.Conditions) end the run ABORTED.
	ClassLimit Class = "limit"
	// ClassSuccess conditions (Set.SuccessConditions) end the run COMPLETED.
	ClassSuccess Class = "success"
	// ClassFailure conditions (Set.FailureConditions) end the run FAILED.
	ClassFailure Class = "failure"
)

// rank orders classes for resolution: failure beats success beats limit.
func (c Class) rank() int {
	switch c {
	case ClassFailure:
		return 0
	case ClassSuccess:
		return 1
	default:
		return 2
	}
}

// Condition is one stop condition. The set of implementations is closed (one small
// struct per Type in this package); decode them with DecodeSet or DecodeCondition and
// build them with composite literals or And, Or and Not.
type Condition interface {
	// Type returns the JSON type tag.
	Type() Type
	// Description returns a human description such as "after 5 iterations".
	Description() string
	// Priority orders evaluation: higher is evaluated first.
	Priority() int
	// Reason returns the machine-readable stop reason (SPEC section 4) recorded
	// when this condition stops a run, e.g. "max_iterations:5" or "condition:all".
	Reason() string
	// MarshalJSON encodes the canonical tagged form {"type":…,…}.
	MarshalJSON() ([]byte, error)

	sealed()
}

// Priorities of seed 000; token, cost and failure-streak conditions are ours.
const (
	priorityOnError    = 100
	priorityUserSignal = 90
	priorityLimit      = 80
	priorityStreak     = 70
	priorityTests      = 60
	priorityOutput     = 50
	priorityFile       = 40
	priorityScript     = 30
	priorityComposite  = 20
	priorityNot        = 10
	priorityNever      = 0
)

// MaxIterations is met when Count iterations have completed.
type MaxIterations struct{ Count int }

// MaxDuration is met when the run has been RUNNING for Duration.
type MaxDuration struct{ Duration time.Duration }

// TestFailureStreak is met after Count consecutive verification steps with failing tests.
type TestFailureStreak struct{ Count int }

// AllTestsPass is met when the last verification's results are known, at least one test
// passed and none failed.
type AllTestsPass struct{}

// SpecificTestsPass is met when every wanted test passed in the last verification. A
// wanted name matches a passed test exactly, by a unique suffix on a separator boundary
// ("TestFoo" matches "pkg/TestFoo"), or as a path.Match glob ("TestParse*"); a wanted
// test that also failed is not passing.
type SpecificTestsPass struct{ Tests []string }

// NoProgress is met after Iterations iterations without progress.
type NoProgress struct{ Iterations int }

// FileCreated is met when Path (relative to the workspace) exists.
type FileCreated struct{ Path string }

// FileContains is met when the file at Path (relative to the workspace) contains Content.
type FileContains struct{ Path, Content string }

// OutputPattern is met when the last step's output contains Pattern, or matches it as a
// regular expression (RE2 syntax) when IsRegex.
type OutputPattern struct {
	Pattern string
	IsRegex bool
}

// OnError is met when the last step failed and, if Pattern is not empty, its error text
// contains Pattern. An empty Pattern (JSON: absent or null) matches any error.
type OnError struct{ Pattern string }

// CustomScript is met when Script (relative to the workspace) exits 0 when run with Args
// in the workspace; its trimmed standard output becomes the result's Reason.
type CustomScript struct {
	Script string
	Args   []string
}

// UserSignal is met when the user ran `loopctl signal RUN`.
type UserSignal struct{}

// All is met when every condition in Conditions is met.
type All struct{ Conditions []Condition }

// Any is met when at least one condition in Conditions is met.
type Any struct{ Conditions []Condition }

// Negation is the "not" condition (the name Not is taken by the builder): it is met when
// Condition was evaluated and is not met. A child that timed out, failed to evaluate or
// could not be measured is unknown, and unknown is not "false": the negation is then not
// met either, so a broken script under "not" never stops a run.
type Negation struct{ Condition Condition }

// Never is never met: the run stops only by hand.
type Never struct{}

// MaxTokens is met when input tokens (cache reads and writes included) plus output
// tokens reach Count.
type MaxTokens struct{ Count int64 }

// MaxInputTokens is met when input tokens, cache reads and writes included, reach Count.
type MaxInputTokens struct{ Count int64 }

// MaxOutputTokens is met when output tokens reach Count.
type MaxOutputTokens struct{ Count int64 }

// MaxCost is met when the run's cost in USD reaches Dollars. With Model set, the token
// totals are re-priced with that model's price from the pricing table; a model missing
// from the table falls back to the run's own cost, and Set.ValidateModels rejects it
// when the run is created.
type MaxCost struct {
	Dollars float64
	Model   string
}

// MaxConsecutiveFailures is met when Phase ("implementation", "review" or
// "verification") has failed Limit times in a row (seed 004).
type MaxConsecutiveFailures struct {
	Phase string
	Limit int
}

// StuckTask is met when the same plan task failed verification Count times in a row.
type StuckTask struct{ Count int }

// Phases accepted by MaxConsecutiveFailures.
var phases = []string{"implementation", "review", "verification"}

// And combines a and b: when a is an All, b is appended to a copy of its conditions
// (seed flattening), otherwise the result is All{a, b}.
func And(a, b Condition) All {
	if all, ok := a.(All); ok {
		return All{Conditions: append(slices.Clip(all.Conditions), b)}
	}
	return All{Conditions: []Condition{a, b}}
}

// Or combines a and b: when a is an Any, b is appended to a copy of its conditions,
// otherwise the result is Any{a, b}.
func Or(a, b Condition) Any {
	if anyc, ok := a.(Any); ok {
		return Any{Conditions: append(slices.Clip(anyc.Conditions), b)}
	}
	return Any{Conditions: []Condition{a, b}}
}

// Not negates c.
func Not(c Condition) Negation { return Negation{Condition: c} }

// Type, Priority, Description, Reason and sealed implement Condition; the interface
// documents them.

func (MaxIterations) Type() Type          { return TypeMaxIterations }
func (MaxDuration) Type() Type            { return TypeMaxDuration }
func (TestFailureStreak) Type() Type      { return TypeTestFailureStreak }
func (AllTestsPass) Type() Type           { return TypeAllTestsPass }
func (SpecificTestsPass) Type() Type      { return TypeSpecificTestsPass }
func (NoProgress) Type() Type             { return TypeNoProgress }
func (FileCreated) Type() Type            { return TypeFileCreated }
func (FileContains) Type() Type           { return TypeFileContains }
func (OutputPattern) Type() Type          { return TypeOutputPattern }
func (OnError) Type() Type                { return TypeOnError }
func (CustomScript) Type() Type           { return TypeCustomScript }
func (UserSignal) Type() Type             { return TypeUserSignal }
func (All) Type() Type                    { return TypeAll }
func (Any) Type() Type                    { return TypeAny }
func (Negation) Type() Type               { return TypeNot }
func (Never) Type() Type                  { return TypeNever }
func (MaxTokens) Type() Type              { return TypeMaxTokens }
func (MaxInputTokens) Type() Type         { return TypeMaxInputTokens }
func (MaxOutputTokens) Type() Type        { return TypeMaxOutputTokens }
func (MaxCost) Type() Type                { return TypeMaxCost }
func (MaxConsecutiveFailures) Type() Type { return TypeMaxConsecutiveFailures }
func (StuckTask) Type() Type              { return TypeStuckTask }

func (MaxIterations) Priority() int          { return priorityLimit }
func (MaxDuration) Priority() int            { return priorityLimit }
func (TestFailureStreak) Priority() int      { return priorityStreak }
func (AllTestsPass) Priority() int           { return priorityTests }
func (SpecificTestsPass) Priority() int      { return priorityTests }
func (NoProgress) Priority() int             { return priorityStreak }
func (FileCreated) Priority() int            { return priorityFile }
func (FileContains) Priority() int           { return priorityFile }
func (OutputPattern) Priority() int          { return priorityOutput }
func (OnError) Priority() int                { return priorityOnError }
func (CustomScript) Priority() int           { return priorityScript }
func (UserSignal) Priority() int             { return priorityUserSignal }
func (All) Priority() int                    { return priorityComposite }
func (Any) Priority() int                    { return priorityComposite }
func (Negation) Priority() int               { return priorityNot }
func (Never) Priority() int                  { return priorityNever }
func (MaxTokens) Priority() int              { return priorityLimit }
func (MaxInputTokens) Priority() int         { return priorityLimit }
func (MaxOutputTokens) Priority() int        { return priorityLimit }
func (MaxCost) Priority() int                { return priorityLimit }
func (MaxConsecutiveFailures) Priority() int { return priorityStreak }
func (StuckTask) Priority() int              { return priorityStreak }

func (c MaxIterations) Description() string { return "after " + plural(c.Count, "iteration") }
func (c MaxDuration) Description() string   { return "after " + FormatDuration(c.Duration) }
func (c TestFailureStreak) Description() string {
	return "after " + plural(c.Count, "consecutive test failure")
}
func (AllTestsPass) Description() string { return "when all tests pass" }
func (c SpecificTestsPass) Description() string {
	return "when tests pass: " + strings.Join(c.Tests, ", ")
}
func (c NoProgress) Description() string {
	return "after " + plural(c.Iterations, "iteration") + " with no progress"
}
func (c FileCreated) Description() string { return "when " + c.Path + " is created" }
func (c FileContains) Description() string {
	return fmt.Sprintf("when %s contains '%s'", c.Path, c.Content)
}
func (c OutputPattern) Description() string {
	if c.IsRegex {
		return "when output matches regex /" + c.Pattern + "/"
	}
	return "when output contains '" + c.Pattern + "'"
}
func (c OnError) Description() string {
	if c.Pattern == "" {
		return "on any error"
	}
	return "on error matching '" + c.Pattern + "'"
}
func (c CustomScript) Description() string { return "when script " + c.Script + " succeeds" }
func (UserSignal) Description() string     { return "on user signal" }
func (c All) Description() string {
	return "when ALL: [" + joinDescriptions(c.Conditions, " AND ") + "]"
}
func (c Any) Description() string {
	return "when ANY: [" + joinDescriptions(c.Conditions, " OR ") + "]"
}
func (c Negation) Description() string {
	if c.Condition == nil {
		return "NOT (nothing)"
	}
	return "NOT (" + c.Condition.Description() + ")"
}
func (Never) Description() string { return "never (manual stop only)" }
func (c MaxTokens) Description() string {
	return fmt.Sprintf("when %d tokens are used", c.Count)
}
func (c MaxInputTokens) Description() string {
	return fmt.Sprintf("when %d input tokens are used", c.Count)
}
func (c MaxOutputTokens) Description() string {
	return fmt.Sprintf("when %d output tokens are used", c.Count)
}
func (c MaxCost) Description() string {
	d := "when cost reaches " + formatUSD(c.Dollars)
	if c.Model != "" {
		d += " (priced as " + c.Model + ")"
	}
	return d
}
func (c MaxConsecutiveFailures) Description() string {
	return "after " + plural(c.Limit, "consecutive "+c.Phase+" failure")
}
func (c StuckTask) Description() string {
	return fmt.Sprintf("when the same plan task fails verification %d times in a row", c.Count)
}

func joinDescriptions(cs []Condition, sep string) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString(sep)
		}
		if c == nil {
			b.WriteString("nothing")
			continue
		}
		b.WriteString(c.Description())
	}
	return b.String()
}

func (c MaxIterations) Reason() string { return "max_iterations:" + strconv.Itoa(c.Count) }
func (c MaxDuration) Reason() string   { return "max_duration:" + FormatDuration(c.Duration) }
func (c TestFailureStreak) Reason() string {
	return "test_failure_streak:" + strconv.Itoa(c.Count)
}
func (AllTestsPass) Reason() string      { return conditionReason(TypeAllTestsPass) }
func (SpecificTestsPass) Reason() string { return conditionReason(TypeSpecificTestsPass) }
func (c NoProgress) Reason() string      { return "no_progress:" + strconv.Itoa(c.Iterations) }
func (FileCreated) Reason() string       { return conditionReason(TypeFileCreated) }
func (FileContains) Reason() string      { return conditionReason(TypeFileContains) }
func (OutputPattern) Reason() string     { return conditionReason(TypeOutputPattern) }
func (OnError) Reason() string           { return conditionReason(TypeOnError) }
func (CustomScript) Reason() string      { return conditionReason(TypeCustomScript) }
func (UserSignal) Reason() string        { return conditionReason(TypeUserSignal) }
func (All) Reason() string               { return conditionReason(TypeAll) }
func (Any) Reason() string               { return conditionReason(TypeAny) }
func (Negation) Reason() string          { return conditionReason(TypeNot) }
func (Never) Reason() string             { return conditionReason(TypeNever) }
func (c MaxTokens) Reason() string       { return "max_tokens:" + strconv.FormatInt(c.Count, 10) }
func (c MaxInputTokens) Reason() string {
	return "max_input_tokens:" + strconv.FormatInt(c.Count, 10)
}
func (c MaxOutputTokens) Reason() string {
	return "max_output_tokens:" + strconv.FormatInt(c.Count, 10)
}
func (c MaxCost) Reason() string { return "max_cost:" + strconv.FormatFloat(c.Dollars, 'f', 2, 64) }
func (c MaxConsecutiveFailures) Reason() string {
	return "max_consecutive_failures:" + c.Phase + ":" + strconv.Itoa(c.Limit)
}
func (c StuckTask) Reason() string { return "stuck_task:" + strconv.Itoa(c.Count) }

func conditionReason(t Type) string { return "condition:" + string(t) }

func formatUSD(v float64) string { return "$" + strconv.FormatFloat(v, 'f', 2, 64) }

func (MaxIterations) sealed()          {}
func (MaxDuration) sealed()            {}
func (TestFailureStreak) sealed()      {}
func (AllTestsPass) sealed()           {}
func (SpecificTestsPass) sealed()      {}
func (NoProgress) sealed()             {}
func (FileCreated) sealed()            {}
func (FileContains) sealed()           {}
func (OutputPattern) sealed()          {}
func (OnError) sealed()                {}
func (CustomScript) sealed()           {}
func (UserSignal) sealed()             {}
func (All) sealed()                    {}
func (Any) sealed()                    {}
func (Negation) sealed()               {}
func (Never) sealed()                  {}
func (MaxTokens) sealed()              {}
func (MaxInputTokens) sealed()         {}
func (MaxOutputTokens) sealed()        {}
func (MaxCost) sealed()                {}
func (MaxConsecutiveFailures) sealed() {}
func (StuckTask) sealed()              {}

// isSlow reports whether evaluating c touches the file system or runs a process, so
// that it runs in a worker with a timeout and its leaves may be cached.
func isSlow(c Condition) bool {
	switch c := c.(type) {
	case FileCreated, FileContains, CustomScript:
		return true
	case All:
		return slices.ContainsFunc(c.Conditions, isSlow)
	case Any:
		return slices.ContainsFunc(c.Conditions, isSlow)
	case Negation:
		return c.Condition != nil && isSlow(c.Condition)
	}
	return false
}

// plural writes "1 iteration" or "3 iterations".
func plural[N int | int64](n N, noun string) string {
	s := strconv.FormatInt(int64(n), 10) + " " + noun
	if n != 1 {
		s += "s"
	}
	return s
}
