package stop

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Set is the JSON of .loop/stop.json, and the whole configuration of an Evaluator.
type Set struct {
	Conditions        []Condition `json:"conditions"`         // limits: ClassLimit, the run ends ABORTED
	SuccessConditions []Condition `json:"success_conditions"` // ClassSuccess: the run ends COMPLETED
	FailureConditions []Condition `json:"failure_conditions"` // ClassFailure: the run ends FAILED
	// StopOnFirst stops evaluating at the first met condition in priority order (seed
	// 001), which makes that condition the verdict even when a later one of a stronger
	// class is also met.
	StopOnFirst bool `json:"stop_on_first"`
}

// Add appends c to the list of class.
func (s *Set) Add(class Class, c Condition) {
	switch class {
	case ClassSuccess:
		s.SuccessConditions = append(s.SuccessConditions, c)
	case ClassFailure:
		s.FailureConditions = append(s.FailureConditions, c)
	default:
		s.Conditions = append(s.Conditions, c)
	}
}

// Merge appends other's conditions after s's, list by list, and stops on first when
// either does. The scheduler merges the config shorthands (Shorthands.Set) with
// .loop/stop.json, in that order, so declaration order — the last tie-breaker — puts
// the shorthands first.
func (s *Set) Merge(other Set) {
	s.Conditions = append(s.Conditions, other.Conditions...)
	s.SuccessConditions = append(s.SuccessConditions, other.SuccessConditions...)
	s.FailureConditions = append(s.FailureConditions, other.FailureConditions...)
	s.StopOnFirst = s.StopOnFirst || other.StopOnFirst
}

// Len returns the number of top-level conditions.
func (s Set) Len() int {
	return len(s.Conditions) + len(s.SuccessConditions) + len(s.FailureConditions)
}

// Uses reports whether any condition of s, at any depth, has type t.
func (s Set) Uses(t Type) bool {
	var has func(c Condition) bool
	has = func(c Condition) bool {
		if c == nil {
			return false
		}
		if c.Type() == t {
			return true
		}
		switch c := c.(type) {
		case All:
			return slices.ContainsFunc(c.Conditions, has)
		case Any:
			return slices.ContainsFunc(c.Conditions, has)
		case Negation:
			return has(c.Condition)
		}
		return false
	}
	for _, l := range s.lists() {
		if slices.ContainsFunc(l.conds, has) {
			return true
		}
	}
	return false
}

// lists returns the three lists with their JSON names and classes.
func (s Set) lists() []classList {
	return []classList{
		{"conditions", ClassLimit, s.Conditions},
		{"success_conditions", ClassSuccess, s.SuccessConditions},
		{"failure_conditions", ClassFailure, s.FailureConditions},
	}
}

type classList struct {
	name  string
	class Class
	conds []Condition
}

// Shorthands are the config keys that add conditions (SPEC section 7). Zero disables a
// key. Set turns them into conditions in the class each belongs to.
type Shorthands struct {
	MaxIterations   int           // max_iterations → limit
	MaxDuration     time.Duration // max_duration → limit
	MaxTokens       int64         // max_tokens → limit
	MaxInputTokens  int64         // max_input_tokens → limit
	MaxOutputTokens int64         // max_output_tokens → limit
	MaxCost         float64       // max_cost (USD) → limit
	// MaxConsecutiveFailures maps a phase to max_consecutive_<phase>_failures → failure.
	MaxConsecutiveFailures map[string]int
	MaxTaskFailures        int // max_task_failures → stuck_task, failure
	NoProgressIterations   int // no_progress_iterations → no_progress, failure
}

// Set returns the conditions of the enabled shorthands, in the order of the fields
// above and, for phases, implementation, review, verification.
func (h Shorthands) Set() Set {
	var s Set
	if h.MaxIterations > 0 {
		s.Add(ClassLimit, MaxIterations{Count: h.MaxIterations})
	}
	if h.MaxDuration > 0 {
		s.Add(ClassLimit, MaxDuration{Duration: h.MaxDuration})
	}
	if h.MaxTokens > 0 {
		s.Add(ClassLimit, MaxTokens{Count: h.MaxTokens})
	}
	if h.MaxInputTokens > 0 {
		s.Add(ClassLimit, MaxInputTokens{Count: h.MaxInputTokens})
	}
	if h.MaxOutputTokens > 0 {
		s.Add(ClassLimit, MaxOutputTokens{Count: h.MaxOutputTokens})
	}
	if h.MaxCost > 0 {
		s.Add(ClassLimit, MaxCost{Dollars: h.MaxCost})
	}
	for _, phase := range phases {
		if n := h.MaxConsecutiveFailures[phase]; n > 0 {
			s.Add(ClassFailure, MaxConsecutiveFailures{Phase: phase, Limit: n})
		}
	}
	if h.MaxTaskFailures > 0 {
		s.Add(ClassFailure, StuckTask{Count: h.MaxTaskFailures})
	}
	if h.NoProgressIterations > 0 {
		s.Add(ClassFailure, NoProgress{Iterations: h.NoProgressIterations})
	}
	return s
}

// ValidationError is one problem with a stop condition, found while decoding or
// validating, at a JSON path such as "success_conditions[0].conditions[2]".
type ValidationError struct {
	Path string // "" for the document as a whole
	Msg  string
}

func (e *ValidationError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Validate reports every problem in s at once (errors.Join of *ValidationError): empty
// all/any, a missing not, bad regexes and globs, counts, iterations and limits below 1,
// dollars and durations not above 0, unknown phases, empty test lists, empty or escaping
// paths, patterns and scripts, and a custom_script that is missing from workspace or
// not executable. With workspace "" the file system is not consulted.
func (s Set) Validate(workspace string) error {
	v := validator{workspace: workspace}
	for _, l := range s.lists() {
		for i, c := range l.conds {
			v.check(c, index(l.name, i))
		}
	}
	return errors.Join(v.errs...)
}

// ValidateModels reports max_cost conditions whose model is not in prices.
func (s Set) ValidateModels(prices Prices) error {
	var errs []error
	var walk func(c Condition, p string)
	walk = func(c Condition, p string) {
		switch c := c.(type) {
		case MaxCost:
			if c.Model == "" {
				return
			}
			if _, ok := prices.Lookup(c.Model); !ok {
				errs = append(errs, &ValidationError{Path: join(p, "model"), Msg: fmt.Sprintf(
					"model %q is not in the pricing table (known: %s; add it with price.%s=input,output,cache_read,cache_write)",
					c.Model, strings.Join(prices.models(), ", "), c.Model)})
			}
		case All:
			for i, cc := range c.Conditions {
				walk(cc, index(join(p, "conditions"), i))
			}
		case Any:
			for i, cc := range c.Conditions {
				walk(cc, index(join(p, "conditions"), i))
			}
		case Negation:
			walk(c.Condition, join(p, "condition"))
		}
	}
	for _, l := range s.lists() {
		for i, c := range l.conds {
			walk(c, index(l.name, i))
		}
	}
	return errors.Join(errs...)
}

type validator struct {
	workspace string
	errs      []error
}

func (v *validator) fail(path, format string, args ...any) {
	v.errs = append(v.errs, &ValidationError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) atLeastOne(path, field string, n int64) {
	if n < 1 {
		v.fail(join(path, field), "must be at least 1 (got %d)", n)
	}
}

func (v *validator) check(c Condition, p string) {
	switch c := c.(type) {
	case nil:
		v.fail(p, "missing condition")
	case MaxIterations:
		v.atLeastOne(p, "count", int64(c.Count))
	case MaxDuration:
		if c.Duration <= 0 {
			v.fail(join(p, "duration"), "must be positive (got %s)", FormatDuration(c.Duration))
		}
	case TestFailureStreak:
		v.atLeastOne(p, "count", int64(c.Count))
	case AllTestsPass, UserSignal, Never:
	case SpecificTestsPass:
		if len(c.Tests) == 0 {
			v.fail(join(p, "tests"), "needs at least one test name")
		}
		for i, t := range c.Tests {
			switch {
			case strings.TrimSpace(t) == "":
				v.fail(index(join(p, "tests"), i), "empty test name")
			case isGlob(t):
				if _, err := path.Match(t, ""); err != nil {
					v.fail(index(join(p, "tests"), i), "bad glob pattern %q", t)
				}
			}
		}
	case NoProgress:
		v.atLeastOne(p, "iterations", int64(c.Iterations))
	case FileCreated:
		v.path(join(p, "path"), c.Path)
	case FileContains:
		v.path(join(p, "path"), c.Path)
		if c.Content == "" {
			v.fail(join(p, "content"), "must not be empty (use file_created to wait for the file)")
		}
	case OutputPattern:
		switch {
		case c.Pattern == "":
			v.fail(join(p, "pattern"), "must not be empty")
		case c.IsRegex:
			if _, err := regexp.Compile(c.Pattern); err != nil {
				v.fail(join(p, "pattern"), "invalid regex: %v", err)
			}
		}
	case OnError:
	case CustomScript:
		v.script(join(p, "script"), c.Script)
	case All:
		v.composite(p, "all", c.Conditions)
	case Any:
		v.composite(p, "any", c.Conditions)
	case Negation:
		if c.Condition == nil {
			v.fail(p, "not needs a condition")
			return
		}
		v.check(c.Condition, join(p, "condition"))
	case MaxTokens:
		v.atLeastOne(p, "count", c.Count)
	case MaxInputTokens:
		v.atLeastOne(p, "count", c.Count)
	case MaxOutputTokens:
		v.atLeastOne(p, "count", c.Count)
	case MaxCost:
		if !(c.Dollars > 0) || math.IsInf(c.Dollars, 0) {
			v.fail(join(p, "dollars"), "must be greater than 0 (got %v)", c.Dollars)
		}
	case MaxConsecutiveFailures:
		if !slices.Contains(phases, c.Phase) {
			msg := fmt.Sprintf("unknown phase %q (want implementation, review or verification)", c.Phase)
			if s, ok := closest(c.Phase, phases); ok {
				msg = fmt.Sprintf("unknown phase %q (did you mean %s?)", c.Phase, s)
			}
			v.fail(join(p, "phase"), "%s", msg)
		}
		v.atLeastOne(p, "limit", int64(c.Limit))
	case StuckTask:
		v.atLeastOne(p, "count", int64(c.Count))
	default:
		v.fail(p, "unsupported condition %T", c)
	}
}

func (v *validator) composite(p, name string, cs []Condition) {
	if len(cs) == 0 {
		v.fail(p, "%s needs at least one condition", name)
	}
	for i, c := range cs {
		v.check(c, index(join(p, "conditions"), i))
	}
}

// path checks a workspace-relative path: it must stay inside the workspace.
func (v *validator) path(p, name string) bool {
	switch {
	case name == "":
		v.fail(p, "must not be empty")
		return false
	case !filepath.IsLocal(filepath.FromSlash(name)):
		v.fail(p, "%q must be a relative path inside the workspace", name)
		return false
	}
	return true
}

func (v *validator) script(p, name string) {
	if !v.path(p, name) || v.workspace == "" {
		return
	}
	info, err := os.Stat(filepath.Join(v.workspace, filepath.FromSlash(name)))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.fail(p, "script %q not found in the workspace", name)
	case err != nil:
		v.fail(p, "script %q: %v", name, err)
	case info.IsDir():
		v.fail(p, "script %q is a directory", name)
	case info.Mode().Perm()&0o111 == 0:
		v.fail(p, "script %q is not executable (chmod +x %s)", name, name)
	}
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?[") }
