package stop

import (
	"strings"
	"testing"
)

// The queries that walk a set's condition trees (Uses, CostLimitWithoutModel,
// ValidateModels) reach every depth through all, any and not, skip nil children, and
// name JSON paths the way the decoder does.
func TestSetQueriesWalkEveryDepth(t *testing.T) {
	deep := Set{
		Conditions: []Condition{MaxIterations{Count: 3}},
		SuccessConditions: []Condition{
			All{Conditions: []Condition{nil, Any{Conditions: []Condition{Not(MaxCost{Dollars: 1, Model: "no-such-model"}), Negation{}}}}},
		},
		FailureConditions: []Condition{Not(Not(MaxCost{Dollars: 2}))},
	}
	cases := []struct {
		name string
		got  bool
		want bool
	}{
		{"uses a top-level type", deep.Uses(TypeMaxIterations), true},
		{"uses a composite", deep.Uses(TypeAny), true},
		{"uses a type three deep", deep.Uses(TypeMaxCost), true},
		{"does not use an absent type", deep.Uses(TypeCustomScript), false},
		{"cost limit without a model, two nots deep", deep.CostLimitWithoutModel(), true},
		{"a cost limit with a model does not count", Set{Conditions: []Condition{Any{Conditions: []Condition{MaxCost{Dollars: 1, Model: "m"}}}}}.CostLimitWithoutModel(), false},
		{"no cost limit", Set{Conditions: []Condition{Not(nil), All{}}}.CostLimitWithoutModel(), false},
		{"empty set", Set{}.Uses(TypeNever), false},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}

	err := deep.ValidateModels(DefaultPrices())
	if err == nil {
		t.Fatal("no error for a model missing from the pricing table")
	}
	errs := unwrapAll(err)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(),
		`success_conditions[0].conditions[1].conditions[0].condition.model: model "no-such-model" is not in the pricing table`) {
		t.Errorf("got %q", errs)
	}
}
