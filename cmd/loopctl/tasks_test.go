package main

import (
	"encoding/json"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// loopctl tasks prints each task's state, run, numbers and why; --retry
// posts the task and its settings; --set without --retry is a usage error.
func TestTasksCommand(t *testing.T) {
	passed := 3
	bt := api.BacklogTasks{Backlog: "5f60ff82e0aa1ab1", Status: api.RunFailed, Reason: "tasks_blocked:1", Branch: "loop/5f60ff82",
		Tasks: []api.Task{
			{ID: "stuck", Title: "the impossible one", State: "blocked", Why: "task run 5248b311 ended ABORTED (max_iterations:2)",
				Run: "5248b3115f155677", Iterations: 2, Usage: api.Usage{CostUSD: 0.41}, FilesChanged: 2, Insertions: 2},
			{ID: "after", Title: "needs it", State: "skipped", Why: "task stuck, which it depends on, is blocked", DependsOn: []string{"stuck"}},
			{ID: "free", Title: "independent", State: "done", Run: "d7bf969ae9c85b69", Iterations: 1, Tests: &api.Tests{Passed: &passed},
				LandedCommit: "ceb709094c31078190726a7a50e27041eac57d6e", Verified: true},
		}}
	f := newFakeAPI(t)
	f.reply("GET /v1/runs/{ref}/tasks", bt)
	loopctl(t, f, "tasks", "5f60ff82").expect(t, 0, lines(
		"backlog 5f60ff82e0aa  FAILED (tasks_blocked:1)  integration branch loop/5f60ff82",
		"stuck", "blocked", "5248b3115f15", "$0.41", "2 files +2 -0", "the impossible one — task run 5248b311 ended ABORTED (max_iterations:2)",
		"skipped", "needs it — task stuck, which it depends on, is blocked",
		"done", "3 passed", "ceb709094c31", "independent"))
	if r := f.only("GET", "/v1/runs/5f60ff82/tasks"); r.Body != "" {
		t.Errorf("tasks sent a body: %q", r.Body)
	}
	var got api.BacklogTasks
	res := loopctl(t, f, "tasks", "5f60ff82", "--json")
	if err := json.Unmarshal([]byte(res.out), &got); err != nil || len(got.Tasks) != 3 || got.Tasks[2].LandedCommit != bt.Tasks[2].LandedCommit {
		t.Fatalf("--json = %+v, %v\n%s", got, err, res.out)
	}

	g := newFakeAPI(t)
	g.reply("POST /v1/runs/{ref}/tasks/{task}/retry", bt)
	loopctl(t, g, "tasks", "5f60ff82", "--retry", "stuck", "--set", "max_task_iterations=9").expect(t, 0, lines("task stuck re-opened"))
	r := g.only("POST", "/v1/runs/5f60ff82/tasks/stuck/retry")
	var req api.RetryTaskRequest
	if err := json.Unmarshal([]byte(r.Body), &req); err != nil || len(req.Set) != 1 || req.Set[0] != "max_task_iterations=9" {
		t.Errorf("retry body %q (%v)", r.Body, err)
	}
	loopctl(t, nil, "tasks", "5f60ff82", "--set", "a=b").expect(t, exitUsage, nil, "--set changes a task retried with --retry ID")
}
