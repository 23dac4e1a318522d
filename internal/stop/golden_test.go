package stop

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden files from the current encoding")

// goldenConditions holds every condition type with representative and edge values:
// zero and extreme numbers, floats json writes in exponent form, text json escapes
// (HTML, quotes, control characters, non-ASCII), nil and empty lists, nil children, and
// values json refuses (NaN, ±Inf), whose error text is kept too.
func goldenConditions() []Condition {
	return append(everyType(),
		MaxIterations{},
		MaxIterations{Count: -3},
		MaxIterations{Count: math.MaxInt},
		MaxDuration{},
		MaxDuration{Duration: -90 * time.Second},
		MaxDuration{Duration: 36*time.Hour + 7*time.Millisecond + 3},
		MaxDuration{Duration: math.MaxInt64},
		TestFailureStreak{},
		SpecificTestsPass{},
		SpecificTestsPass{Tests: []string{}},
		SpecificTestsPass{Tests: []string{"", "a<b>&c", "Ünïcödé/Tëst", "tab\there", `q"uote\`}},
		NoProgress{Iterations: -1},
		FileCreated{},
		FileCreated{Path: "dir with space/<x>&y.md"},
		FileContains{Path: "a", Content: "line1\nline2\u2028\u2029\x01"},
		OutputPattern{},
		OutputPattern{Pattern: `<script>alert("x")</script> & \d+`, IsRegex: true},
		OnError{Pattern: "é & <b>"},
		CustomScript{},
		CustomScript{Script: "s.sh", Args: []string{}},
		CustomScript{Script: "s.sh", Args: []string{"", "--flag=<v>"}},
		All{},
		All{Conditions: []Condition{}},
		All{Conditions: []Condition{nil, Never{}}},
		Any{},
		Any{Conditions: []Condition{All{Conditions: []Condition{Not(UserSignal{}), MaxCost{Dollars: 1e-7}}}}},
		Negation{},
		Not(Not(Any{Conditions: []Condition{nil}})),
		MaxTokens{Count: math.MaxInt64},
		MaxTokens{Count: math.MinInt64},
		MaxInputTokens{},
		MaxOutputTokens{Count: -1},
		MaxCost{},
		MaxCost{Dollars: math.Copysign(0, -1)},
		MaxCost{Dollars: math.NaN()},
		MaxCost{Dollars: math.Inf(1)},
		All{Conditions: []Condition{MaxCost{Dollars: math.Inf(-1)}}},
		MaxCost{Dollars: 1e21},
		MaxCost{Dollars: 1e20},
		MaxCost{Dollars: 123456789.125, Model: "claude-<opus>&4"},
		MaxCost{Dollars: 0.000001},
		MaxCost{Dollars: math.SmallestNonzeroFloat64},
		MaxCost{Dollars: math.MaxFloat64},
		MaxConsecutiveFailures{},
		MaxConsecutiveFailures{Phase: "implementation", Limit: 1},
		MaxConsecutiveFailures{Phase: "no such phase", Limit: -2},
		StuckTask{},
	)
}

// The JSON of every condition, alone and inside the structs that carry one, is exactly
// what it was when this test was written (testdata/golden/conditions.json): encoding
// may be reorganised, its bytes may not change. -update rewrites the file.
func TestConditionEncodingIsGolden(t *testing.T) {
	var b bytes.Buffer
	line := func(what string, data []byte, err error) {
		t.Helper()
		if err != nil {
			data = []byte("error: " + err.Error())
		}
		b.WriteString(what + "\t")
		b.Write(data)
		b.WriteByte('\n')
	}
	for _, c := range goldenConditions() {
		data, err := c.MarshalJSON()
		line("MarshalJSON", data, err)
		data, err = json.Marshal(c)
		line("json.Marshal", data, err)
		var ind bytes.Buffer
		enc := json.NewEncoder(&ind)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", " ")
		err = enc.Encode(map[string]any{"c": c})
		line("Encoder", bytes.ReplaceAll(ind.Bytes(), []byte("\n"), []byte(`\n`)), err)
		line("Description", []byte(c.Description()), nil)
		line("Reason", []byte(c.Reason()), nil)
	}
	all := goldenConditions()
	set := Set{Conditions: all[:20], SuccessConditions: all[20:45], FailureConditions: all[45:], StopOnFirst: true}
	data, err := json.Marshal(set)
	line("Set", data, err)
	data, err = json.Marshal(Set{})
	line("Set{}", data, err)
	p := 0.25
	ev := Evaluation{RunID: "r", Step: 3, Iteration: 2, At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Duration: time.Millisecond,
		Results: []Result{
			{Condition: Or(MaxIterations{Count: 4}, FileCreated{Path: "<d>"}), Class: ClassSuccess, Index: 1, Progress: &p, Reason: "1/4", Description: "d"},
			{Class: ClassLimit},
		},
		Stop:       &Verdict{Condition: MaxCost{Dollars: 2.5, Model: "m"}, Class: ClassLimit, Reason: "max_cost:2.50"},
		Progressed: []Progress{{Condition: Not(Never{}), Class: ClassFailure, Current: 1, Delta: 1}},
	}
	data, err = json.Marshal(ev)
	line("Evaluation", data, err)

	path := filepath.Join("testdata", "golden", "conditions.json")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestConditionEncodingIsGolden -update once, on the encoding to keep)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		got := bytes.Split(b.Bytes(), []byte("\n"))
		for i, w := range bytes.Split(want, []byte("\n")) {
			if i >= len(got) || !bytes.Equal(got[i], w) {
				var g []byte
				if i < len(got) {
					g = got[i]
				}
				t.Fatalf("line %d of %s changed:\n got %s\nwant %s", i+1, path, g, w)
			}
		}
		t.Fatalf("%s: %d lines, want %d", path, len(got), bytes.Count(want, []byte("\n"))+1)
	}
}

// appendString writes every byte as encoding/json does, on the fast path and off it.
func TestAppendStringIsJSON(t *testing.T) {
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	cases := []string{"", "plain ASCII 0-9 ~!@#$%^*()_+", string(all), "é", "\u2028", "\xff", `a"b`, `a\b`, "<&>", "\x7f"}
	for c := range 256 {
		cases = append(cases, "x"+string(rune(c))+"y", string([]byte{byte(c)}))
	}
	for _, s := range cases {
		want, _ := json.Marshal(s)
		got, err := appendString([]byte("prefix"), s)
		if err != nil || string(got) != "prefix"+string(want) {
			t.Errorf("appendString(%q) = %s, %v; want prefix%s", s, got, err, want)
		}
	}
}

// appendFloat writes every float64 as encoding/json does, NaN and ±Inf errors included.
func TestAppendFloatIsJSON(t *testing.T) {
	cases := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 12.5, 1e-6, 9.99999e-7, 1e-7, -1e-7, 1e-10, 1e-100, 1e-320,
		1e20, 1e21, 1.5e21, -1e21, 123456789.125, 1.0 / 3, math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.NaN(), math.Inf(1), math.Inf(-1)}
	for e := -330; e <= 310; e += 7 {
		cases = append(cases, 1.2345*math.Pow(10, float64(e)), -math.Pow(10, float64(e)))
	}
	for _, f := range cases {
		want, wantErr := json.Marshal(f)
		got, err := appendFloat(nil, f)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) || (err == nil && string(got) != string(want)) {
			t.Errorf("appendFloat(%v) = %s, %v; want %s, %v", f, got, err, want, wantErr)
		}
	}
}

// FuzzAppendMatchesEncodingJSON checks the encoder's fast paths against
// encoding/json, byte for byte: strings, string lists and floats.
func FuzzAppendMatchesEncodingJSON(f *testing.F) {
	f.Add("plain", "a<b>&\"c\\", 12.5)
	f.Add("", "\u2028\xff\x00", 1e-7)
	f.Add("é", "x", 1e21)
	f.Fuzz(func(t *testing.T, a, b string, x float64) {
		for _, s := range []string{a, b} {
			want, _ := json.Marshal(s)
			if got, _ := appendString(nil, s); string(got) != string(want) {
				t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
			}
		}
		want, wantErr := json.Marshal(x)
		got, err := appendFloat(nil, x)
		if (err == nil) != (wantErr == nil) || (err == nil && string(got) != string(want)) {
			t.Fatalf("appendFloat(%v) = %s, %v; want %s, %v", x, got, err, want, wantErr)
		}
		c := CustomScript{Script: a, Args: []string{a, b}}
		type plain struct {
			Type   Type     `json:"type"`
			Script string   `json:"script"`
			Args   []string `json:"args"`
		}
		wantC, _ := json.Marshal(plain{c.Type(), c.Script, c.Args})
		if gotC, _ := c.MarshalJSON(); string(gotC) != string(wantC) {
			t.Fatalf("%#v encodes as %s, want %s", c, gotC, wantC)
		}
	})
}
