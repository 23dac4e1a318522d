package stop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/loopd/loopd/internal/editdist"
	"github.com/loopd/loopd/internal/jsonpath"
)

// Encoding: every condition encodes as {"type":…} followed by its fields in the order
// of its descriptor (kind.marshal). The canonical form writes every field except the
// optional on_error.pattern and max_cost.model, which are left out when empty; lists
// are [] rather than null; durations are FormatDuration strings.
// encode(decode(encode(c))) == encode(c) for every condition.

// MarshalJSON encodes s in the canonical form of .loop/stop.json: all four keys, lists
// as [] when empty.
func (s Set) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Conditions        []Condition `json:"conditions"`
		SuccessConditions []Condition `json:"success_conditions"`
		FailureConditions []Condition `json:"failure_conditions"`
		StopOnFirst       bool        `json:"stop_on_first"`
	}{nonNil(s.Conditions), nonNil(s.SuccessConditions), nonNil(s.FailureConditions), s.StopOnFirst})
}

// UnmarshalJSON decodes s strictly; see DecodeSet.
func (s *Set) UnmarshalJSON(data []byte) error {
	set, err := DecodeSet(data)
	if err != nil {
		return err
	}
	*s = set
	return nil
}

// maxDepth bounds how deeply all/any/not may nest. It keeps decoding linear in the
// input and evaluation's recursion shallow; real condition trees are a few levels deep.
const maxDepth = 32

// DecodeSet decodes the JSON of .loop/stop.json strictly: unknown types and fields,
// duplicate fields, wrong JSON types, missing required fields and trailing data are
// errors. Every problem found is reported (errors.Join of *ValidationError), each with
// its JSON path, e.g. `success_conditions[0].conditions[2].count: expected an integer,
// got "5"`. Absent lists are empty. DecodeSet checks shape only; Set.Validate checks
// values.
func DecodeSet(data []byte) (Set, error) {
	var d decoder
	raw, ok := d.top(data)
	if !ok {
		return Set{}, d.err()
	}
	var s Set
	for _, m := range d.object(raw, "") {
		switch m.key {
		case "conditions":
			s.Conditions = d.conditions(m.value, m.key, 0)
		case "success_conditions":
			s.SuccessConditions = d.conditions(m.value, m.key, 0)
		case "failure_conditions":
			s.FailureConditions = d.conditions(m.value, m.key, 0)
		case "stop_on_first":
			s.StopOnFirst, _ = d.bool(m.value, m.key)
		default:
			d.unknownField(m.key, "", "stop.json", setFields)
		}
	}
	if err := d.err(); err != nil {
		return Set{}, err
	}
	return s, nil
}

var setFields = []string{"conditions", "success_conditions", "failure_conditions", "stop_on_first"}

// DecodeCondition decodes one condition as strictly as DecodeSet; paths in its errors
// are relative to the condition ("conditions[0].count").
func DecodeCondition(data []byte) (Condition, error) {
	var d decoder
	raw, ok := d.top(data)
	if !ok {
		return nil, d.err()
	}
	c := d.condition(raw, "", 0)
	if err := d.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// decoder collects every problem found while decoding.
type decoder struct{ errs []error }

func (d *decoder) fail(path, format string, args ...any) {
	d.errs = append(d.errs, &ValidationError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) err() error { return errors.Join(d.errs...) }

// top checks that data is exactly one JSON value.
func (d *decoder) top(data []byte) (json.RawMessage, bool) {
	raw, se := jsonpath.Top(data)
	switch {
	case se == nil:
		return raw, true
	case se.Trailing:
		d.fail("", "invalid JSON at line %d, column %d: data after the top-level value", se.Line, se.Col)
	case se.EOF:
		d.fail("", "invalid JSON: unexpected end of input")
	case se.Line > 0:
		d.fail("", "invalid JSON at line %d, column %d: %v", se.Line, se.Col, se.Err)
	default:
		d.fail("", "invalid JSON: %v", se.Err)
	}
	return nil, false
}

type member struct {
	key   string
	value json.RawMessage
}

// object returns the members of the JSON object raw in document order, reporting a
// non-object and duplicate keys.
func (d *decoder) object(raw json.RawMessage, path string) []member {
	if k := jsonpath.Kind(raw); k != "object" {
		d.fail(path, "expected an object, got %s", describe(raw))
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'; raw is valid JSON
		d.fail(path, "invalid JSON: %v", err)
		return nil
	}
	var ms []member
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			d.fail(path, "invalid JSON: %v", err)
			return ms
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			d.fail(join(path, key), "invalid JSON: %v", err)
			return ms
		}
		if seen[key] {
			d.fail(join(path, key), "duplicate field")
			continue
		}
		seen[key] = true
		ms = append(ms, member{key, v})
	}
	return ms
}

func (d *decoder) conditions(raw json.RawMessage, path string, depth int) []Condition {
	if k := jsonpath.Kind(raw); k != "array" {
		d.fail(path, "expected an array of conditions, got %s", describe(raw))
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		d.fail(path, "invalid JSON: %v", err)
		return nil
	}
	cs := make([]Condition, 0, len(items))
	for i, item := range items {
		if c := d.condition(item, jsonpath.Index(path, i), depth); c != nil {
			cs = append(cs, c)
		}
	}
	return cs
}

// condition decodes one condition object; it returns nil after recording its problems.
func (d *decoder) condition(raw json.RawMessage, path string, depth int) Condition {
	if depth >= maxDepth {
		d.fail(path, "conditions nested more than %d deep", maxDepth)
		return nil
	}
	if k := jsonpath.Kind(raw); k != "object" {
		d.fail(path, "expected a condition object such as {\"type\":\"max_iterations\",\"count\":5}, got %s", describe(raw))
		return nil
	}
	before := len(d.errs)
	members := d.object(raw, path)
	var typ Type
	found := false
	for _, m := range members {
		if m.key == "type" {
			found = true
			if s, ok := d.string(m.value, join(path, "type")); ok {
				typ = Type(s)
			}
		}
	}
	if !found {
		d.fail(path, "missing field \"type\"")
		return nil
	}
	if len(d.errs) > before {
		return nil
	}
	k, ok := kindByType[typ]
	if !ok {
		names := make([]string, len(kinds))
		for i, t := range Types() {
			names[i] = string(t)
		}
		if s, ok := closest(string(typ), names); ok {
			d.fail(join(path, "type"), "unknown condition type %q (did you mean %s?)", typ, s)
		} else {
			d.fail(join(path, "type"), "unknown condition type %q (known types: %s)", typ, strings.Join(names, ", "))
		}
		return nil
	}
	return k.decode(d, members, path, depth)
}

func hasMember(ms []member, key string) bool {
	for _, m := range ms {
		if m.key == key {
			return true
		}
	}
	return false
}

func (d *decoder) unknownField(key, path, owner string, known []string) {
	switch s, ok := closest(key, known); {
	case ok:
		d.fail(join(path, key), "unknown field for %s (did you mean %s?)", owner, s)
	case len(known) == 0:
		d.fail(join(path, key), "unknown field: %s has no fields", owner)
	default:
		d.fail(join(path, key), "unknown field for %s (fields: %s)", owner, strings.Join(known, ", "))
	}
}

func (d *decoder) field(k fieldKind, raw json.RawMessage, path string, depth int) (any, bool) {
	switch k {
	case kindInt:
		n, ok := d.integer(raw, path, strconv.IntSize)
		return int(n), ok
	case kindInt64:
		return d.integer(raw, path, 64)
	case kindFloat:
		if kind := jsonpath.Kind(raw); kind != "number" {
			d.fail(path, "expected a number, got %s", describe(raw))
			return nil, false
		}
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(v, 0) {
			d.fail(path, "number %s is out of range", raw)
			return nil, false
		}
		return v, true
	case kindBool:
		return d.bool(raw, path)
	case kindString:
		return d.string(raw, path)
	case kindStrings:
		if kind := jsonpath.Kind(raw); kind != "array" {
			d.fail(path, "expected an array of strings, got %s", describe(raw))
			return nil, false
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			d.fail(path, "invalid JSON: %v", err)
			return nil, false
		}
		out := make([]string, 0, len(items))
		ok := true
		for i, item := range items {
			s, good := d.string(item, jsonpath.Index(path, i))
			ok = ok && good
			out = append(out, s)
		}
		return out, ok
	case kindDuration:
		s, ok := d.string(raw, path)
		if !ok {
			return nil, false
		}
		v, err := ParseDuration(s)
		if err != nil {
			d.fail(path, "%v", err)
			return nil, false
		}
		return v, true
	case kindCondition:
		c := d.condition(raw, path, depth+1)
		return c, c != nil
	case kindConditions:
		before := len(d.errs)
		cs := d.conditions(raw, path, depth+1)
		return cs, len(d.errs) == before
	}
	panic("stop: unknown field kind")
}

func (d *decoder) integer(raw json.RawMessage, path string, bits int) (int64, bool) {
	if kind := jsonpath.Kind(raw); kind != "number" {
		d.fail(path, "expected an integer, got %s", describe(raw))
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			d.fail(path, "integer %s is out of range", raw)
		} else {
			d.fail(path, "expected an integer, got %s", raw)
		}
		return 0, false
	}
	return n, true
}

func (d *decoder) bool(raw json.RawMessage, path string) (bool, bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	d.fail(path, "expected true or false, got %s", describe(raw))
	return false, false
}

func (d *decoder) string(raw json.RawMessage, path string) (string, bool) {
	if kind := jsonpath.Kind(raw); kind != "string" {
		d.fail(path, "expected a string, got %s", describe(raw))
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		d.fail(path, "invalid string: %v", err)
		return "", false
	}
	return s, true
}

// describe names the JSON type of raw, with the value of short strings, for "got …".
func describe(raw json.RawMessage) string {
	k := jsonpath.Kind(raw)
	if raw, short := jsonpath.Short(raw); k == "string" && short {
		return "string " + string(raw)
	}
	return k
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// closest returns the candidate most likely meant by word: one that starts like word
// does, but for at most its last byte ("verify" → "verification"), else the nearest by
// edit distance if near enough.
func closest(word string, candidates []string) (string, bool) {
	best, bestDist := "", math.MaxInt
	for _, c := range candidates {
		if n := commonPrefix(word, c); n >= 4 && n >= len(word)-1 && (best == "" || len(c) < len(best)) {
			best = c
		}
	}
	if best != "" {
		return best, true
	}
	for _, c := range candidates {
		if d := editdist.Distance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" || bestDist >= len(word) || bestDist > max(2, len(word)/3) {
		return "", false
	}
	return best, true
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
