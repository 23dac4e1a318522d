package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

func TestStartCmd(t *testing.T) {
	ws := t.TempDir()
	f := newFakeAPI(t)
	f.reply("POST /v1/runs", api.Run{ID: runID, Workspace: ws, Status: api.RunPending, Warnings: []string{"max_cost is not set"}})
	r := loopctl(t, f, "start", "-C", ws, "make", "the tests pass", "--name", "n1", "--set", "max_iterations=3",
		"--prompt-file", "goal.md", "--plan", "/abs/PLAN.md", "--stop-file", "stop.json", "--spec", "sub/spec.md")
	r.expect(t, exitOK, lines(runID+"\n"), "warning: max_cost is not set\n",
		"started run 0123456789ab in "+ws+"\n  follow it: loopctl watch 0123456789ab   ·   loopctl logs 0123456789ab --follow\n")
	req := decode[api.CreateRunRequest](t, f.only("POST", "/v1/runs"))
	want := api.CreateRunRequest{Workspace: ws, Goal: "make the tests pass", Name: "n1", Set: []string{"max_iterations=3"},
		// Relative paths are relative to -C DIR, as git -C would have them.
		PromptFile: filepath.Join(ws, "goal.md"), PlanFile: "/abs/PLAN.md", StopFile: filepath.Join(ws, "stop.json"),
		SpecFile: filepath.Join(ws, "sub/spec.md")}
	if fmt.Sprint(req) != fmt.Sprint(want) {
		t.Errorf("request\n %+v\nwant\n %+v", req, want)
	}
}

func TestStartCmdWorktreeJSON(t *testing.T) {
	f := newFakeAPI(t)
	f.reply("POST /v1/runs", api.Run{ID: runID, Status: api.RunPending, Isolation: "worktree", Worktree: "/h/worktrees/" + runID,
		Branch: "loop/0123456789ab", BaseCommit: "fedcba9876543210fedc"})
	r := loopctl(t, f, "start", "-C", t.TempDir(), "--json", "goal")
	r.expect(t, exitOK, lines(`"id": "`+runID+`"`, `"isolation": "worktree"`),
		"run 0123456789ab works in its own worktree /h/worktrees/"+runID+" on branch loop/0123456789ab (from fedcba987654)\n")
}

// start --wait waits for the run it created and exits with its code.
func TestStartCmdWait(t *testing.T) {
	f := newFakeAPI(t)
	f.reply("POST /v1/runs", api.Run{ID: runID, Status: api.RunPending})
	f.reply("GET /v1/runs/{ref}", api.Run{ID: runID, Status: api.RunRunning})
	f.reply("GET /v1/runs/{ref}/wait", endedRun(api.RunFailed, "verification_failures:3"))
	r := loopctl(t, f, "start", "-C", t.TempDir(), "--wait", "goal")
	r.expect(t, 1, lines("run 0123456789ab FAILED: verification_failures:3"), "started run 0123456789ab; waiting for it to end")
	f.only("GET", "/v1/runs/"+runID+"/wait")
}

func TestStartCmdErrors(t *testing.T) {
	ws := t.TempDir()
	f := newFakeAPI(t)
	f.handle("POST /v1/runs", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": api.Error{Code: api.CodeUntrusted,
			Message: "workspace " + ws + " has files loopd has not been told to trust", Details: []string{".loop/config: new"}}})
	})
	loopctl(t, f, "start", "-C", ws, "goal").expect(t, exitUsage, nil, "has not been told to trust:\n  .loop/config: new\n",
		"review what they run and trust them: loopctl trust -C "+ws+"\n  then start again\n")

	g := newFakeAPI(t)
	g.fail("POST /v1/runs", api.CodeBadRequest, "bad config")
	loopctl(t, g, "start", "-C", ws, "goal").expect(t, exitUsage, nil, "loopctl: bad config\n")
	loopctl(t, g, "start", "-C", filepath.Join(ws, "nope"), "goal").expect(t, exitUsage, nil, "nope is not a directory")
	loopctl(t, nil, "start", "-C", ws, "goal").expect(t, exitUnavailable, nil, "no daemon at")
}

func TestListCmd(t *testing.T) {
	ws := t.TempDir()
	f := newFakeAPI(t)
	cost := 0.004
	f.reply("GET /v1/runs", []api.Run{
		{ID: runID, Name: "fix parser", Status: api.RunRunning, Iteration: 4, Usage: api.Usage{CostUSD: cost}, Reason: ""},
		{ID: "fedcba9876543210", Status: api.RunAborted, Iteration: 9, Reason: "max_iterations:9", Workspace: "/w2"},
	})
	r := loopctl(t, f, "list", "-C", ws, "--status", "running", "--limit", "5")
	r.expect(t, exitOK, lines("ID            NAME        STATUS   ITER  COST     CREATED  REASON\n",
		"0123456789ab  fix parser  RUNNING  4     $0.0040  -        \n", "fedcba987654  -           ABORTED  9     $0.00    -        max_iterations:9\n"))
	q := f.only("GET", "/v1/runs").Query
	if q.Get("workspace") != ws || q.Get("status") != "RUNNING" || q.Get("limit") != "5" {
		t.Errorf("query %v", q)
	}

	g := newFakeAPI(t)
	g.reply("GET /v1/runs", []api.Run{})
	loopctl(t, g, "list", "--all-workspaces").expect(t, exitOK, nil, "no runs in any workspace\n")
	if q := g.only("GET", "/v1/runs").Query; q.Has("workspace") || q.Get("limit") != "20" {
		t.Errorf("list --all-workspaces query %v", q)
	}
	loopctl(t, g, "list", "-C", ws, "--json").expect(t, exitOK, lines("[]\n"))
}

func TestListCmdErrors(t *testing.T) {
	f := newFakeAPI(t)
	loopctl(t, f, "list", "--status", "DONE").expect(t, exitUsage, nil, `--status "DONE": use PENDING, RUNNING`)
	loopctl(t, f, "list", "--limit", "0").expect(t, exitUsage, nil, "--limit must be at least 1")
	loopctl(t, f, "list", "extra").expect(t, exitUsage, nil, `unknown command "extra"`)
	loopctl(t, f, "list", "--limit", "x").expect(t, exitUsage, nil, `invalid argument "x"`)
	if len(f.requests()) != 0 {
		t.Errorf("refused lists asked the daemon: %+v", f.requests())
	}
	g := newFakeAPI(t)
	g.handle("GET /v1/runs", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusBadGateway) })
	loopctl(t, g, "list", "--all-workspaces").expect(t, exitInternal, nil, "daemon answered 502 Bad Gateway: boom")
}

func ptr[T any](v T) *T { return &v }

func TestStatusCmd(t *testing.T) {
	f := newFakeAPI(t)
	p := 0.5
	f.reply("GET /v1/runs/{ref}", api.Run{ID: runID, Name: "n1", Workspace: "/w", Status: api.RunRunning, Iteration: 2, Steps: 5,
		ExitCode: ptr(1), Reason: "r", Description: "d", StopRequested: "graceful", PauseRequest: true,
		Isolation: "worktree", Worktree: "/h/worktrees/x", Branch: "loop/x", BaseBranch: "main", BaseCommit: "abcdefabcdefabcdef", WorktreeState: "gone",
		CurrentStep: &api.Step{Seq: 5, Phase: api.PhaseReview, Iteration: 2, DurationMS: 65_000},
		Counters:    api.Counters{Implementation: 1, Verification: 2}, Usage: api.Usage{InputTokens: 12_345, OutputTokens: 2_000_000},
		Warnings: []string{"w1"}, LandedCommit: "1234567890abcdef",
		Conditions: []api.Condition{{Kind: "limit", Type: "max_iterations", Description: "at most 4 iterations", Progress: &p, Reason: "2 of 4"},
			{Kind: "failure", Type: "custom_script", Met: true, Error: "exit 2"}},
		Evaluations: []api.Evaluation{{StepID: 4, Iteration: 2, DurationUS: 42, Results: []api.Condition{{Kind: "limit", Type: "max_iterations", Progress: &p, Reason: "2 of 4"}}}},
	})
	f.reply("GET /v1/runs/{ref}/steps", []api.Step{
		{Seq: 1, Phase: api.PhaseImplementation, Iteration: 1, Changes: &api.Changes{FilesChanged: 3, Insertions: 10, Deletions: 2, Commit: "c0ffee00c0ffee00"}},
		{Seq: 2, Phase: api.PhaseImplementation, Iteration: 2, Changes: &api.Changes{FilesChanged: 1, Insertions: 1, BinaryFiles: 1}},
		{Seq: 3, Phase: api.PhaseImplementation, Iteration: 3, Changes: &api.Changes{}},
	})
	r := loopctl(t, f, "status", "0123", "--debug")
	r.expect(t, exitOK, lines(
		"run "+runID+"  (n1)\n",
		"  worktree   /h/worktrees/x on loop/x (from main at abcdefabcdef)  [gone: removed by hand",
		"  status     RUNNING  (step #5 review, iteration 2, running 1m05s)  [stop requested: graceful]  [pause requested]\n",
		"  reason     r\n             d\n", "  exit code  1\n", "  iteration  2  (5 steps, 0ms running)\n",
		"  failures   implementation 1 · review 0 · verification 2 (consecutive)\n",
		"  usage      12.3k in · 2.00M out · 0 cache read · 0 cache write · $0.00 (no agent-reported cost)\n",
		"  landed     main is now 1234567890ab (loopctl land)\n", "  warning: w1\n",
		"stop conditions:\n", "    limit    at most 4 iterations  [##########----------]  50%  2 of 4\n",
		"  ✔ failure                        [                    ]  n/a  error: exit 2\n",
		"changes (the change ledger):\n  iteration 1  3 files +10 -2  c0ffee00c0ff\n",
		"  iteration 2  1 file +1 -0 (1 binary)\n", "  iteration 3  no change\n",
		"evaluations (oldest first, last 1):", "step 4  iteration 2  42µs", "max_iterations  met=false  progress=0.500"))
	if q := f.only("GET", "/v1/runs/0123").Query; q.Get("debug") != "1" {
		t.Errorf("status --debug query %v", q)
	}
	f.only("GET", "/v1/runs/0123/steps")

	loopctl(t, f, "status", runID, "--json").expect(t, exitOK, lines(`"id": "`+runID+`"`, `"stop_requested": "graceful"`))
}

func TestStatusCmdWaiting(t *testing.T) {
	f := newFakeAPI(t)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.Local)
	f.reply("GET /v1/runs/{ref}", api.Run{ID: runID, Status: api.RunWaiting, Reason: "api_unavailable", WaitUntil: api.Time{Time: at}})
	f.fail("GET /v1/runs/{ref}/steps", api.CodeInternal, "steps unreadable")
	// The steps are extra: their failure leaves the status printed.
	loopctl(t, f, "status", runID).expect(t, exitOK, lines("WAITING  (model API unavailable; resumes at 2030-01-02 03:04:05)"))
	g := newFakeAPI(t)
	g.fail("GET /v1/runs/{ref}", api.CodeAmbiguous, "01 matches 2 runs")
	loopctl(t, g, "status", "01").expect(t, exitUsage, nil, "loopctl: 01 matches 2 runs\n")
	loopctl(t, g, "status").expect(t, exitUsage, nil, "loopctl status needs exactly one RUN")
}

func TestStepsCmd(t *testing.T) {
	f := newFakeAPI(t)
	f.reply("GET /v1/runs/{ref}/steps", []api.Step{
		{Seq: 1, Phase: api.PhaseImplementation, Iteration: 1, Status: api.StepSucceeded, ExitCode: ptr(0), DurationMS: 1500,
			Usage: api.Usage{CostUSD: 0.25}, Changes: &api.Changes{FilesChanged: 2, Insertions: 5}, Promise: true},
		{Seq: 2, Phase: api.PhaseVerification, Iteration: 1, Status: api.StepFailed, ExitCode: ptr(1), Error: "tests failed",
			Tests: &api.Tests{Passed: ptr(12), Failed: ptr(2), FailedNames: []string{"TestA", "TestB"}, Skipped: ptr(1)}},
		{Seq: 3, Phase: api.PhaseReview, Iteration: 1, Status: api.StepFailed, Error: "timed out"},
	})
	r := loopctl(t, f, "steps", runID)
	r.expect(t, exitOK, lines(
		"#  PHASE           ITER  STATUS     EXIT  DURATION  COST   CHANGES        DETAIL\n",
		"1  implementation  1     SUCCEEDED  0     1s        $0.25  2 files +5 -0  promise\n",
		"2  verification    1     FAILED     1     0ms       -      -              12 passed, 2 failed (TestA, TestB), 1 skipped\n",
		"3  review          1     FAILED     -     0ms       -      -              timed out\n"))
	loopctl(t, f, "steps", runID, "--json").expect(t, exitOK, lines(`"failed_names": [`))
	g := newFakeAPI(t)
	g.fail("GET /v1/runs/{ref}/steps", api.CodeNotFound, "no run x")
	loopctl(t, g, "steps", "x").expect(t, exitNotFound, nil, "no run x")
}

// logs streams the daemon's bytes as they come: as written with --raw, and
// with what it asked for (one step, NDJSON) in the query.
func TestLogsCmd(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/runs/{ref}/logs", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "==> step %s <==\nplain output line\n", r.URL.Query().Get("step"))
	})
	loopctl(t, f, "logs", runID, "--raw").expect(t, exitOK, lines("==> step  <==\nplain output line\n"))
	loopctl(t, f, "logs", runID, "--step", "3").expect(t, exitOK, lines("plain output line"))
	loopctl(t, f, "logs", runID, "--json", "--step", "2").expect(t, exitOK, lines("==> step 2 <==\nplain output line\n"))
	var qs []string
	for _, r := range f.requests() {
		qs = append(qs, r.Query.Encode())
	}
	if fmt.Sprint(qs) != "[ step=3 format=json&step=2]" {
		t.Errorf("queries %q", qs)
	}
	loopctl(t, f, "logs", runID, "--step", "-1").expect(t, exitUsage, nil, "--step must be a step number ≥ 1")
	g := newFakeAPI(t)
	g.fail("GET /v1/runs/{ref}/logs", api.CodeNotFound, "no step 9")
	loopctl(t, g, "logs", runID, "--step", "9").expect(t, exitNotFound, nil, "no step 9")
}

// logs --follow of a whole run reads until the run has ended, and once
// more after the stream ends for what a cut stream missed, skipping what it
// printed.
func TestLogsCmdFollow(t *testing.T) {
	f := newFakeAPI(t)
	f.reply("GET /v1/runs/{ref}", endedRun(api.RunCompleted, "promise"))
	f.handle("GET /v1/runs/{ref}/logs", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("skip") == "" {
			fmt.Fprint(w, "first part\n")
			return
		}
		fmt.Fprint(w, "the rest\n")
	})
	loopctl(t, f, "logs", "0123", "-f").expect(t, exitOK, lines("first part\nthe rest\n"))
	var got []string
	for _, r := range f.requests() {
		got = append(got, r.Path+"?"+r.Query.Encode())
	}
	want := []string{"/v1/runs/0123?", "/v1/runs/" + runID + "/logs?follow=1", "/v1/runs/" + runID + "?",
		"/v1/runs/" + runID + "/logs?skip=" + strconv.Itoa(len("first part\n"))}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests\n %q\nwant\n %q", got, want)
	}
	// With --json the stream is not resumed: a daemon gone mid-stream is
	// exit 69.
	g := newFakeAPI(t)
	g.reply("GET /v1/runs/{ref}", api.Run{ID: runID, Status: api.RunRunning})
	g.handle("GET /v1/runs/{ref}/logs", func(w http.ResponseWriter, r *http.Request) {})
	loopctl(t, g, "logs", runID, "-f", "--json").expect(t, exitUnavailable, nil,
		"the daemon stopped while following run "+runID+"; the run goes on")
}

func TestEventsCmd(t *testing.T) {
	f := newFakeAPI(t)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.Local)
	evs := []api.Event{
		{Seq: 1, Type: "RUN_CREATED", TS: api.Time{Time: at}, Payload: []byte(`{"b":2,"a":"x","n":null}`)},
		{Seq: 2, Type: "RUN_COMPLETED", TS: api.Time{Time: at}, Payload: []byte(`{}`)},
	}
	f.handle("GET /v1/runs/{ref}/events", func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		for _, ev := range evs[min(after, len(evs)):] {
			b, _ := jsonLine(ev)
			w.Write(b)
		}
	})
	f.reply("GET /v1/runs/{ref}", endedRun(api.RunCompleted, "promise"))
	loopctl(t, f, "events", runID).expect(t, exitOK, lines(
		"     1  10:00:00.000  RUN_CREATED          a=x b=2 n=\n", "     2  10:00:00.000  RUN_COMPLETED        \n"))
	loopctl(t, f, "events", runID, "--after", "1", "--json").expect(t, exitOK, lines(`{"seq":2,"run_id":"","step_id":null,"type":"RUN_COMPLETED"`))
	r := loopctl(t, f, "events", "0123", "--follow")
	r.expect(t, exitOK, lines("RUN_CREATED", "RUN_COMPLETED"))
	if n := countLines(r.out); n != 2 {
		t.Errorf("events --follow printed %d lines, want each event once:\n%s", n, r.out)
	}
	loopctl(t, f, "events", runID, "--after", "-1").expect(t, exitUsage, nil, "--after must be an event seq ≥ 0")
	g := newFakeAPI(t)
	g.fail("GET /v1/runs/{ref}/events", api.CodeNotFound, "no run y")
	loopctl(t, g, "events", "y").expect(t, exitNotFound, nil, "no run y")
}

func TestDiffCmd(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/runs/{ref}/diff", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("format") == "json" {
			writeJSON(w, http.StatusOK, api.DiffStat{RunID: runID, FilesChanged: 1, Insertions: 2})
			return
		}
		if q.Get("iteration") == "2" {
			return // iteration 2 changed nothing
		}
		w.Header().Set(api.HeaderDiffFrom, "aaaa")
		w.Header().Set(api.HeaderDiffTo, "bbbb")
		fmt.Fprintf(w, "diff --git a/x b/x\n+stat=%s\n", q.Get("stat"))
	})
	loopctl(t, f, "diff", runID, "--stat").expect(t, exitOK, lines("diff --git a/x b/x\n+stat=1\n"))
	loopctl(t, f, "diff", runID, "--iteration", "2").expect(t, exitOK, nil, "iteration 2 changed nothing\n")
	loopctl(t, f, "diff", runID, "--json", "--iteration", "1").expect(t, exitOK, lines(`"files_changed": 1`, `"insertions": 2`))
	var qs []string
	for _, r := range f.requests() {
		qs = append(qs, r.Query.Encode())
	}
	if fmt.Sprint(qs) != "[stat=1 iteration=2 format=json&iteration=1]" {
		t.Errorf("queries %q", qs)
	}
	loopctl(t, f, "diff", runID, "--iteration", "0").expect(t, exitUsage, nil, "--iteration must be 1 or more, got 0")
	g := newFakeAPI(t)
	g.fail("GET /v1/runs/{ref}/diff", api.CodeNotFound, "no iteration 7")
	loopctl(t, g, "diff", runID, "--iteration", "7").expect(t, exitNotFound, nil, "no iteration 7")
}
