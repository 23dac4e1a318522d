package stop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/jsonpath"
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
	return s.anyCondition(func(c Condition) bool { return c.Type() == t })
}

// anyCondition reports whether pred holds for a condition of s at any depth.
func (s Set) anyCondition(pred func(Condition) bool) bool {
	for _, l := range s.lists() {
		for _, c := range l.conds {
			if anyBelow(c, pred) {
				return true
			}
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

// Shorthands are the config keys that add conditions (docs/configuration.md). Zero disables a
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
			v.check(c, jsonpath.Index(l.name, i))
		}
	}
	return errors.Join(v.errs...)
}

// ValidateModels reports max_cost conditions whose model is not in prices.
func (s Set) ValidateModels(prices Prices) error {
	var errs []error
	for _, l := range s.lists() {
		for i, c := range l.conds {
			walk(c, jsonpath.Index(l.name, i), func(c Condition, p string) bool {
				if c, ok := c.(MaxCost); ok && c.Model != "" {
					if _, ok := prices.Lookup(c.Model); !ok {
						errs = append(errs, &ValidationError{Path: join(p, "model"), Msg: fmt.Sprintf(
							"model %q is not in the pricing table (known: %s; add it with price.%s=input,output,cache_read,cache_write)",
							c.Model, strings.Join(prices.models(), ", "), c.Model)})
					}
				}
				return true
			})
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

// check validates c at JSON path p: its descriptor checks its values and children.
func (v *validator) check(c Condition, p string) {
	if c == nil {
		v.fail(p, "missing condition")
		return
	}
	c.kind().check(c, v, p)
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
