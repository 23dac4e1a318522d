package scheduler

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loopd/loopd/internal/stop"
)

// Seed 001, testing requirement 7: every evaluation is logged, at debug level, with
// the run, step, iteration, verdict and every condition's result. (The progress and
// verdict an evaluation reports are tested in internal/stop.)
func TestEvaluationLogReportsEveryEvaluation(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	e := stop.NewEvaluator(stop.Set{Conditions: []stop.Condition{stop.MaxIterations{Count: 2}}}, stop.Options{})
	logEvaluation(log, false, e.Evaluate(t.Context(), stop.Context{RunID: "r", Step: 10, Iteration: 1}), nil)
	logEvaluation(log, false, e.Evaluate(t.Context(), stop.Context{RunID: "r", Step: 11, Iteration: 2}), nil)

	entries := logs.FilterMessage("stop conditions evaluated").All()
	if len(entries) != 2 {
		t.Fatalf("%d evaluation log entries, want 2", len(entries))
	}
	last := entries[1]
	fields := last.ContextMap()
	if last.Level != zapcore.DebugLevel || fields["run"] != "r" || fields["step"] != int64(11) || fields["iteration"] != int64(2) || fields["stop"] != "max_iterations:2" {
		t.Errorf("log entry %v %v", last.Level, fields)
	}
	conds, _ := fields["conditions"].([]any)
	if len(conds) != 1 || conds[0].(map[string]any)["met"] != true {
		t.Errorf("per-condition log fields %v", fields["conditions"])
	}

	t.Run("Debug logs at info level", func(t *testing.T) {
		core, logs := observer.New(zapcore.InfoLevel)
		e := stop.NewEvaluator(stop.Set{Conditions: []stop.Condition{stop.Never{}}}, stop.Options{})
		logEvaluation(zap.New(core), true, e.Evaluate(t.Context(), stop.Context{RunID: "r"}), nil)
		if logs.Len() != 1 {
			t.Errorf("%d entries", logs.Len())
		}
		core, logs = observer.New(zapcore.InfoLevel)
		e = stop.NewEvaluator(stop.Set{Conditions: []stop.Condition{stop.Never{}}}, stop.Options{})
		logEvaluation(zap.New(core), false, e.Evaluate(t.Context(), stop.Context{RunID: "r"}), nil)
		if logs.Len() != 0 {
			t.Errorf("logged at info without Debug: %d entries", logs.Len())
		}
	})
}

// The redaction rewrites what the evaluation log says of each result, not the
// results.
func TestEvaluationLogIsRedacted(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := stop.NewEvaluator(stop.Set{Conditions: []stop.Condition{stop.MaxIterations{Count: 4}}}, stop.Options{})
	ev := e.Evaluate(t.Context(), stop.Context{RunID: "r", Iteration: 1})
	logEvaluation(zap.New(core), false, ev, func(s string) string { return strings.ReplaceAll(s, "1/4", "[REDACTED:N]") })
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
