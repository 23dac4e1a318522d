package stop

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestConditionJSONCanonicalForm(t *testing.T) {
	cases := []struct {
		cond Condition
		want string
	}{
		{MaxIterations{Count: 5}, `{"type":"max_iterations","count":5}`},
		{MaxDuration{Duration: 2*time.Hour + 30*time.Minute}, `{"type":"max_duration","duration":"2h 30m"}`},
		{TestFailureStreak{Count: 3}, `{"type":"test_failure_streak","count":3}`},
		{AllTestsPass{}, `{"type":"all_tests_pass"}`},
		{SpecificTestsPass{Tests: []string{"a", "b"}}, `{"type":"specific_tests_pass","tests":["a","b"]}`},
		{SpecificTestsPass{}, `{"type":"specific_tests_pass","tests":[]}`},
		{NoProgress{Iterations: 4}, `{"type":"no_progress","iterations":4}`},
		{FileCreated{Path: "DONE.md"}, `{"type":"file_created","path":"DONE.md"}`},
		{FileContains{Path: "a.txt", Content: "ok"}, `{"type":"file_contains","path":"a.txt","content":"ok"}`},
		{OutputPattern{Pattern: "x"}, `{"type":"output_pattern","pattern":"x","is_regex":false}`},
		{OutputPattern{Pattern: "x+", IsRegex: true}, `{"type":"output_pattern","pattern":"x+","is_regex":true}`},
		{OnError{}, `{"type":"on_error"}`},
		{OnError{Pattern: "boom"}, `{"type":"on_error","pattern":"boom"}`},
		{CustomScript{Script: "c.sh"}, `{"type":"custom_script","script":"c.sh","args":[]}`},
		{CustomScript{Script: "c.sh", Args: []string{"-v"}}, `{"type":"custom_script","script":"c.sh","args":["-v"]}`},
		{UserSignal{}, `{"type":"user_signal"}`},
		{And(MaxIterations{Count: 1}, Never{}), `{"type":"all","conditions":[{"type":"max_iterations","count":1},{"type":"never"}]}`},
		{Or(UserSignal{}, AllTestsPass{}), `{"type":"any","conditions":[{"type":"user_signal"},{"type":"all_tests_pass"}]}`},
		{Not(UserSignal{}), `{"type":"not","condition":{"type":"user_signal"}}`},
		{Never{}, `{"type":"never"}`},
		{MaxTokens{Count: 1000000}, `{"type":"max_tokens","count":1000000}`},
		{MaxInputTokens{Count: 7}, `{"type":"max_input_tokens","count":7}`},
		{MaxOutputTokens{Count: 8}, `{"type":"max_output_tokens","count":8}`},
		{MaxCost{Dollars: 5}, `{"type":"max_cost","dollars":5}`},
		{MaxCost{Dollars: 0.25, Model: "gpt-4o"}, `{"type":"max_cost","dollars":0.25,"model":"gpt-4o"}`},
		{MaxConsecutiveFailures{Phase: "verification", Limit: 3}, `{"type":"max_consecutive_failures","phase":"verification","limit":3}`},
		{StuckTask{Count: 3}, `{"type":"stuck_task","count":3}`},
	}
	seen := map[Type]bool{}
	for _, tc := range cases {
		seen[tc.cond.Type()] = true
		got, err := json.Marshal(tc.cond)
		if err != nil {
			t.Fatalf("%T: %v", tc.cond, err)
		}
		if string(got) != tc.want {
			t.Errorf("encode %T:\n got %s\nwant %s", tc.cond, got, tc.want)
		}
	}
	for _, typ := range Types() {
		if !seen[typ] {
			t.Errorf("type %s has no canonical-form case", typ)
		}
	}
}

func TestConditionJSONRoundTripEveryType(t *testing.T) {
	seen := map[Type]bool{}
	for _, c := range everyType() {
		seen[c.Type()] = true
		t.Run(string(c.Type()), func(t *testing.T) {
			enc, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeCondition(enc)
			if err != nil {
				t.Fatalf("decode %s: %v", enc, err)
			}
			again, err := json.Marshal(back)
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != string(enc) {
				t.Errorf("round trip changed the JSON:\n%s\n%s", enc, again)
			}
			if normalise(back) != normalise(c) {
				t.Errorf("round trip changed the value: %#v → %#v", c, back)
			}
		})
	}
	for _, typ := range Types() {
		if !seen[typ] {
			t.Errorf("everyType lacks %s", typ)
		}
	}
}

// normalise prints a condition with nil and empty slices alike.
func normalise(c Condition) string {
	b, _ := json.Marshal(c)
	return string(b)
}

func TestDecodeAcceptsSeedForms(t *testing.T) {
	cases := []struct {
		in   string
		want Condition
	}{
		{`{"type":"max_duration","duration":"2h 30m"}`, MaxDuration{Duration: 150 * time.Minute}},
		{`{"type":"max_duration","duration":"2h30m"}`, MaxDuration{Duration: 150 * time.Minute}},
		{`{"type":"max_duration","duration":"1day"}`, MaxDuration{Duration: 24 * time.Hour}},
		{`{"type":"max_duration","duration":"90s"}`, MaxDuration{Duration: 90 * time.Second}},
		{`{"type":"output_pattern","pattern":"x"}`, OutputPattern{Pattern: "x"}},
		{`{"type":"on_error","pattern":null}`, OnError{}},
		{`{"type":"on_error"}`, OnError{}},
		{`{"type":"custom_script","script":"s"}`, CustomScript{Script: "s"}},
		{`{"count":5,"type":"max_iterations"}`, MaxIterations{Count: 5}},
		{` { "type" : "max_cost" , "dollars" : 1e1 } `, MaxCost{Dollars: 10}},
		{`{"type":"max_cost","dollars":2,"model":null}`, MaxCost{Dollars: 2}},
	}
	for _, tc := range cases {
		got, err := DecodeCondition([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestDecodeSetErrorsCarryJSONPaths(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []string // every error, in order
	}{
		{"unknown type with suggestion", `{"conditions":[{"type":"max_iteration","count":5}]}`,
			[]string{`conditions[0].type: unknown condition type "max_iteration" (did you mean max_iterations?)`}},
		{"unknown type without suggestion", `{"conditions":[{"type":"zzzzzzzzzzzzzzz"}]}`,
			[]string{`conditions[0].type: unknown condition type "zzzzzzzzzzzzzzz" (known types: max_iterations, `}},
		{"unknown field", `{"conditions":[{"type":"max_iterations","cuont":5,"count":5}]}`,
			[]string{`conditions[0].cuont: unknown field for max_iterations (did you mean count?)`}},
		{"field on a bare type", `{"conditions":[{"type":"never","x":1}]}`,
			[]string{`conditions[0].x: unknown field: never has no fields`}},
		{"wrong field type, nested", `{"success_conditions":[{"type":"all","conditions":[{"type":"never"},{"type":"user_signal"},{"type":"max_iterations","count":"5"}]}]}`,
			[]string{`success_conditions[0].conditions[2].count: expected an integer, got string "5"`}},
		{"fraction for an integer", `{"conditions":[{"type":"max_tokens","count":1.5}]}`,
			[]string{`conditions[0].count: expected an integer, got 1.5`}},
		{"integer out of range", `{"conditions":[{"type":"max_tokens","count":99999999999999999999}]}`,
			[]string{`conditions[0].count: integer 99999999999999999999 is out of range`}},
		{"missing field", `{"failure_conditions":[{"type":"max_consecutive_failures","phase":"review"}]}`,
			[]string{`failure_conditions[0]: missing field "limit" for max_consecutive_failures`}},
		{"missing type", `{"conditions":[{"count":5}]}`, []string{`conditions[0]: missing field "type"`}},
		{"type not a string", `{"conditions":[{"type":5}]}`, []string{`conditions[0].type: expected a string, got number`}},
		{"null for a required field", `{"conditions":[{"type":"max_iterations","count":null}]}`,
			[]string{`conditions[0].count: expected an integer, got null`}},
		{"not of nothing", `{"conditions":[{"type":"not","condition":null}]}`,
			[]string{`conditions[0].condition: expected a condition object such as {"type":"max_iterations","count":5}, got null`}},
		{"bad duration", `{"conditions":[{"type":"max_duration","duration":"2 months"}]}`,
			[]string{`conditions[0].duration: unknown unit "months" in "2 months"`}},
		{"duplicate field", `{"conditions":[{"type":"max_iterations","count":1,"count":2}]}`,
			[]string{`conditions[0].count: duplicate field`}},
		{"args not strings", `{"conditions":[{"type":"custom_script","script":"a","args":["x",1]}]}`,
			[]string{`conditions[0].args[1]: expected a string, got number`}},
		{"list not an array", `{"conditions":{"type":"never"}}`, []string{`conditions: expected an array of conditions, got object`}},
		{"unknown top-level field", `{"stop_on_frist":true}`, []string{`stop_on_frist: unknown field for stop.json (did you mean stop_on_first?)`}},
		{"stop_on_first not a bool", `{"stop_on_first":"yes"}`, []string{`stop_on_first: expected true or false, got string "yes"`}},
		{"every problem at once", `{"conditions":[{"type":"nope"},{"type":"max_iterations"}],"failure_conditions":[{"type":"stuck_task","count":true}]}`,
			[]string{`conditions[0].type: unknown condition type "nope"`, `conditions[1]: missing field "count"`, `failure_conditions[0].count: expected an integer, got boolean`}},
		{"syntax error", "{\n  \"conditions\": [,]\n}", []string{`invalid JSON at line 2, column 18: invalid character ','`}},
		{"trailing data", `{} {}`, []string{`invalid JSON at line 1, column 4: data after the top-level value`}},
		{"empty", ``, []string{`invalid JSON: unexpected end of input`}},
		{"not an object", `[]`, []string{`expected an object, got array`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeSet([]byte(tc.in))
			if err == nil {
				t.Fatal("no error")
			}
			got := unwrapAll(err)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors %q, want %d", len(got), got, len(tc.want))
			}
			for i, e := range got {
				var ve *ValidationError
				if !errors.As(e, &ve) {
					t.Errorf("error %d is %T, want *ValidationError", i, e)
				}
				if !strings.HasPrefix(e.Error(), tc.want[i]) {
					t.Errorf("error %d:\n got %s\nwant %s…", i, e, tc.want[i])
				}
			}
		})
	}
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestDecodeSetRejectsDeepNesting(t *testing.T) {
	in := strings.Repeat(`{"type":"not","condition":`, 40) + `{"type":"never"}` + strings.Repeat(`}`, 40)
	_, err := DecodeSet([]byte(`{"conditions":[` + in + `]}`))
	if err == nil || !strings.Contains(err.Error(), "nested more than 32 deep") {
		t.Fatalf("got %v", err)
	}
}

func TestSetJSONRoundTrip(t *testing.T) {
	in := `{
	  "conditions": [{"type": "max_iterations", "count": 10}, {"type": "max_cost", "dollars": 2.5}],
	  "success_conditions": [{"type": "all", "conditions": [{"type": "all_tests_pass"}, {"type": "file_created", "path": "DONE"}]}],
	  "failure_conditions": [{"type": "max_consecutive_failures", "phase": "verification", "limit": 3}],
	  "stop_on_first": true
	}`
	s, err := DecodeSet([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Set{
		Conditions:        []Condition{MaxIterations{Count: 10}, MaxCost{Dollars: 2.5}},
		SuccessConditions: []Condition{All{Conditions: []Condition{AllTestsPass{}, FileCreated{Path: "DONE"}}}},
		FailureConditions: []Condition{MaxConsecutiveFailures{Phase: "verification", Limit: 3}},
		StopOnFirst:       true,
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("decoded %#v", s)
	}
	enc, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Set
	if err := json.Unmarshal(enc, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(back)
	if string(again) != string(enc) {
		t.Errorf("round trip:\n%s\n%s", enc, again)
	}

	empty, _ := json.Marshal(Set{})
	if string(empty) != `{"conditions":[],"success_conditions":[],"failure_conditions":[],"stop_on_first":false}` {
		t.Errorf("empty set encodes as %s", empty)
	}
	if s, err := DecodeSet([]byte(`{}`)); err != nil || s.Len() != 0 {
		t.Errorf("absent lists: %v %v", s, err)
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	p := 0.5
	r := Result{Condition: Or(MaxIterations{Count: 4}, UserSignal{}), Class: ClassSuccess, Index: 2, Progress: &p,
		Reason: "2/4 done", Description: "d", Duration: time.Millisecond, Cached: true}
	enc, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(enc, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("got %#v, want %#v", back, r)
	}
}

// FuzzDecodeSet checks that decoding never panics, that whatever decodes re-encodes
// canonically (encode(decode(encode(x))) == encode(x)), and that validation,
// descriptions, reasons and evaluation of decoded conditions never panic.
func FuzzDecodeSet(f *testing.F) {
	for _, c := range everyType() {
		b, _ := json.Marshal(Set{Conditions: []Condition{c}})
		f.Add(b)
	}
	all, _ := json.Marshal(Set{Conditions: everyType()[:10], SuccessConditions: everyType()[10:20], FailureConditions: everyType()[20:], StopOnFirst: true})
	f.Add(all)
	f.Add([]byte(`{"conditions":[{"type":"max_duration","duration":"1w 2d 3h 4m 5s 6ms 7us 8ns"}]}`))
	f.Add([]byte(`{"conditions":[{"type":"max_duration","duration":"-2562047h 47m 16s 854ms 775us 808ns"}]}`))
	f.Add([]byte(`{"conditions":[{"type":"max_cost","dollars":1e-320}]}`))
	f.Add([]byte(`{"conditions":[{"type":"max_iteration","cuont":5}]}`))
	f.Add([]byte(`{"conditions":[{"type":"all","conditions":[]}],"stop_on_first":false}`))
	ws := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSet(data)
		if err != nil {
			for _, e := range unwrapAll(err) {
				var ve *ValidationError
				if !errors.As(e, &ve) {
					t.Fatalf("error %T %v is not a *ValidationError", e, e)
				}
			}
			return
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("encode %#v: %v", s, err)
		}
		s2, err := DecodeSet(enc)
		if err != nil {
			t.Fatalf("decode of own encoding %s: %v", enc, err)
		}
		enc2, err := json.Marshal(s2)
		if err != nil {
			t.Fatal(err)
		}
		if string(enc) != string(enc2) {
			t.Fatalf("not canonical:\n%s\n%s", enc, enc2)
		}
		_ = s.Validate("")
		_ = s.ValidateModels(DefaultPrices())
		for _, l := range s.lists() {
			for _, c := range l.conds {
				_, _, _ = c.Description(), c.Reason(), c.Priority()
			}
		}
		// Scripts cannot run: the workspace is empty, so they are "not found".
		e := NewEvaluator(s, Options{ConditionTimeout: time.Second})
		ev := e.Evaluate(t.Context(), Context{RunID: "r", Step: 1, Workspace: ws, Iteration: 3, TestsKnown: true,
			PassedTests: []string{"a/b"}, Usage: Usage{InputTokens: 10}})
		if len(ev.Results) > s.Len() {
			t.Fatalf("%d results for %d conditions", len(ev.Results), s.Len())
		}
	})
}
