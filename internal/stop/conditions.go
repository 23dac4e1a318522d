package stop

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/jsonpath"
)

// The condition types, in the order of Types (and of the reference). Each is a Type
// constant, a struct, and its descriptor; its evaluation is in measure.go. See the
// package documentation for how to add one.

// TypeMaxIterations is a limit on completed iterations.
const TypeMaxIterations Type = "max_iterations"

// MaxIterations is met when Count iterations have completed.
type MaxIterations struct{ Count int }

var maxIterationsKind = &kind[MaxIterations]{
	typ:      TypeMaxIterations,
	priority: priorityLimit,
	fields:   []field[MaxIterations]{intField("count", func(c *MaxIterations) *int { return &c.Count })},
	describe: func(c MaxIterations) string { return "after " + plural(c.Count, "iteration") },
	reason:   func(c MaxIterations) string { return "max_iterations:" + strconv.Itoa(c.Count) },
	validate: func(c MaxIterations, v *validator, p string) { v.atLeastOne(p, "count", int64(c.Count)) },
	measure:  measureMaxIterations,
	summary:  "`count` iterations have completed.",
	example:  MaxIterations{Count: 20},
}

// TypeMaxDuration is a limit on RUNNING wall time.
const TypeMaxDuration Type = "max_duration"

// MaxDuration is met when the run has been RUNNING for Duration.
type MaxDuration struct{ Duration time.Duration }

var maxDurationKind = &kind[MaxDuration]{
	typ:      TypeMaxDuration,
	priority: priorityLimit,
	fields:   []field[MaxDuration]{durationField("duration", func(c *MaxDuration) *time.Duration { return &c.Duration })},
	describe: func(c MaxDuration) string { return "after " + FormatDuration(c.Duration) },
	reason:   func(c MaxDuration) string { return "max_duration:" + FormatDuration(c.Duration) },
	validate: func(c MaxDuration, v *validator, p string) {
		if c.Duration <= 0 {
			v.fail(join(p, "duration"), "must be positive (got %s)", FormatDuration(c.Duration))
		}
	},
	measure: measureMaxDuration,
	summary: "The run has been RUNNING for `duration` (humantime such as `2h 30m`, or Go such as `2h30m`).",
	example: MaxDuration{Duration: 90 * time.Minute},
}

// TypeTestFailureStreak counts consecutive verifications with failing tests.
const TypeTestFailureStreak Type = "test_failure_streak"

// TestFailureStreak is met after Count consecutive verification steps with failing tests.
type TestFailureStreak struct{ Count int }

var testFailureStreakKind = &kind[TestFailureStreak]{
	typ:      TypeTestFailureStreak,
	priority: priorityStreak,
	fields:   []field[TestFailureStreak]{intField("count", func(c *TestFailureStreak) *int { return &c.Count })},
	describe: func(c TestFailureStreak) string { return "after " + plural(c.Count, "consecutive test failure") },
	reason:   func(c TestFailureStreak) string { return "test_failure_streak:" + strconv.Itoa(c.Count) },
	validate: func(c TestFailureStreak, v *validator, p string) { v.atLeastOne(p, "count", int64(c.Count)) },
	measure:  measureTestFailureStreak,
	summary: "`count` verification steps in a row had failing tests. With `progress_resets_streak` (on by default), " +
		"a verification with fewer failing tests than the previous failed one restarts the count at 1, as for " +
		"`max_consecutive_failures`: failing 5 → 4 → 3 is progress, not a streak.",
	example: TestFailureStreak{Count: 4},
}

// TypeAllTestsPass is met when the last verification's tests all passed.
const TypeAllTestsPass Type = "all_tests_pass"

// AllTestsPass is met when the last verification's results are known, at least one test
// passed and none failed.
type AllTestsPass struct{}

var allTestsPassKind = &kind[AllTestsPass]{
	typ:      TypeAllTestsPass,
	priority: priorityTests,
	describe: func(AllTestsPass) string { return "when all tests pass" },
	measure:  measureAllTestsPass,
	summary:  "The last verification's test results are known, at least one test passed and none failed.",
	example:  AllTestsPass{},
}

// TypeSpecificTestsPass is met when named tests passed.
const TypeSpecificTestsPass Type = "specific_tests_pass"

// SpecificTestsPass is met when every wanted test passed in the last verification. A
// wanted name matches a passed test exactly, by a unique suffix on a separator boundary
// ("TestFoo" matches "pkg/TestFoo"), or as a path.Match glob ("TestParse*"); a wanted
// test that also failed is not passing.
type SpecificTestsPass struct{ Tests []string }

var specificTestsPassKind = &kind[SpecificTestsPass]{
	typ:      TypeSpecificTestsPass,
	priority: priorityTests,
	fields:   []field[SpecificTestsPass]{stringsField("tests", func(c *SpecificTestsPass) *[]string { return &c.Tests })},
	describe: func(c SpecificTestsPass) string { return "when tests pass: " + strings.Join(c.Tests, ", ") },
	validate: func(c SpecificTestsPass, v *validator, p string) {
		if len(c.Tests) == 0 {
			v.fail(join(p, "tests"), "needs at least one test name")
		}
		for i, t := range c.Tests {
			switch {
			case strings.TrimSpace(t) == "":
				v.fail(jsonpath.Index(join(p, "tests"), i), "empty test name")
			case isGlob(t):
				if _, err := path.Match(t, ""); err != nil {
					v.fail(jsonpath.Index(join(p, "tests"), i), "bad glob pattern %q", t)
				}
			}
		}
	},
	measure: measureSpecificTestsPass,
	summary: "Every test in `tests` passed in the last verification. A name matches exactly, by a " +
		"unique suffix (`TestFoo` matches `pkg/TestFoo`), or as a glob (`TestParse*`).",
	example: SpecificTestsPass{Tests: []string{"TestParseQuoted", "TestParse*"}},
}

// TypeNoProgress counts iterations without workspace or test progress.
const TypeNoProgress Type = "no_progress"

// NoProgress is met after Iterations iterations without progress.
type NoProgress struct{ Iterations int }

var noProgressKind = &kind[NoProgress]{
	typ:      TypeNoProgress,
	priority: priorityStreak,
	fields:   []field[NoProgress]{intField("iterations", func(c *NoProgress) *int { return &c.Iterations })},
	describe: func(c NoProgress) string { return "after " + plural(c.Iterations, "iteration") + " with no progress" },
	reason:   func(c NoProgress) string { return "no_progress:" + strconv.Itoa(c.Iterations) },
	validate: func(c NoProgress, v *validator, p string) { v.atLeastOne(p, "iterations", int64(c.Iterations)) },
	measure:  measureNoProgress,
	summary: "`iterations` iterations in a row made no progress: the workspace did not change (git HEAD, " +
		"index or working tree; a file fingerprint elsewhere), no more tests passed, no more plan items were checked.",
	example: NoProgress{Iterations: 5},
}

// TypeFileCreated is met when a file exists in the workspace.
const TypeFileCreated Type = "file_created"

// FileCreated is met when Path (relative to the workspace) exists.
type FileCreated struct{ Path string }

var fileCreatedKind = &kind[FileCreated]{
	typ:      TypeFileCreated,
	priority: priorityFile,
	fields:   []field[FileCreated]{stringField("path", func(c *FileCreated) *string { return &c.Path })},
	describe: func(c FileCreated) string { return "when " + c.Path + " is created" },
	validate: func(c FileCreated, v *validator, p string) { v.path(join(p, "path"), c.Path) },
	measure:  measureFileCreated,
	slow:     true,
	summary:  "The file at `path` (relative to the workspace) exists.",
	example:  FileCreated{Path: "DONE.md"},
}

// TypeFileContains is met when a workspace file contains a string.
const TypeFileContains Type = "file_contains"

// FileContains is met when the file at Path (relative to the workspace) contains Content.
type FileContains struct{ Path, Content string }

var fileContainsKind = &kind[FileContains]{
	typ:      TypeFileContains,
	priority: priorityFile,
	fields: []field[FileContains]{
		stringField("path", func(c *FileContains) *string { return &c.Path }),
		stringField("content", func(c *FileContains) *string { return &c.Content }),
	},
	describe: func(c FileContains) string { return fmt.Sprintf("when %s contains '%s'", c.Path, c.Content) },
	validate: func(c FileContains, v *validator, p string) {
		v.path(join(p, "path"), c.Path)
		if c.Content == "" {
			v.fail(join(p, "content"), "must not be empty (use file_created to wait for the file)")
		}
	},
	measure: measureFileContains,
	slow:    true,
	summary: "The file at `path` contains `content`.",
	example: FileContains{Path: "STATUS", Content: "ready"},
}

// TypeOutputPattern is met when the last step's output matches.
const TypeOutputPattern Type = "output_pattern"

// OutputPattern is met when the last step's output contains Pattern, or matches it as a
// regular expression (RE2 syntax) when IsRegex.
type OutputPattern struct {
	Pattern string
	IsRegex bool
}

var outputPatternKind = &kind[OutputPattern]{
	typ:      TypeOutputPattern,
	priority: priorityOutput,
	fields: []field[OutputPattern]{
		stringField("pattern", func(c *OutputPattern) *string { return &c.Pattern }),
		boolField("is_regex", func(c *OutputPattern) *bool { return &c.IsRegex }).mayBeAbsent(),
	},
	describe: func(c OutputPattern) string {
		if c.IsRegex {
			return "when output matches regex /" + c.Pattern + "/"
		}
		return "when output contains '" + c.Pattern + "'"
	},
	validate: func(c OutputPattern, v *validator, p string) {
		switch {
		case c.Pattern == "":
			v.fail(join(p, "pattern"), "must not be empty")
		case c.IsRegex:
			if _, err := regexp.Compile(c.Pattern); err != nil {
				v.fail(join(p, "pattern"), "invalid regex: %v", err)
			}
		}
	},
	prepare: func(c OutputPattern, n *node, _ Prices) {
		if c.IsRegex {
			re, err := regexp.Compile(c.Pattern)
			if err != nil {
				n.reErr = "invalid regex: " + err.Error()
			}
			n.re = re
		}
	},
	measure: measureOutputPattern,
	summary: "The last step's output contains `pattern`, or matches it as a Go regular expression when " +
		"`is_regex` is true.",
	example: OutputPattern{Pattern: `panic: .*nil map`, IsRegex: true},
}

// TypeOnError is met when the last step failed (optionally matching).
const TypeOnError Type = "on_error"

// OnError is met when the last step failed and, if Pattern is not empty, its error text
// contains Pattern. An empty Pattern (JSON: absent or null) matches any error.
type OnError struct{ Pattern string }

var onErrorKind = &kind[OnError]{
	typ:      TypeOnError,
	priority: priorityOnError,
	fields:   []field[OnError]{optionalStringField("pattern", func(c *OnError) *string { return &c.Pattern })},
	describe: func(c OnError) string {
		if c.Pattern == "" {
			return "on any error"
		}
		return "on error matching '" + c.Pattern + "'"
	},
	measure: measureOnError,
	summary: "The last step failed and, when `pattern` is given, its error text contains it.",
	example: OnError{Pattern: "out of memory"},
}

// TypeCustomScript is met when a workspace script exits 0.
const TypeCustomScript Type = "custom_script"

// CustomScript is met when Script (relative to the workspace) exits 0 when run with Args
// in the workspace; its trimmed standard output becomes the result's Reason.
type CustomScript struct {
	Script string
	Args   []string
}

var customScriptKind = &kind[CustomScript]{
	typ:      TypeCustomScript,
	priority: priorityScript,
	fields: []field[CustomScript]{
		stringField("script", func(c *CustomScript) *string { return &c.Script }),
		stringsField("args", func(c *CustomScript) *[]string { return &c.Args }).mayBeAbsent(),
	},
	describe: func(c CustomScript) string { return "when script " + c.Script + " succeeds" },
	validate: func(c CustomScript, v *validator, p string) { v.script(join(p, "script"), c.Script) },
	measure:  measureCustomScript,
	slow:     true,
	summary: "The script at `script` (relative to the workspace) exits 0 when run there with `args`; its " +
		"output becomes the result's detail. Bounded by the evaluation timeout (5 s); a timed-out script is \"not met\".",
	example: CustomScript{Script: "scripts/ready.sh", Args: []string{"--quick"}},
}

// TypeUserSignal is met when `loopctl signal RUN` was used.
const TypeUserSignal Type = "user_signal"

// UserSignal is met when the user ran `loopctl signal RUN`.
type UserSignal struct{}

var userSignalKind = &kind[UserSignal]{
	typ:      TypeUserSignal,
	priority: priorityUserSignal,
	describe: func(UserSignal) string { return "on user signal" },
	measure:  measureUserSignal,
	summary:  "You ran `loopctl signal RUN`. A run with no `user_signal` condition refuses the signal (exit 64): it would do nothing.",
	example:  UserSignal{},
}

// TypeAll is met when every child condition is met.
const TypeAll Type = "all"

// All is met when every condition in Conditions is met.
type All struct{ Conditions []Condition }

var allKind = &kind[All]{
	typ:      TypeAll,
	priority: priorityComposite,
	fields:   []field[All]{conditionsField("conditions", func(c *All) *[]Condition { return &c.Conditions })},
	describe: func(c All) string { return "when ALL: [" + joinDescriptions(c.Conditions, " AND ") + "]" },
	measure:  measureAll,
	summary:  "Every condition in `conditions` is met (at least one condition).",
	example:  All{Conditions: []Condition{AllTestsPass{}, FileCreated{Path: "DONE.md"}}},
}

// TypeAny is met when at least one child condition is met.
const TypeAny Type = "any"

// Any is met when at least one condition in Conditions is met.
type Any struct{ Conditions []Condition }

var anyKind = &kind[Any]{
	typ:      TypeAny,
	priority: priorityComposite,
	fields:   []field[Any]{conditionsField("conditions", func(c *Any) *[]Condition { return &c.Conditions })},
	describe: func(c Any) string { return "when ANY: [" + joinDescriptions(c.Conditions, " OR ") + "]" },
	measure:  measureAny,
	summary:  "At least one condition in `conditions` is met (at least one condition).",
	example:  Any{Conditions: []Condition{UserSignal{}, FileCreated{Path: "STOP"}}},
}

// TypeNot is met when the child condition is (known to be) not met.
const TypeNot Type = "not"

// Negation is the "not" condition (the name Not is taken by the builder): it is met when
// Condition was evaluated and is not met. A child that timed out, failed to evaluate or
// could not be measured is unknown, and unknown is not "false": the negation is then not
// met either, so a broken script under "not" never stops a run.
type Negation struct{ Condition Condition }

var notKind = &kind[Negation]{
	typ:      TypeNot,
	priority: priorityNot,
	fields:   []field[Negation]{conditionField("condition", func(c *Negation) *Condition { return &c.Condition })},
	describe: func(c Negation) string {
		if c.Condition == nil {
			return "NOT (nothing)"
		}
		return "NOT (" + c.Condition.Description() + ")"
	},
	measure: measureNot,
	summary: "`condition` was evaluated and is not met. A child that timed out or could not be evaluated is " +
		"unknown, and then `not` is not met either.",
	example: Negation{Condition: FileCreated{Path: "WIP"}},
}

// TypeNever is never met: the run stops only by hand.
const TypeNever Type = "never"

// Never is never met: the run stops only by hand.
type Never struct{}

var neverKind = &kind[Never]{
	typ:      TypeNever,
	priority: priorityNever,
	describe: func(Never) string { return "never (manual stop only)" },
	measure:  func(Never, probe) outcome { return outcome{detail: "never met"} },
	summary:  "Never: the run stops only by hand or by another condition.",
	example:  Never{},
}

// TypeMaxTokens is a limit on input+output tokens.
const TypeMaxTokens Type = "max_tokens"

// MaxTokens is met when input tokens (cache reads and writes included) plus output
// tokens reach Count.
type MaxTokens struct{ Count int64 }

var maxTokensKind = &kind[MaxTokens]{
	typ:      TypeMaxTokens,
	priority: priorityLimit,
	fields:   []field[MaxTokens]{int64Field("count", func(c *MaxTokens) *int64 { return &c.Count })},
	describe: func(c MaxTokens) string { return fmt.Sprintf("when %d tokens are used", c.Count) },
	reason:   func(c MaxTokens) string { return "max_tokens:" + strconv.FormatInt(c.Count, 10) },
	validate: func(c MaxTokens, v *validator, p string) { v.atLeastOne(p, "count", c.Count) },
	measure:  measureMaxTokens,
	summary:  "Input (cache reads and writes included) plus output tokens reach `count`.",
	example:  MaxTokens{Count: 5_000_000},
}

// TypeMaxInputTokens is a limit on input tokens (cache included).
const TypeMaxInputTokens Type = "max_input_tokens"

// MaxInputTokens is met when input tokens, cache reads and writes included, reach Count.
type MaxInputTokens struct{ Count int64 }

var maxInputTokensKind = &kind[MaxInputTokens]{
	typ:      TypeMaxInputTokens,
	priority: priorityLimit,
	fields:   []field[MaxInputTokens]{int64Field("count", func(c *MaxInputTokens) *int64 { return &c.Count })},
	describe: func(c MaxInputTokens) string { return fmt.Sprintf("when %d input tokens are used", c.Count) },
	reason:   func(c MaxInputTokens) string { return "max_input_tokens:" + strconv.FormatInt(c.Count, 10) },
	validate: func(c MaxInputTokens, v *validator, p string) { v.atLeastOne(p, "count", c.Count) },
	measure:  measureMaxInputTokens,
	summary:  "Input tokens, cache reads and writes included, reach `count`.",
	example:  MaxInputTokens{Count: 4_000_000},
}

// TypeMaxOutputTokens is a limit on output tokens.
const TypeMaxOutputTokens Type = "max_output_tokens"

// MaxOutputTokens is met when output tokens reach Count.
type MaxOutputTokens struct{ Count int64 }

var maxOutputTokensKind = &kind[MaxOutputTokens]{
	typ:      TypeMaxOutputTokens,
	priority: priorityLimit,
	fields:   []field[MaxOutputTokens]{int64Field("count", func(c *MaxOutputTokens) *int64 { return &c.Count })},
	describe: func(c MaxOutputTokens) string { return fmt.Sprintf("when %d output tokens are used", c.Count) },
	reason:   func(c MaxOutputTokens) string { return "max_output_tokens:" + strconv.FormatInt(c.Count, 10) },
	validate: func(c MaxOutputTokens, v *validator, p string) { v.atLeastOne(p, "count", c.Count) },
	measure:  measureMaxOutputTokens,
	summary:  "Output tokens reach `count`.",
	example:  MaxOutputTokens{Count: 500_000},
}

// TypeMaxCost is a budget in USD.
const TypeMaxCost Type = "max_cost"

// MaxCost is met when the run's cost in USD reaches Dollars. With Model set, the token
// totals are re-priced with that model's price from the pricing table; a model missing
// from the table falls back to the run's own cost, and Set.ValidateModels rejects it
// when the run is created.
type MaxCost struct {
	Dollars float64
	Model   string
}

var maxCostKind = &kind[MaxCost]{
	typ:      TypeMaxCost,
	priority: priorityLimit,
	fields: []field[MaxCost]{
		floatField("dollars", func(c *MaxCost) *float64 { return &c.Dollars }),
		optionalStringField("model", func(c *MaxCost) *string { return &c.Model }),
	},
	describe: func(c MaxCost) string {
		d := "when cost reaches " + formatUSD(c.Dollars)
		if c.Model != "" {
			d += " (priced as " + c.Model + ")"
		}
		return d
	},
	reason: func(c MaxCost) string { return "max_cost:" + strconv.FormatFloat(c.Dollars, 'f', 2, 64) },
	validate: func(c MaxCost, v *validator, p string) {
		if !(c.Dollars > 0) || math.IsInf(c.Dollars, 0) {
			v.fail(join(p, "dollars"), "must be greater than 0 (got %v)", c.Dollars)
		}
	},
	prepare: func(c MaxCost, n *node, prices Prices) {
		if c.Model != "" {
			n.price, n.priceOK = prices.Lookup(c.Model)
		}
	},
	measure: measureMaxCost,
	summary: "The run's cost reaches `dollars` (USD). With `model`, the token totals are priced as that model.",
	example: MaxCost{Dollars: 12.5, Model: "claude-sonnet-4-5"},
}

// TypeMaxConsecutiveFailures is met when a phase failed N times in a row.
const TypeMaxConsecutiveFailures Type = "max_consecutive_failures"

// MaxConsecutiveFailures is met when Phase ("implementation", "review" or
// "verification") has failed Limit times in a row (seed 004).
type MaxConsecutiveFailures struct {
	Phase string
	Limit int
}

var maxConsecutiveFailuresKind = &kind[MaxConsecutiveFailures]{
	typ:      TypeMaxConsecutiveFailures,
	priority: priorityStreak,
	fields: []field[MaxConsecutiveFailures]{
		stringField("phase", func(c *MaxConsecutiveFailures) *string { return &c.Phase }),
		intField("limit", func(c *MaxConsecutiveFailures) *int { return &c.Limit }),
	},
	describe: func(c MaxConsecutiveFailures) string {
		return "after " + plural(c.Limit, "consecutive "+c.Phase+" failure")
	},
	reason: func(c MaxConsecutiveFailures) string {
		return "max_consecutive_failures:" + c.Phase + ":" + strconv.Itoa(c.Limit)
	},
	validate: func(c MaxConsecutiveFailures, v *validator, p string) {
		if !slices.Contains(phases, c.Phase) {
			msg := fmt.Sprintf("unknown phase %q (want implementation, review or verification)", c.Phase)
			if s, ok := closest(c.Phase, phases); ok {
				msg = fmt.Sprintf("unknown phase %q (did you mean %s?)", c.Phase, s)
			}
			v.fail(join(p, "phase"), "%s", msg)
		}
		v.atLeastOne(p, "limit", int64(c.Limit))
	},
	measure: measureMaxConsecutiveFailures,
	summary: "`phase` (`implementation`, `review` or `verification`) failed `limit` times in a row. " +
		"With `progress_resets_streak` (on by default), a verification failure with fewer failing tests than " +
		"the previous one restarts the verification streak at 1: failing tests going 5 → 4 → 3 is progress, not a streak.",
	example: MaxConsecutiveFailures{Phase: "verification", Limit: 3},
}

// TypeStuckTask is met when the same plan task failed verification N times in a row.
const TypeStuckTask Type = "stuck_task"

// StuckTask is met when the same plan task failed verification Count times in a row.
type StuckTask struct{ Count int }

var stuckTaskKind = &kind[StuckTask]{
	typ:      TypeStuckTask,
	priority: priorityStreak,
	fields:   []field[StuckTask]{intField("count", func(c *StuckTask) *int { return &c.Count })},
	describe: func(c StuckTask) string {
		return fmt.Sprintf("when the same plan task fails verification %d times in a row", c.Count)
	},
	reason:   func(c StuckTask) string { return "stuck_task:" + strconv.Itoa(c.Count) },
	validate: func(c StuckTask, v *validator, p string) { v.atLeastOne(p, "count", int64(c.Count)) },
	measure:  measureStuckTask,
	summary:  "The same plan task failed verification `count` times in a row.",
	example:  StuckTask{Count: 3},
}
