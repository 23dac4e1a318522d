package stop

import (
	"encoding/json"
	"iter"
	"math"
	"strconv"
	"time"

	"github.com/loopd/loopd/internal/jsonpath"
)

// kind describes one condition type T: its tag, JSON fields, priority, description,
// reason, validation, evaluation and documentation. Encoding, decoding, validation,
// the Evaluator and the generated reference all read it; the methods of T that
// Condition needs are generated from it (kinds_gen.go).
type kind[T Condition] struct {
	typ      Type
	priority int
	// fields are T's JSON fields in the order they are written, after "type".
	fields []field[T]
	// describe is T's human description ("after 5 iterations").
	describe func(T) string
	// reason is T's machine stop reason; nil means "condition:<type>".
	reason func(T) string
	// validate reports problems with T's values at JSON path p (Set.Validate); the
	// children of all, any and not are validated by the kind itself. nil: none.
	validate func(c T, v *validator, p string)
	// measure evaluates T against a run (measure.go).
	measure func(c T, p probe) outcome
	// slow marks a leaf that reads the workspace or runs a process: the Evaluator
	// runs it in a worker, under the condition timeout, through the cache.
	slow bool
	// prepare readies a node for evaluation (compile a regex, look up a price). nil:
	// nothing to prepare.
	prepare func(c T, n *node, prices Prices)
	// summary says when T is met, in Markdown, and example is a valid T; both go to
	// the reference (docs/stop-conditions.md).
	summary string
	example T
}

// descriptor is a kind with its type parameter erased, for code that holds a
// Condition or only a Type.
type descriptor interface {
	tag() Type
	// decode builds the condition from members already known to belong to it,
	// recording problems in d; it returns nil after a problem.
	decode(d *decoder, members []member, path string, depth int) Condition
	check(c Condition, v *validator, p string)
	children(c Condition, p string) iter.Seq2[string, Condition]
	slowLeaf() bool
	prepareNode(c Condition, n *node, prices Prices)
	measureNode(p probe) outcome
	reference() TypeDoc
}

func (k *kind[T]) tag() Type      { return k.typ }
func (k *kind[T]) slowLeaf() bool { return k.slow }

func (k *kind[T]) reasonOf(c T) string {
	if k.reason == nil {
		return conditionReason(k.typ)
	}
	return k.reason(c)
}

// marshal writes the canonical form: {"type":…} and then every field in order, but
// for omitEmpty fields that are empty. Each value is written as encoding/json writes
// it inside a struct, so the bytes are those of json.Marshal of such a struct.
func (k *kind[T]) marshal(c T) ([]byte, error) {
	b := make([]byte, 0, 64)
	b = append(b, `{"type":"`...)
	b = append(b, k.typ...)
	b = append(b, '"')
	for _, f := range k.fields {
		if f.empty != nil && f.empty(&c) {
			continue
		}
		b = append(b, `,"`...)
		b = append(b, f.name...)
		b = append(b, `":`...)
		var err error
		if b, err = f.encode(b, &c); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func (k *kind[T]) decode(d *decoder, members []member, path string, depth int) Condition {
	before := len(d.errs)
	var c T
	for _, m := range members {
		if m.key == "type" {
			continue
		}
		i := k.fieldIndex(m.key)
		if i < 0 {
			d.unknownField(m.key, path, string(k.typ), k.names())
			continue
		}
		f := k.fields[i]
		if f.optional && jsonpath.Kind(m.value) == "null" {
			continue
		}
		if v, ok := d.field(f.kind, m.value, join(path, f.name), depth); ok {
			f.set(&c, v)
		}
	}
	for _, f := range k.fields {
		if !f.optional && !hasMember(members, f.name) {
			d.fail(path, "missing field %q for %s", f.name, k.typ)
		}
	}
	if len(d.errs) > before {
		return nil
	}
	return c
}

func (k *kind[T]) fieldIndex(name string) int {
	for i, f := range k.fields {
		if f.name == name {
			return i
		}
	}
	return -1
}

func (k *kind[T]) names() []string {
	names := make([]string, len(k.fields))
	for i, f := range k.fields {
		names[i] = f.name
	}
	return names
}

// check validates c's own values, then its children: a list of conditions needs at
// least one, a single condition must be there.
func (k *kind[T]) check(c Condition, v *validator, p string) {
	t := c.(T)
	if k.validate != nil {
		k.validate(t, v, p)
	}
	for _, f := range k.fields {
		switch f.kind {
		case kindConditions:
			cs, _ := f.get(&t).([]Condition)
			if len(cs) == 0 {
				v.fail(p, "%s needs at least one condition", k.typ)
			}
			for i, child := range cs {
				v.check(child, jsonpath.Index(join(p, f.name), i))
			}
		case kindCondition:
			child, _ := f.get(&t).(Condition)
			if child == nil {
				v.fail(p, "%s needs a condition", k.typ)
				continue
			}
			v.check(child, join(p, f.name))
		}
	}
}

// children yields c's child conditions, nil ones included, with their JSON paths
// below p.
func (k *kind[T]) children(c Condition, p string) iter.Seq2[string, Condition] {
	return func(yield func(string, Condition) bool) {
		t := c.(T)
		for _, f := range k.fields {
			switch f.kind {
			case kindConditions:
				cs, _ := f.get(&t).([]Condition)
				for i, child := range cs {
					if !yield(jsonpath.Index(join(p, f.name), i), child) {
						return
					}
				}
			case kindCondition:
				child, _ := f.get(&t).(Condition)
				if !yield(join(p, f.name), child) {
					return
				}
			}
		}
	}
}

func (k *kind[T]) prepareNode(c Condition, n *node, prices Prices) {
	if k.prepare != nil {
		k.prepare(c.(T), n, prices)
	}
}

func (k *kind[T]) measureNode(p probe) outcome { return k.measure(p.n.cond.(T), p) }

func (k *kind[T]) reference() TypeDoc {
	return TypeDoc{Type: k.typ, Summary: k.summary, Example: k.example}
}

// fieldKind is the JSON shape of a condition field.
type fieldKind int

const (
	kindInt fieldKind = iota
	kindInt64
	kindFloat
	kindBool
	kindString
	kindStrings
	kindDuration
	kindCondition
	kindConditions
)

// fieldSpec is what the decoder needs of a field.
type fieldSpec struct {
	name     string
	kind     fieldKind
	optional bool // may be absent or null
}

// field is one JSON field of T, reached through a pointer into T.
type field[T any] struct {
	fieldSpec
	get    func(*T) any
	set    func(*T, any) // v is the Go type the decoder produces for the field's kind
	encode func(b []byte, c *T) ([]byte, error)
	empty  func(*T) bool // non-nil: leave the field out of the JSON when it reports true
}

// fieldOf builds a field holding a V at at(c); enc appends a V's JSON.
func fieldOf[T, V any](name string, k fieldKind, at func(*T) *V, enc func(b []byte, v V) ([]byte, error)) field[T] {
	return field[T]{
		fieldSpec: fieldSpec{name: name, kind: k},
		get:       func(c *T) any { return *at(c) },
		set:       func(c *T, v any) { *at(c) = v.(V) },
		encode:    func(b []byte, c *T) ([]byte, error) { return enc(b, *at(c)) },
	}
}

// mayBeAbsent makes f optional when decoding: absent or null leaves the zero value.
// It is still written.
func (f field[T]) mayBeAbsent() field[T] {
	f.optional = true
	return f
}

func intField[T any](name string, at func(*T) *int) field[T] {
	return fieldOf(name, kindInt, at, func(b []byte, v int) ([]byte, error) { return strconv.AppendInt(b, int64(v), 10), nil })
}

func int64Field[T any](name string, at func(*T) *int64) field[T] {
	return fieldOf(name, kindInt64, at, func(b []byte, v int64) ([]byte, error) { return strconv.AppendInt(b, v, 10), nil })
}

func floatField[T any](name string, at func(*T) *float64) field[T] {
	return fieldOf(name, kindFloat, at, appendFloat)
}

func boolField[T any](name string, at func(*T) *bool) field[T] {
	return fieldOf(name, kindBool, at, func(b []byte, v bool) ([]byte, error) { return strconv.AppendBool(b, v), nil })
}

func stringField[T any](name string, at func(*T) *string) field[T] {
	return fieldOf(name, kindString, at, appendString)
}

// optionalStringField is a string that may be absent or null, and is left out of the
// JSON when empty.
func optionalStringField[T any](name string, at func(*T) *string) field[T] {
	f := stringField(name, at).mayBeAbsent()
	f.empty = func(c *T) bool { return *at(c) == "" }
	return f
}

// stringsField is a list of strings, written [] when empty.
func stringsField[T any](name string, at func(*T) *[]string) field[T] {
	return fieldOf(name, kindStrings, at, func(b []byte, v []string) ([]byte, error) {
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendString(b, s); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	})
}

// durationField is a duration, written as a FormatDuration string.
func durationField[T any](name string, at func(*T) *time.Duration) field[T] {
	return fieldOf(name, kindDuration, at, func(b []byte, v time.Duration) ([]byte, error) {
		return appendString(b, FormatDuration(v))
	})
}

func conditionField[T any](name string, at func(*T) *Condition) field[T] {
	return fieldOf(name, kindCondition, at, appendJSON[Condition])
}

// conditionsField is a list of conditions, written [] when empty.
func conditionsField[T any](name string, at func(*T) *[]Condition) field[T] {
	return fieldOf(name, kindConditions, at, func(b []byte, v []Condition) ([]byte, error) { return appendJSON(b, nonNil(v)) })
}

// appendJSON appends v as encoding/json writes it (HTML characters escaped, a
// Condition through its MarshalJSON, nil as null).
func appendJSON[V any](b []byte, v V) ([]byte, error) {
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

// appendFloat appends f exactly as encoding/json writes a float64: the shortest
// decimal, in exponent form below 1e-6 and from 1e21, with a two-digit exponent
// trimmed ("1e-7"). NaN and ±Inf go through json.Marshal for its error.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return appendJSON(b, f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, nil
}

// appendString appends s as a JSON string exactly as encoding/json writes it. A string
// of printable ASCII that json leaves alone (no quote, backslash or HTML character) is
// copied as is, without the allocation of json.Marshal; any other goes through it.
func appendString(b []byte, s string) ([]byte, error) {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendJSON(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// kindByType finds a type's descriptor.
var kindByType = func() map[Type]descriptor {
	m := make(map[Type]descriptor, len(kinds))
	for _, k := range kinds {
		m[k.tag()] = k
	}
	return m
}()
