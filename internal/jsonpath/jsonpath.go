// Package jsonpath holds what loopd's strict JSON decoders share — the
// stop conditions of .loop/stop.json (internal/stop) and a backlog's task
// list (internal/backlog): one top-level value with the line and column
// of what is wrong, the JSON type of a raw value, and the paths their
// errors name (conditions[2].count). Each decoder words its own
// messages; what it reads them from is found here once.
package jsonpath

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// Kind names the JSON type of a valid raw value: object, array, string,
// boolean, null or number; "nothing" for no value at all.
func Kind(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// ShortLen is the most bytes of a value an error shows ("got string
// \"yes\""): more is named by its kind alone.
const ShortLen = 40

// Short returns raw without the space around it, and whether it is short
// enough (ShortLen) to show in an error.
func Short(raw json.RawMessage) (json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	return raw, len(raw) <= ShortLen
}

// Index is path's element i: path[i].
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// SyntaxError is why a document is not exactly one JSON value.
type SyntaxError struct {
	Line, Col int   // where the problem is, from 1 (0 for the end of input)
	Trailing  bool  // a second value, or other data, after the first
	EOF       bool  // the input ended inside the value
	Err       error // the decoder's error otherwise (a *json.SyntaxError when Line is set)
}

// Top returns the one JSON value data holds, or why it does not hold
// exactly one.
func Top(data []byte) (json.RawMessage, *SyntaxError) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			line, col := lineCol(data, se.Offset-1) // Offset is just past the bad byte
			return nil, &SyntaxError{Line: line, Col: col, Err: err}
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, &SyntaxError{EOF: true}
		}
		return nil, &SyntaxError{Err: err}
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		rest := data[end:]
		line, col := lineCol(data, end+int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n"))))
		return nil, &SyntaxError{Line: line, Col: col, Trailing: true}
	}
	return raw, nil
}

// lineCol is the line and column, from 1, of byte offset in data.
func lineCol(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
