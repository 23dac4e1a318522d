// Package views maps loopd's stored rows (package storage) to their wire
// form (package api): one path from a row to the JSON that loopctl, the
// dashboard, followers and postmortems read. Its functions are pure: they
// read nothing but their arguments.
//
// It sits above storage and stop and below the scheduler and the daemon,
// which both use it; loopctl never links it (it would link storage).
package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/testreport"
)

// Run converts a run row to its wire form: the row's own fields only, with
// no aggregates and no conditions yet (the scheduler's Describe adds them).
func Run(r storage.Run) api.Run {
	out := api.Run{
		ID: r.ID, Name: r.Name, Workspace: r.Workspace, Goal: r.Goal, Status: r.Status,
		Reason: r.Reason, Description: r.Description, ExitCode: r.ExitCode,
		CreatedAt: api.Millis(r.CreatedAt), StopRequested: r.StopRequest, PauseRequest: r.PauseRequest,
		UserSignal: r.UserSignal, Conditions: []api.Condition{},
		Isolation: r.Isolation, Worktree: r.Worktree, Branch: r.Branch, BaseBranch: r.BaseBranch,
		BaseCommit: r.BaseCommit, LandedCommit: r.LandedCommit, WorktreeState: r.WorktreeState, RepoURL: r.RepoURL,
		CreatedBy: r.CreatedBy, Worker: r.Worker,
	}
	if r.StartedAt != nil {
		out.StartedAt = api.Millis(*r.StartedAt)
	}
	if r.EndedAt != nil {
		out.EndedAt = api.Millis(*r.EndedAt)
	}
	if r.WaitUntil != nil && r.Status == api.RunWaiting {
		out.WaitUntil = api.Millis(*r.WaitUntil)
	}
	if r.Condition != "" {
		out.Condition = json.RawMessage(r.Condition)
	}
	return out
}

// Step converts a step row to its wire form; now (Unix ms) is used for the
// duration of a step still running.
func Step(st *storage.Step, now int64) api.Step {
	out := api.Step{
		ID: st.ID, RunID: st.RunID, Seq: st.Seq, Phase: st.Phase, Iteration: st.Iteration, Status: st.Status,
		ExitCode: st.ExitCode, Error: st.Error, StartedAt: api.Millis(st.StartedAt), LogPath: st.LogPath,
		Usage: StepUsage(st), Tests: StepTests(st), Promise: st.Promise,
		Question: st.Question, Answer: st.Answer,
	}
	if st.EndedAt != nil {
		out.EndedAt = api.Millis(*st.EndedAt)
		out.DurationMS = *st.EndedAt - st.StartedAt
	} else {
		out.DurationMS = max(now-st.StartedAt, 0)
	}
	if st.Pid != nil && st.Status == api.StepRunning {
		out.Pid = *st.Pid
	}
	out.Changes = StepChanges(st)
	return out
}

// StepChanges is what the change ledger recorded for a step; nil when
// nothing was recorded (not a git workspace, or not an implementation
// step).
func StepChanges(st *storage.Step) *api.Changes {
	if st.FilesChanged == nil {
		return nil
	}
	files := st.ChangeFiles
	if files == nil {
		files = []string{}
	}
	return &api.Changes{Commit: st.ChangeCommit, FilesChanged: *st.FilesChanged,
		Insertions: deref(st.Insertions), Deletions: deref(st.Deletions), BinaryFiles: deref(st.BinaryFiles), Files: files}
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// StepUsage is a step's token usage and cost: the cost priced by loopd
// when it could, else the one the agent reported, else unknown.
func StepUsage(st *storage.Step) api.Usage {
	u := api.Usage{InputTokens: st.InputTokens, OutputTokens: st.OutputTokens, CacheReadTokens: st.CacheReadTokens,
		CacheWriteTokens: st.CacheWriteTokens, Model: st.Model, ReasoningTokens: st.ReasoningTokens}
	if st.ReportedCostUSD != nil {
		v := *st.ReportedCostUSD
		u.ReportedCostUSD = &v
	}
	switch {
	case st.PricedCostUSD != nil:
		u.CostUSD = *st.PricedCostUSD
	case st.ReportedCostUSD != nil:
		u.CostUSD = *st.ReportedCostUSD
	case st.UsageFound:
		u.CostUnknown = true
	}
	return u
}

// StepTests is a verification step's test results; nil when its output
// held none loopd recognises.
func StepTests(st *storage.Step) *api.Tests {
	if st.TestsFormat == "" {
		return nil
	}
	res := testreport.Result{Format: testreport.Format(st.TestsFormat), Passed: st.TestsPassed, Failed: st.TestsFailed,
		Skipped: st.TestsSkipped, FailedNames: st.TestsFailedNames, PassedNames: st.TestsPassedNames}
	names := st.TestsFailedNames
	if names == nil {
		names = []string{}
	}
	out := &api.Tests{Format: st.TestsFormat, Passed: st.TestsPassed, Failed: st.TestsFailed, Skipped: st.TestsSkipped,
		FailedNames: names, Summary: res.Summary()}
	if len(st.TestsIgnoredNames) > 0 {
		out.IgnoredNames = st.TestsIgnoredNames
	}
	return out
}

// Event converts an event row to its wire form.
func Event(e storage.Event) api.Event {
	return api.Event{Seq: e.Seq, RunID: e.RunID, StepID: e.StepID, Type: string(e.Type), TS: api.Millis(e.TS),
		Payload: json.RawMessage(e.Payload)}
}

// Conditions are a run's stop conditions (set) with their results in its
// newest evaluation (last), or "not evaluated yet" when there is none or
// it was made for another set (a resume --set changed the conditions).
func Conditions(last *storage.Evaluation, set stop.Set) ([]api.Condition, error) {
	if last != nil {
		var results []storedResult
		if err := json.Unmarshal([]byte(last.Results), &results); err != nil {
			return nil, fmt.Errorf("decode evaluation: %w", err)
		}
		if madeFor(results, set) {
			return storedConditions(results), nil
		}
	}
	var out []api.Condition
	add := func(class stop.Class, cs []stop.Condition) {
		for _, c := range cs {
			spec, _ := json.Marshal(c)
			out = append(out, api.Condition{Type: string(c.Type()), Kind: string(class), Description: c.Description(),
				Reason: "not evaluated yet", Spec: spec})
		}
	}
	add(stop.ClassFailure, set.FailureConditions)
	add(stop.ClassSuccess, set.SuccessConditions)
	add(stop.ClassLimit, set.Conditions)
	return out, nil
}

// Evaluation converts an evaluation row to its wire form (loopctl status
// --debug); results that cannot be decoded are left out.
func Evaluation(e storage.Evaluation) api.Evaluation {
	out := api.Evaluation{Iteration: e.Iteration, At: api.Millis(e.At), DurationUS: e.DurationUS}
	if e.StepID != nil {
		out.StepID = *e.StepID
	}
	var results []storedResult
	if err := json.Unmarshal([]byte(e.Results), &results); err == nil {
		out.Results = storedConditions(results)
	}
	return out
}

// madeFor reports whether results are an evaluation of exactly set: one
// result per condition, each naming (by class and index) a condition of
// set with the same spec. Counting is not enough: a resume --set that raises
// max_iterations keeps the number of conditions, and the evaluation made
// before it would show the old limit until the next step ends.
func madeFor(results []storedResult, set stop.Set) bool {
	if len(results) != set.Len() {
		return false
	}
	lists := map[string][]stop.Condition{string(stop.ClassLimit): set.Conditions,
		string(stop.ClassSuccess): set.SuccessConditions, string(stop.ClassFailure): set.FailureConditions}
	for _, r := range results {
		l := lists[r.Class]
		if r.Index < 0 || r.Index >= len(l) {
			return false
		}
		want, err := json.Marshal(l[r.Index])
		if err != nil {
			return false
		}
		var got bytes.Buffer
		if json.Compact(&got, r.Condition) != nil || !bytes.Equal(got.Bytes(), want) {
			return false
		}
	}
	return true
}

// storedResult is a stop.Result as recorded in the evaluations table,
// decoded without re-building its condition: status only shows it.
type storedResult struct {
	Condition    json.RawMessage `json:"condition"`
	Class        string          `json:"class"`
	Index        int             `json:"index"` // position in its class's list of the set
	Met          bool            `json:"met"`
	Progress     *float64        `json:"progress"`
	Reason       string          `json:"reason"`
	Description  string          `json:"description"`
	TimedOut     bool            `json:"timed_out"`
	Unmeasurable bool            `json:"unmeasurable"`
	Err          string          `json:"error"`
	Duration     time.Duration   `json:"duration_ns"`
}

func storedConditions(results []storedResult) []api.Condition {
	out := make([]api.Condition, 0, len(results))
	for _, r := range results {
		var head struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(r.Condition, &head)
		out = append(out, api.Condition{Type: head.Type, Kind: r.Class, Description: r.Description, Met: r.Met,
			Progress: r.Progress, Reason: r.Reason, Spec: r.Condition, TimedOut: r.TimedOut, Unmeasured: r.Unmeasurable,
			Error: r.Err, DurationUS: r.Duration.Microseconds()})
	}
	return out
}
