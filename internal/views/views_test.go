package views

import (
	"encoding/json"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
)

func TestStepRunningAndEnded(t *testing.T) {
	pid, files := 42, 2
	running := &storage.Step{ID: 1, RunID: "r", Seq: 3, Phase: api.PhaseImplementation, Status: api.StepRunning,
		StartedAt: 1000, Pid: &pid}
	got := Step(running, 1500)
	if got.DurationMS != 500 || got.Pid != 42 || got.EndedAt.Time.IsZero() == false || got.Changes != nil {
		t.Fatalf("running step: %+v", got)
	}
	if Step(running, 900).DurationMS != 0 {
		t.Fatal("a clock behind the step's start must not give a negative duration")
	}
	end := int64(4000)
	cost := 0.25
	ended := &storage.Step{ID: 1, Status: api.StepSucceeded, StartedAt: 1000, EndedAt: &end, Pid: &pid,
		Outcome: storage.Outcome{FilesChanged: &files, ChangeCommit: "abc", UsageFound: true, ReportedCostUSD: &cost}}
	got = Step(ended, 99999)
	if got.DurationMS != 3000 || got.Pid != 0 {
		t.Fatalf("ended step: duration %d pid %d", got.DurationMS, got.Pid)
	}
	if got.Changes == nil || got.Changes.FilesChanged != 2 || got.Changes.Commit != "abc" || got.Changes.Files == nil {
		t.Fatalf("changes: %+v", got.Changes)
	}
	if got.Usage.CostUSD != 0.25 || got.Usage.ReportedCostUSD == nil || got.Usage.CostUnknown {
		t.Fatalf("usage: %+v", got.Usage)
	}
}

func TestStepUsageUnknownCost(t *testing.T) {
	u := StepUsage(&storage.Step{Outcome: storage.Outcome{UsageFound: true, InputTokens: 10}})
	if !u.CostUnknown || u.InputTokens != 10 {
		t.Fatalf("usage found without a price or a reported cost must be unknown: %+v", u)
	}
	priced, reported := 1.5, 2.0
	if u := StepUsage(&storage.Step{Outcome: storage.Outcome{PricedCostUSD: &priced, ReportedCostUSD: &reported}}); u.CostUSD != 1.5 {
		t.Fatalf("the priced cost wins over the reported one: %+v", u)
	}
}

func TestStepTests(t *testing.T) {
	if StepTests(&storage.Step{}) != nil {
		t.Fatal("no format: no tests")
	}
	three, one := 3, 1
	got := StepTests(&storage.Step{Outcome: storage.Outcome{TestsFormat: "go", TestsPassed: &three, TestsFailed: &one, TestsFailedNames: []string{"TestX"}}})
	if got == nil || *got.Failed != 1 || got.Summary == "" || got.FailedNames[0] != "TestX" {
		t.Fatalf("tests: %+v", got)
	}
	if got := StepTests(&storage.Step{Outcome: storage.Outcome{TestsFormat: "go", TestsPassed: &three}}); got.FailedNames == nil {
		t.Fatal("failed names must encode as [], not null")
	}
}

func TestRunWaitUntilOnlyWhileWaiting(t *testing.T) {
	until := int64(5000)
	r := storage.Run{ID: "r", Status: api.RunPaused, WaitUntil: &until, Condition: `{"type":"max_iterations"}`}
	got := Run(r)
	if !got.WaitUntil.Time.IsZero() {
		t.Fatalf("a paused run shows no wait: %+v", got.WaitUntil)
	}
	if got.Conditions == nil || string(got.Condition) != r.Condition {
		t.Fatalf("run: %+v", got)
	}
	r.Status = api.RunWaiting
	if Run(r).WaitUntil.Time.IsZero() {
		t.Fatal("a waiting run shows its wait")
	}
}

func TestEvent(t *testing.T) {
	step := int64(7)
	got := Event(storage.Event{Seq: 3, RunID: "r", StepID: &step, Type: "STEP_STARTED", TS: 1000, Payload: `{"seq":1}`})
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back["type"] != "STEP_STARTED" || back["payload"].(map[string]any)["seq"] != 1.0 {
		t.Fatalf("event JSON: %s", b)
	}
}

func TestConditionsNotEvaluatedThenStored(t *testing.T) {
	set, err := stop.DecodeSet([]byte(`{"conditions":[{"type":"max_iterations","count":3}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Conditions(nil, set)
	if err != nil || len(got) != 1 || got[0].Reason != "not evaluated yet" || got[0].Type != "max_iterations" {
		t.Fatalf("not evaluated: %+v %v", got, err)
	}
	results := `[{"condition":{"type":"max_iterations","count":3},"class":"limit","met":false,"reason":"1 of 3","description":"after 3 iterations","duration_ns":2000}]`
	got, err = Conditions(&storage.Evaluation{Results: results}, set)
	if err != nil || len(got) != 1 || got[0].Reason != "1 of 3" || got[0].Kind != "limit" || got[0].DurationUS != 2 {
		t.Fatalf("stored: %+v %v", got, err)
	}
	// An evaluation of another set (a resume changed the conditions) is
	// not shown against this one.
	got, _ = Conditions(&storage.Evaluation{Results: "[]"}, set)
	if got[0].Reason != "not evaluated yet" {
		t.Fatalf("an evaluation of another set was shown: %+v", got)
	}
	// Nor one of a set with as many conditions but another spec: after a
	// resume --set max_iterations=7 the evaluation made under 3 is stale,
	// and status must not show the old limit until the next step ends.
	raised, err := stop.DecodeSet([]byte(`{"conditions":[{"type":"max_iterations","count":7}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = Conditions(&storage.Evaluation{Results: results}, raised)
	if got[0].Reason != "not evaluated yet" || string(got[0].Spec) != `{"type":"max_iterations","count":7}` {
		t.Fatalf("an evaluation of the old limit was shown against the raised one: %+v %s", got, got[0].Spec)
	}
	// A result naming another class or position does not match either.
	moved := `[{"condition":{"type":"max_iterations","count":3},"class":"success","index":0,"met":false,"reason":"1 of 3","description":"after 3 iterations"}]`
	if got, _ = Conditions(&storage.Evaluation{Results: moved}, set); got[0].Reason != "not evaluated yet" {
		t.Fatalf("an evaluation of a condition in another class was shown: %+v", got)
	}
	if _, err := Conditions(&storage.Evaluation{Results: "{"}, set); err == nil {
		t.Fatal("a corrupt evaluation must be an error")
	}
	ev := Evaluation(storage.Evaluation{Iteration: 2, Results: results, DurationUS: 9})
	if ev.Iteration != 2 || len(ev.Results) != 1 || ev.DurationUS != 9 {
		t.Fatalf("evaluation: %+v", ev)
	}
}
