package backlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loopd/loopd/internal/jsonpath"
	"github.com/loopd/loopd/internal/termtext"
)

// parser collects the tasks read and every problem found, with where each
// task came from, so that the checks of the whole list (duplicates,
// dependencies, cycles) can point at the line or JSON path.
type parser struct {
	file  string
	list  string // JSON path of the list of tasks, for errors about all of it
	errs  []error
	tasks []Task
	srcs  []source
}

// source is where one task was read: a Markdown line, or a JSON object.
type source struct {
	line      int    // Markdown: the item's line
	base      string // JSON: the task's path, e.g. tasks[3]
	idField   string // JSON: the field the id came from ("id", "number")
	depsField string // JSON: the field the dependencies came from
	depIdx    []int  // JSON: DependsOn[i] was written at depsField[depIdx[i]]
}

// at returns the line and JSON path of the task's field ("" for the task).
func (s source) at(field string) (int, string) {
	if s.base == "" && s.line > 0 {
		return s.line, ""
	}
	if field == "" {
		return s.line, s.base
	}
	return s.line, s.base + "." + field
}

func (s source) dep(i int) (int, string) {
	if s.base == "" {
		return s.line, ""
	}
	return s.line, s.base + "." + s.depsField + "[" + strconv.Itoa(s.depIdx[i]) + "]"
}

func (p *parser) add(line int, path, format string, args ...any) {
	if len(p.errs) == maxErrors {
		p.errs = append(p.errs, &Error{File: p.file, Msg: fmt.Sprintf("more problems not shown (stopped after %d)", maxErrors)})
	}
	if len(p.errs) > maxErrors {
		return
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) fail(path, format string, args ...any) { p.add(0, path, format, args...) }

func (p *parser) err() error { return errors.Join(p.errs...) }

// q quotes a value from the list for an error message: in double quotes,
// control characters escaped (termtext.Quote), cut at 64 bytes.
func q(s string) string {
	if len(s) > 64 {
		cut := 64
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return `"` + termtext.Quote(s) + `"`
}

// field appends a key to a JSON path, bracketed and quoted when the key is
// not a plain name (a key is bytes from the list, shown in errors).
func field(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + q(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// top checks that data is exactly one JSON value.
func (p *parser) top(data []byte) (json.RawMessage, bool) {
	raw, se := jsonpath.Top(data)
	switch {
	case se == nil:
		return raw, true
	case se.Trailing:
		p.add(se.Line, "", "invalid JSON at column %d: more data after the top-level value", se.Col)
	case se.EOF:
		p.fail("", "invalid JSON: unexpected end of input")
	case se.Line > 0:
		p.add(se.Line, "", "invalid JSON at column %d: %s", se.Col, termtext.Quote(se.Err.Error()))
	default:
		p.fail("", "invalid JSON: %s", termtext.Quote(se.Err.Error()))
	}
	return nil, false
}

type member struct {
	key   string
	path  string
	value json.RawMessage
}

// object returns the members of the JSON object raw in document order,
// refusing a non-object and duplicate keys (which one would win is a guess).
func (p *parser) object(raw json.RawMessage, path string) ([]member, bool) {
	if k := jsonpath.Kind(raw); k != "object" {
		p.fail(path, "expected an object, got %s", describe(raw))
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'; raw is valid JSON
		p.fail(path, "invalid JSON: %s", termtext.Quote(err.Error()))
		return nil, false
	}
	var ms []member
	seen := make(map[string]bool)
	ok := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			p.fail(path, "invalid JSON: %s", termtext.Quote(err.Error()))
			return nil, false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			p.fail(path, "invalid JSON: %s", termtext.Quote(err.Error()))
			return nil, false
		}
		m := member{key: key, path: field(path, key), value: v}
		if seen[key] {
			p.fail(m.path, "duplicate field")
			ok = false
			continue
		}
		seen[key] = true
		ms = append(ms, m)
	}
	return ms, ok
}

func (p *parser) array(raw json.RawMessage, path, what string) ([]json.RawMessage, bool) {
	if k := jsonpath.Kind(raw); k != "array" {
		p.fail(path, "expected %s, got %s", what, describe(raw))
		return nil, false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.fail(path, "invalid JSON: %s", termtext.Quote(err.Error()))
		return nil, false
	}
	return items, true
}

func (p *parser) string(raw json.RawMessage, path string) (string, bool) {
	if jsonpath.Kind(raw) != "string" {
		p.fail(path, "expected a string, got %s", describe(raw))
		return "", false
	}
	raw = bytes.TrimSpace(raw)
	if plain := raw[1 : len(raw)-1]; bytes.IndexByte(plain, '\\') < 0 && utf8.Valid(plain) {
		return string(plain), true // no escapes: the common case, without a second decode
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.fail(path, "invalid string: %s", termtext.Quote(err.Error()))
		return "", false
	}
	return s, true
}

// optString is string for a field that may be null (= absent).
func (p *parser) optString(raw json.RawMessage, path string) (string, bool) {
	if jsonpath.Kind(raw) == "null" {
		return "", true
	}
	return p.string(raw, path)
}

func (p *parser) strings(raw json.RawMessage, path string) ([]string, bool) {
	if jsonpath.Kind(raw) == "null" {
		return nil, true
	}
	items, ok := p.array(raw, path, "an array of strings")
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for i, item := range items {
		s, good := p.string(item, jsonpath.Index(path, i))
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

func (p *parser) integer(raw json.RawMessage, path string) (int64, bool) {
	if jsonpath.Kind(raw) != "number" {
		p.fail(path, "expected an integer, got %s", describe(raw))
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			p.fail(path, "integer %s is out of range", raw)
		} else {
			p.fail(path, "expected an integer, got %s", raw)
		}
		return 0, false
	}
	return n, true
}

// priority reads a priority: null or a positive integer.
func (p *parser) priority(raw json.RawMessage, path string) (int, bool) {
	if jsonpath.Kind(raw) == "null" {
		return 0, true
	}
	n, ok := p.integer(raw, path)
	if !ok {
		return 0, false
	}
	if n < 1 || n > 1_000_000 {
		p.fail(path, "priority must be from 1 (first) to 1000000, got %d", n)
		return 0, false
	}
	return int(n), true
}

func (p *parser) bool(raw json.RawMessage, path string) (bool, bool) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, true
	case "false", "null":
		return false, true
	}
	p.fail(path, "expected true or false, got %s", describe(raw))
	return false, false
}

// describe names the JSON type of raw for "got …", with the value of short
// strings and numbers (quoted: they are bytes from the list).
func describe(raw json.RawMessage) string {
	k := jsonpath.Kind(raw)
	raw, short := jsonpath.Short(raw)
	switch {
	case k == "string" && short:
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "string " + q(s)
		}
	case k == "number" && short:
		return "number " + string(raw)
	}
	return k
}

// unknownField refuses a field loopd's form does not have, suggesting the
// one most likely meant.
func (p *parser) unknownField(m member, owner string, known []string) {
	if s, ok := closest(m.key, known); ok {
		p.fail(m.path, "unknown field in %s (did you mean %s?)", owner, s)
		return
	}
	p.fail(m.path, "unknown field in %s (fields: %s)", owner, strings.Join(known, ", "))
}
