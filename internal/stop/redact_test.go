package stop

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Options.Redact rewrites what the evaluation log says of each result,
// not the results.
func TestEvaluationLogIsRedacted(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := NewEvaluator(Set{Conditions: []Condition{MaxIterations{Count: 4}}}, Options{Logger: zap.New(core),
		Redact: func(s string) string { return strings.ReplaceAll(s, "1/4", "[REDACTED:N]") }})
	ev := e.Evaluate(t.Context(), Context{RunID: "r", Iteration: 1})
	if ev.Results[0].Reason != "1/4 done" {
		t.Errorf("the result was changed: %q", ev.Results[0].Reason)
	}
	entries := logs.FilterMessage("stop conditions evaluated").All()
	if len(entries) != 1 {
		t.Fatalf("%d entries", len(entries))
	}
	conds, _ := entries[0].ContextMap()["conditions"].([]any)
	if len(conds) != 1 || conds[0].(map[string]any)["reason"] != "[REDACTED:N] done" {
		t.Errorf("logged %v", entries[0].ContextMap()["conditions"])
	}
}
