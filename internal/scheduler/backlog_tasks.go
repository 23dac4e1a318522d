package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/views"
)

// BacklogOf is the backlog a request about run is about: a task run
// stands for its backlog (`loopctl tasks last` right after a task run
// started is about the backlog); any other run for itself.
func (s *Scheduler) BacklogOf(ctx context.Context, run storage.Run) (storage.Run, error) {
	if run.Parent == "" {
		return run, nil
	}
	return s.store.Run(ctx, run.Parent)
}

// TaskRunRefusal refuses a request that would steer a task run around its
// backlog's coordinator: the run's work must reach the user's checkout only
// through the backlog's land queue and integration branch, and the
// coordinator's record of the task must keep matching the run. A land or
// push of a task run would put its work outside the integration branch; a
// resume (or --onto-base) would restart a run the coordinator took for
// ended or held; a pause would leave the task `running` with no way back
// but the backlog's own resume. The coordinator itself calls the scheduler
// directly and never comes through here. verb is the refused command;
// instead, what to run in its place (BACKLOG stands for the backlog's id).
func (s *Scheduler) TaskRunRefusal(ctx context.Context, id, verb, instead string) error {
	run, err := s.store.Run(ctx, id)
	if err != nil || run.Parent == "" {
		return err
	}
	return api.Errorf(api.CodeConflict, "refused: run %s is a task run of backlog %s, which %ss it; use %s",
		id, run.Parent, verb, strings.ReplaceAll(instead, "BACKLOG", run.Parent))
}

// BacklogTasks is a backlog run's tasks with their task runs' numbers
// (`loopctl tasks`, GET /v1/runs/{id}/tasks). A run that is not a backlog
// is an *InputError.
func (s *Scheduler) BacklogTasks(ctx context.Context, run storage.Run) (api.BacklogTasks, error) {
	if run.Kind != storage.KindBacklog {
		hint := ""
		if run.Parent != "" {
			hint = fmt.Sprintf(" (it is a task run of backlog %s: loopctl tasks %s)", shortOf(run.Parent), shortOf(run.Parent))
		}
		return api.BacklogTasks{}, &InputError{Msg: fmt.Sprintf("run %s is not a backlog run%s; a backlog is started with loopctl start --tasks FILE", shortOf(run.ID), hint)}
	}
	tasks, err := s.store.Tasks(ctx, run.ID)
	if err != nil {
		return api.BacklogTasks{}, err
	}
	kids, err := s.store.ChildRuns(ctx, run.ID)
	if err != nil {
		return api.BacklogTasks{}, err
	}
	described, err := s.DescribeList(ctx, kids)
	if err != nil {
		return api.BacklogTasks{}, err
	}
	byID := map[string]api.Run{}
	for _, d := range described {
		byID[d.ID] = d
	}
	out := api.BacklogTasks{Backlog: run.ID, Status: run.Status, Reason: run.Reason, Goal: run.Goal, Branch: run.Branch,
		BaseBranch: run.BaseBranch, Tasks: make([]api.Task, 0, len(tasks))}
	for _, t := range tasks {
		at := api.Task{ID: t.ID, Position: t.Position, Title: t.Title, Description: t.Description, DependsOn: t.Deps(),
			Priority: t.Priority, State: t.State, Why: t.Why, Run: t.TaskRun, LandAttempts: t.LandAttempts,
			LandedCommit: t.LandedCommit, Verified: t.Verified}
		if at.DependsOn == nil {
			at.DependsOn = []string{}
		}
		if d, ok := byID[t.TaskRun]; ok {
			at.RunStatus, at.Iterations, at.Usage = d.Status, d.Iteration, d.Usage
			if err := s.taskRunSteps(ctx, t.TaskRun, &at); err != nil {
				return api.BacklogTasks{}, err
			}
		}
		out.Tasks = append(out.Tasks, at)
	}
	return out, nil
}

// taskRunSteps fills in a task's tests (its run's last verification) and
// its diffstat (the changes its iterations recorded).
func (s *Scheduler) taskRunSteps(ctx context.Context, runID string, at *api.Task) error {
	steps, err := s.store.StepsLight(ctx, runID)
	if err != nil {
		return err
	}
	for i := range steps {
		st := &steps[i]
		if st.Phase == api.PhaseVerification && st.Status != api.StepRunning {
			at.Tests = views.StepTests(st)
		}
		if st.FilesChanged != nil {
			at.FilesChanged += *st.FilesChanged
		}
		if st.Insertions != nil {
			at.Insertions += *st.Insertions
		}
		if st.Deletions != nil {
			at.Deletions += *st.Deletions
		}
	}
	return nil
}

// RetryTask re-opens a blocked task of a backlog (`loopctl tasks RUN
// --retry ID`): it and the tasks skipped because of it go back to pending
// (the task gets a new task run from the integration branch's tip), sets
// change the task's settings, and a backlog that had ended is resumed —
// all in one transaction. It answers with the backlog's tasks as they are
// then. Refusals are *InputError or *StateError and change nothing.
func (s *Scheduler) RetryTask(ctx context.Context, backlogID, taskID string, sets []string) (api.BacklogTasks, error) {
	if err := s.retryTask(ctx, backlogID, taskID, sets); err != nil {
		return api.BacklogTasks{}, err
	}
	run, err := s.store.Run(ctx, backlogID)
	if err != nil {
		return api.BacklogTasks{}, err
	}
	return s.BacklogTasks(ctx, run)
}

func (s *Scheduler) retryTask(ctx context.Context, backlogID, taskID string, sets []string) error {
	run, err := s.store.Run(ctx, backlogID)
	if err != nil {
		return err
	}
	if run.Kind != storage.KindBacklog {
		return &InputError{Msg: fmt.Sprintf("run %s is not a backlog run: only a backlog's tasks can be retried", shortOf(run.ID))}
	}
	parsed, err := config.ParseSets(sets)
	if err != nil {
		return &InputError{Msg: "invalid --set; nothing was changed", Problems: problems(err)}
	}
	cfg, _, err := decodeFrozen(run)
	if err != nil {
		return err
	}
	err = s.store.Write(ctx, func(tx *storage.Tx) error {
		cur, err := tx.Run(backlogID)
		if err != nil {
			return err
		}
		tasks, err := tx.Tasks(backlogID)
		if err != nil {
			return err
		}
		var task *storage.Task
		for i := range tasks {
			if tasks[i].ID == taskID {
				task = &tasks[i]
			}
		}
		if task == nil {
			ids := make([]string, 0, len(tasks))
			for _, t := range tasks {
				ids = append(ids, t.ID)
			}
			return &InputError{Msg: fmt.Sprintf("backlog %s has no task %q; its tasks are %s", shortOf(backlogID), taskID, strings.Join(ids, ", "))}
		}
		if task.State != storage.TaskBlocked {
			return &StateError{Msg: fmt.Sprintf("task %s is %s, not blocked: only a blocked task can be retried", taskID, task.State)}
		}
		settings := task.Set()
		for _, kv := range parsed {
			settings[kv.Key] = kv.Value
		}
		if _, err := cfg.With(run.Workspace, taskSets(settings)); err != nil {
			return &InputError{Msg: "invalid --set; nothing was changed", Problems: problems(err)}
		}
		js, err := json.Marshal(settings)
		if err != nil {
			return err
		}
		sjs, none, empty := string(js), "", ""
		if err := tx.ChangeTask(storage.TaskChange{Backlog: backlogID, ID: taskID, From: []string{storage.TaskBlocked}, To: storage.TaskPending,
			Why: &empty, TaskRun: &none, Settings: &sjs, ResetLandAttempts: true}); err != nil {
			return err
		}
		// Its skipped dependents (and theirs) go back to pending too.
		reopened := map[string]bool{taskID: true}
		for changed := true; changed; {
			changed = false
			for i := range tasks {
				t := &tasks[i]
				if t.State != storage.TaskSkipped || reopened[t.ID] {
					continue
				}
				for _, d := range t.Deps() {
					if reopened[d] {
						if err := tx.ChangeTask(storage.TaskChange{Backlog: backlogID, ID: t.ID, From: []string{storage.TaskSkipped},
							To: storage.TaskPending, Why: &empty}); err != nil {
							return err
						}
						reopened[t.ID], changed = true, true
						break
					}
				}
			}
		}
		if cur.Status.Terminal() {
			return tx.TransitionRun(storage.Transition{RunID: backlogID, From: []api.RunStatus{cur.Status}, To: api.RunPending,
				Event: events.RunResumed, ClearRequests: true,
				Payload: map[string]any{"run_id": backlogID, "from": cur.Status, "retry": taskID, "set": sets}})
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.Wake()
	s.kickBacklogs()
	return nil
}

// backlogUsage counts a backlog's tasks by state and makes its usage the
// sum of its task runs': a backlog runs no step of its own, and its
// budgets count every task run.
func (s *Scheduler) backlogUsage(ctx context.Context, run storage.Run, out *api.Run) error {
	tasks, err := s.store.Tasks(ctx, run.ID)
	if err != nil {
		return err
	}
	out.Tasks = map[string]int{}
	for _, t := range tasks {
		out.Tasks[t.State]++
	}
	kids, err := s.store.ChildRuns(ctx, run.ID)
	if err != nil || len(kids) == 0 {
		return err
	}
	described, err := s.DescribeList(ctx, kids)
	if err != nil {
		return err
	}
	u := api.Usage{Model: out.Usage.Model}
	for _, d := range described {
		u.InputTokens += d.Usage.InputTokens
		u.OutputTokens += d.Usage.OutputTokens
		u.CacheReadTokens += d.Usage.CacheReadTokens
		u.CacheWriteTokens += d.Usage.CacheWriteTokens
		u.ReasoningTokens += d.Usage.ReasoningTokens
		u.CostUSD += d.Usage.CostUSD
		u.CostUnknown = u.CostUnknown || d.Usage.CostUnknown
		if d.Usage.ReportedCostUSD != nil {
			r := *d.Usage.ReportedCostUSD
			if u.ReportedCostUSD != nil {
				r += *u.ReportedCostUSD
			}
			u.ReportedCostUSD = &r
		}
	}
	out.Usage = u
	return nil
}

// PRTasks lists a backlog run's tasks for the body of the pull request its
// push opens (landing.Options.PRTasks); none for any other run.
func (s *Scheduler) PRTasks(ctx context.Context, run storage.Run) ([]landing.PRTask, error) {
	if run.Kind != storage.KindBacklog {
		return nil, nil
	}
	bt, err := s.BacklogTasks(ctx, run)
	if err != nil {
		return nil, err
	}
	out := make([]landing.PRTask, 0, len(bt.Tasks))
	for _, t := range bt.Tasks {
		pt := landing.PRTask{ID: t.ID, Title: t.Title, State: t.State, Why: t.Why, RunID: t.Run, Commit: t.LandedCommit,
			CostUSD: t.Usage.CostUSD, Iterations: t.Iterations}
		if t.Tests != nil {
			pt.Tests = &landing.PRTests{Passed: t.Tests.Passed, Failed: t.Tests.Failed, Skipped: t.Tests.Skipped}
		}
		out = append(out, pt)
	}
	return out, nil
}

// backlogConditions are what ends a backlog, as status shows conditions:
// its budgets, which count every task run (the stop conditions of its
// config are each task run's), and its completion, every task done.
func backlogConditions(run storage.Run, cfg config.Config, out api.Run, now int64) []api.Condition {
	progress := func(v, limit float64) *float64 {
		p := min(v/limit, 1)
		return &p
	}
	var conds []api.Condition
	if cfg.MaxCost > 0 {
		conds = append(conds, api.Condition{Type: "max_cost", Kind: "limit",
			Description: fmt.Sprintf("when its task runs cost $%.2f together", cfg.MaxCost),
			Met:         out.Usage.CostUSD >= cfg.MaxCost, Progress: progress(out.Usage.CostUSD, cfg.MaxCost),
			Reason: fmt.Sprintf("$%.2f of $%.2f", out.Usage.CostUSD, cfg.MaxCost)})
	}
	if cfg.MaxTokens > 0 {
		used := out.Usage.InputTokens + out.Usage.OutputTokens + out.Usage.CacheReadTokens + out.Usage.CacheWriteTokens
		conds = append(conds, api.Condition{Type: "max_tokens", Kind: "limit",
			Description: fmt.Sprintf("when its task runs used %d tokens together", cfg.MaxTokens),
			Met:         used >= cfg.MaxTokens, Progress: progress(float64(used), float64(cfg.MaxTokens)),
			Reason: fmt.Sprintf("%d of %d", used, cfg.MaxTokens)})
	}
	if cfg.MaxDuration > 0 && run.StartedAt != nil {
		end := now
		if run.EndedAt != nil {
			end = *run.EndedAt
		}
		el := time.Duration(end-*run.StartedAt) * time.Millisecond
		conds = append(conds, api.Condition{Type: "max_duration", Kind: "limit",
			Description: "after " + time.Duration(cfg.MaxDuration).String(),
			Met:         el >= time.Duration(cfg.MaxDuration), Progress: progress(el.Seconds(), time.Duration(cfg.MaxDuration).Seconds()),
			Reason: el.Round(time.Second).String()})
	}
	total := 0
	for _, n := range out.Tasks {
		total += n
	}
	gate := api.Condition{Type: "completion", Kind: "success", Description: "when every task is done (landed in " + run.Branch + ")",
		Met: run.Status == api.RunCompleted, Reason: fmt.Sprintf("%d/%d done", out.Tasks[storage.TaskDone], total)}
	if total > 0 {
		gate.Progress = progress(float64(out.Tasks[storage.TaskDone]), float64(total))
	}
	return append(conds, gate)
}
