package stop

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValidateReportsEveryProblemWithItsPath(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, "check.sh", "#!/bin/sh\n", 0o755)
	writeFile(t, ws, "plain.sh", "#!/bin/sh\n", 0o644)

	cases := []struct {
		name string
		set  Set
		want []string
	}{
		{"valid", Set{
			Conditions:        everyValid(),
			SuccessConditions: []Condition{And(AllTestsPass{}, CustomScript{Script: "check.sh"})},
			FailureConditions: []Condition{MaxConsecutiveFailures{Phase: "review", Limit: 2}},
		}, nil},
		{"empty any", Set{Conditions: []Condition{MaxIterations{Count: 1}, Any{}}},
			[]string{"conditions[1]: any needs at least one condition"}},
		{"empty all, nested", Set{SuccessConditions: []Condition{Or(Never{}, All{})}},
			[]string{"success_conditions[0].conditions[1]: all needs at least one condition"}},
		{"zero counts", Set{Conditions: []Condition{
			MaxIterations{}, TestFailureStreak{Count: -2}, NoProgress{}, MaxTokens{}, MaxInputTokens{}, MaxOutputTokens{}, StuckTask{},
		}}, []string{
			"conditions[0].count: must be at least 1 (got 0)",
			"conditions[1].count: must be at least 1 (got -2)",
			"conditions[2].iterations: must be at least 1 (got 0)",
			"conditions[3].count: must be at least 1 (got 0)",
			"conditions[4].count: must be at least 1 (got 0)",
			"conditions[5].count: must be at least 1 (got 0)",
			"conditions[6].count: must be at least 1 (got 0)",
		}},
		{"bad regex", Set{Conditions: []Condition{OutputPattern{Pattern: "a(b", IsRegex: true}}},
			[]string{"conditions[0].pattern: invalid regex: error parsing regexp: missing closing ): `a(b`"}},
		{"empty pattern", Set{Conditions: []Condition{OutputPattern{}}}, []string{"conditions[0].pattern: must not be empty"}},
		{"scripts", Set{FailureConditions: []Condition{
			CustomScript{Script: "missing.sh"}, CustomScript{Script: "plain.sh"}, CustomScript{}, CustomScript{Script: "/bin/true"},
		}}, []string{
			`failure_conditions[0].script: script "missing.sh" not found in the workspace`,
			`failure_conditions[1].script: script "plain.sh" is not executable (chmod +x plain.sh)`,
			`failure_conditions[2].script: must not be empty`,
			`failure_conditions[3].script: "/bin/true" must be a relative path inside the workspace`,
		}},
		{"money and time", Set{Conditions: []Condition{MaxCost{}, MaxCost{Dollars: -1}, MaxDuration{}, MaxDuration{Duration: -time.Second}}},
			[]string{
				"conditions[0].dollars: must be greater than 0 (got 0)",
				"conditions[1].dollars: must be greater than 0 (got -1)",
				"conditions[2].duration: must be positive (got 0s)",
				"conditions[3].duration: must be positive (got -1s)",
			}},
		{"phases", Set{FailureConditions: []Condition{
			MaxConsecutiveFailures{Phase: "verify", Limit: 3}, MaxConsecutiveFailures{Phase: "deploy", Limit: 0},
		}}, []string{
			`failure_conditions[0].phase: unknown phase "verify" (did you mean verification?)`,
			`failure_conditions[1].phase: unknown phase "deploy" (want implementation, review or verification)`,
			`failure_conditions[1].limit: must be at least 1 (got 0)`,
		}},
		{"tests", Set{SuccessConditions: []Condition{SpecificTestsPass{}, SpecificTestsPass{Tests: []string{"ok", " ", "[x"}}}},
			[]string{
				"success_conditions[0].tests: needs at least one test name",
				"success_conditions[1].tests[1]: empty test name",
				`success_conditions[1].tests[2]: bad glob pattern "[x"`,
			}},
		{"paths", Set{Conditions: []Condition{FileCreated{}, FileContains{Path: "../x", Content: "y"}, FileContains{Path: "x"}}},
			[]string{
				"conditions[0].path: must not be empty",
				`conditions[1].path: "../x" must be a relative path inside the workspace`,
				"conditions[2].content: must not be empty (use file_created to wait for the file)",
			}},
		{"not and nil", Set{Conditions: []Condition{Not(nil), nil, Not(Any{})}}, []string{
			"conditions[0]: not needs a condition",
			"conditions[1]: missing condition",
			"conditions[2].condition: any needs at least one condition",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.set.Validate(ws)
			got := []string{}
			if err != nil {
				for _, e := range unwrapAll(err) {
					var ve *ValidationError
					if !errors.As(e, &ve) {
						t.Errorf("%T is not a *ValidationError", e)
					}
					got = append(got, e.Error())
				}
			}
			want := tc.want
			if want == nil {
				want = []string{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}

	t.Run("without a workspace the file system is not consulted", func(t *testing.T) {
		if err := (Set{Conditions: []Condition{CustomScript{Script: "missing.sh"}}}).Validate(""); err != nil {
			t.Errorf("got %v", err)
		}
	})
}

// everyValid is everyType with the workspace-dependent conditions left out.
func everyValid() []Condition {
	var out []Condition
	for _, c := range everyType() {
		if _, ok := c.(CustomScript); !ok {
			out = append(out, c)
		}
	}
	return out
}

func TestValidateModels(t *testing.T) {
	s := Set{Conditions: []Condition{MaxCost{Dollars: 1, Model: "gpt-4o"}, Or(Never{}, MaxCost{Dollars: 1, Model: "gpt-9"})}}
	err := s.ValidateModels(DefaultPrices())
	if err == nil || !strings.HasPrefix(err.Error(), `conditions[1].conditions[1].model: model "gpt-9" is not in the pricing table`) {
		t.Fatalf("got %v", err)
	}
	p := DefaultPrices()
	p.Override("gpt-9", Price{Input: 1, Output: 2})
	if err := s.ValidateModels(p); err != nil {
		t.Errorf("after override: %v", err)
	}
}

func TestMergeAndShorthands(t *testing.T) {
	h := Shorthands{
		MaxIterations: 50, MaxDuration: 2 * time.Hour, MaxTokens: 1000, MaxCost: 5,
		MaxConsecutiveFailures: map[string]int{"verification": 3, "implementation": 3, "review": 0},
		MaxTaskFailures:        3,
	}
	s := h.Set()
	want := Set{
		Conditions: []Condition{MaxIterations{Count: 50}, MaxDuration{Duration: 2 * time.Hour}, MaxTokens{Count: 1000}, MaxCost{Dollars: 5}},
		FailureConditions: []Condition{
			MaxConsecutiveFailures{Phase: "implementation", Limit: 3},
			MaxConsecutiveFailures{Phase: "verification", Limit: 3},
			StuckTask{Count: 3},
		},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("Shorthands.Set() = %#v", s)
	}
	if err := s.Validate(""); err != nil {
		t.Errorf("shorthand conditions invalid: %v", err)
	}

	file := Set{
		Conditions:        []Condition{MaxIterations{Count: 10}},
		SuccessConditions: []Condition{AllTestsPass{}},
		StopOnFirst:       true,
	}
	s.Merge(file)
	if len(s.Conditions) != 5 || s.Conditions[4] != (MaxIterations{Count: 10}) || s.Conditions[0] != (MaxIterations{Count: 50}) {
		t.Errorf("merged limits %v", s.Conditions)
	}
	if len(s.SuccessConditions) != 1 || len(s.FailureConditions) != 3 || !s.StopOnFirst {
		t.Errorf("merged %#v", s)
	}
	if s.Len() != 9 {
		t.Errorf("Len = %d", s.Len())
	}
	if (Shorthands{}).Set().Len() != 0 {
		t.Error("zero shorthands add conditions")
	}
}

func TestSetUsesLooksAtEveryDepth(t *testing.T) {
	var s Set
	s.Add(ClassLimit, MaxIterations{Count: 5})
	s.Add(ClassSuccess, All{Conditions: []Condition{FileCreated{Path: "done.txt"}, Not(Any{Conditions: []Condition{
		OutputPattern{Pattern: "FAIL"}, NoProgress{Iterations: 3}}})}})
	s.Add(ClassFailure, Negation{}) // a missing "not" is invalid, but must not panic here
	for _, typ := range []Type{TypeMaxIterations, TypeFileCreated, TypeOutputPattern, TypeNoProgress} {
		if !s.Uses(typ) {
			t.Errorf("Uses(%s) = false, want true", typ)
		}
	}
	for _, typ := range []Type{TypeCustomScript, TypeMaxCost} {
		if s.Uses(typ) {
			t.Errorf("Uses(%s) = true, want false", typ)
		}
	}
	if (Set{}).Uses(TypeMaxIterations) {
		t.Error("an empty set uses nothing")
	}
}
