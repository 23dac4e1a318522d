package stop

import (
	"slices"
	"strconv"
	"strings"
)

// Type is the JSON "type" tag of a condition. Each condition type declares its
// constant next to its struct and descriptor (conditions.go).
type Type string

// Types returns every condition type in a stable order: the order the
// descriptors are declared in conditions.go.
func Types() []Type {
	out := make([]Type, len(kinds))
	for i, k := range kinds {
		out[i] = k.tag()
	}
	return out
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
// struct per Type in this package, each described by its descriptor); decode them with
// DecodeSet or DecodeCondition and build them with composite literals or And, Or and
// Not.
type Condition interface {
	// Type returns the JSON type tag.
	Type() Type
	// Description returns a human description such as "after 5 iterations".
	Description() string
	// Priority orders evaluation: higher is evaluated first.
	Priority() int
	// Reason returns the machine-readable stop reason recorded when this condition
	// stops a run, e.g. "max_iterations:5" or "condition:all".
	Reason() string
	// MarshalJSON encodes the canonical tagged form {"type":…,…}.
	MarshalJSON() ([]byte, error)

	// kind returns the type's descriptor; it also seals the interface.
	kind() descriptor
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

// walk calls fn for c and then, depth first in declaration order, for every
// condition below it (nil children included), each with its JSON path below p. When
// fn returns false, walk stops.
func walk(c Condition, p string, fn func(c Condition, p string) bool) bool {
	if !fn(c, p) {
		return false
	}
	if c == nil {
		return true
	}
	for cp, child := range c.kind().children(c, p) {
		if !walk(child, cp, fn) {
			return false
		}
	}
	return true
}

// anyBelow reports whether pred holds for c or a condition below it.
func anyBelow(c Condition, pred func(Condition) bool) bool {
	found := false
	walk(c, "", func(c Condition, _ string) bool {
		found = c != nil && pred(c)
		return !found
	})
	return found
}

// isSlow reports whether evaluating c touches the file system or runs a process, so
// that it runs in a worker with a timeout and its leaves may be cached.
func isSlow(c Condition) bool {
	return anyBelow(c, func(c Condition) bool { return c.kind().slowLeaf() })
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

func conditionReason(t Type) string { return "condition:" + string(t) }

func formatUSD(v float64) string { return "$" + strconv.FormatFloat(v, 'f', 2, 64) }

// plural writes "1 iteration" or "3 iterations".
func plural[N int | int64](n N, noun string) string {
	s := strconv.FormatInt(int64(n), 10) + " " + noun
	if n != 1 {
		s += "s"
	}
	return s
}
