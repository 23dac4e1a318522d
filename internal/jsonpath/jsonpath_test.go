package jsonpath

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestKind(t *testing.T) {
	for raw, want := range map[string]string{
		`{"a":1}`: "object", ` [1]`: "array", "\n\"s\"": "string", `true`: "boolean", `false`: "boolean",
		`null`: "null", `-1.5e3`: "number", `7`: "number", ``: "nothing", " \t\r\n": "nothing",
	} {
		if got := Kind(json.RawMessage(raw)); got != want {
			t.Errorf("Kind(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestShort(t *testing.T) {
	if raw, ok := Short(json.RawMessage("  \"yes\"\n")); !ok || string(raw) != `"yes"` {
		t.Errorf("Short of a padded short string = %q, %v", raw, ok)
	}
	long := `"` + strings.Repeat("x", ShortLen-1) + `"`
	if _, ok := Short(json.RawMessage(long)); ok {
		t.Errorf("Short of %d bytes = ok; the limit is %d", len(long), ShortLen)
	}
	if _, ok := Short(json.RawMessage(long[1:])); !ok {
		t.Errorf("Short of %d bytes refused; the limit is %d", len(long)-1, ShortLen)
	}
}

func TestIndex(t *testing.T) {
	if got := Index("conditions", 2); got != "conditions[2]" {
		t.Errorf("Index = %q", got)
	}
	if got := Index("", 0); got != "[0]" {
		t.Errorf("Index of the top = %q", got)
	}
}

// Top finds the one value, or says where and why there is not exactly one.
func TestTop(t *testing.T) {
	for _, tt := range []struct {
		name, data string
		want       SyntaxError // zero: the value is returned
		errHas     string
	}{
		{name: "one value", data: " {\"a\": [1, 2]}\n"},
		{name: "a syntax error on line 2", data: "{\n  \"conditions\": [,]\n}", want: SyntaxError{Line: 2, Col: 18}, errHas: "invalid character ','"},
		{name: "a second value", data: "{}\n  {}", want: SyntaxError{Line: 2, Col: 3, Trailing: true}},
		{name: "trailing garbage", data: `[1] x`, want: SyntaxError{Line: 1, Col: 5, Trailing: true}},
		{name: "empty", data: ``, want: SyntaxError{EOF: true}},
		{name: "cut short", data: `{"a": [1,`, want: SyntaxError{EOF: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw, se := Top([]byte(tt.data))
			if tt.want == (SyntaxError{}) {
				if se != nil || strings.TrimSpace(string(raw)) != strings.TrimSpace(tt.data) {
					t.Fatalf("Top = %q, %+v; want the value", raw, se)
				}
				return
			}
			if se == nil {
				t.Fatalf("Top = %q; want %+v", raw, tt.want)
			}
			if se.Line != tt.want.Line || se.Col != tt.want.Col || se.Trailing != tt.want.Trailing || se.EOF != tt.want.EOF {
				t.Errorf("Top = %+v; want %+v", se, tt.want)
			}
			if tt.errHas != "" && (se.Err == nil || !strings.Contains(se.Err.Error(), tt.errHas)) {
				t.Errorf("Top's error = %v; want it to say %q", se.Err, tt.errHas)
			}
		})
	}
}
