// Package dashsource is the dashboard's data source: it implements
// dashboard.Source with the store's reads and the scheduler's views, the
// same ones the JSON API answers with, so a page says what loopctl says.
//
// It sits below the daemon (which wires it in) and above the scheduler
// and the dashboard: the dashboard never imports the scheduler.
package dashsource

import (
	"context"
	"errors"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/dashboard"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/scheduler"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/views"
)

// Source is the dashboard's view of the daemon: the same store reads and
// scheduler views the JSON API uses.
type Source struct {
	store *storage.Store
	sched *scheduler.Scheduler
	bus   *events.Bus
}

var _ dashboard.Source = (*Source)(nil)

// New returns the dashboard's source over the daemon's store, scheduler
// and event bus.
func New(store *storage.Store, sched *scheduler.Scheduler, bus *events.Bus) *Source {
	return &Source{store: store, sched: sched, bus: bus}
}

// apiErr turns the store's user-facing errors into the API errors the JSON
// API would answer with, so a page says what loopctl would.
func apiErr(err error) error {
	var amb *storage.AmbiguousError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &amb):
		return api.Errorf(api.CodeAmbiguous, "%s; give more characters of the id", amb.Error())
	case errors.Is(err, storage.ErrNotFound):
		return api.Errorf(api.CodeNotFound, "%v", err)
	}
	return err
}

// Runs lists runs as `loopctl list` describes them, without their config.
func (s *Source) Runs(ctx context.Context, f dashboard.RunFilter) ([]api.Run, error) {
	ws := f.Workspace
	if ws != "" {
		ws = scheduler.CanonicalWorkspace(ws)
	}
	runs, err := s.listRuns(ctx, storage.RunFilter{Status: f.Status, Workspace: ws, Limit: f.Limit}, f.TopLevel)
	if err != nil {
		return nil, err
	}
	// The same views as `loopctl list`: aggregates read for all the runs
	// together, whatever their number of steps.
	out, err := s.sched.DescribeList(ctx, runs)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Config = nil
	}
	return out, nil
}

// listRuns reads runs newest first; topLevel leaves out task runs and
// still lists up to f.Limit runs. Task runs are read and dropped rather
// than filtered in the query, which the store's list does not offer: the
// read grows until enough runs are left, so a backlog of 500 task runs
// costs a few larger reads of light rows, never a missing run.
func (s *Source) listRuns(ctx context.Context, f storage.RunFilter, topLevel bool) ([]storage.Run, error) {
	want := f.Limit
	if want <= 0 {
		want = 100
	}
	for read := want; ; read *= 4 {
		f.Limit = read
		runs, err := s.store.ListRuns(ctx, f)
		if err != nil || !topLevel {
			return runs, err
		}
		out := runs[:0:0]
		for _, r := range runs {
			if r.Parent == "" {
				out = append(out, r)
			}
		}
		if len(out) >= want || len(runs) < read {
			return out[:min(len(out), want)], nil
		}
	}
}

// TaskRuns lists a backlog's task runs, oldest first, described as
// `loopctl list` describes runs (without their config), each with its
// task's title, and counts the backlog's tasks.
func (s *Source) TaskRuns(ctx context.Context, backlogID string) (dashboard.TaskRuns, error) {
	var out dashboard.TaskRuns
	tasks, err := s.store.Tasks(ctx, backlogID)
	if err != nil {
		return out, err
	}
	// A task run is named after its task's id; a retried task's earlier
	// runs are no longer the task's task_run, but keep the name.
	title := make(map[string]string, len(tasks))
	for _, t := range tasks {
		title[t.ID] = t.Title
		if t.State == storage.TaskDone {
			out.Done++
		}
	}
	out.Tasks = len(tasks)
	kids, err := s.store.ChildRuns(ctx, backlogID)
	if err != nil || len(kids) == 0 {
		return out, err
	}
	views, err := s.sched.DescribeList(ctx, kids)
	if err != nil {
		return out, err
	}
	out.Runs = make([]dashboard.TaskRun, len(views))
	for i := range views {
		views[i].Config = nil
		out.Runs[i] = dashboard.TaskRun{Run: views[i], Title: title[views[i].Name]}
	}
	return out, nil
}

// Tasks is a backlog's tasks as `loopctl tasks` lists them; a run that is
// not a backlog is the API's invalid-input error, worded as loopctl's.
func (s *Source) Tasks(ctx context.Context, backlogID string) (api.BacklogTasks, error) {
	run, err := s.store.Run(ctx, backlogID)
	if err != nil {
		return api.BacklogTasks{}, apiErr(err)
	}
	out, err := s.sched.BacklogTasks(ctx, run)
	var in *scheduler.InputError
	if errors.As(err, &in) {
		return out, api.Errorf(api.CodeBadRequest, "%s", in.Msg)
	}
	settle(out.Tasks)
	return out, err
}

// settle shows each task in the state the backlog's next pass will record
// from what is already in the database: a task whose dependencies are all
// done is ready, and a task follows its run into waiting, back to running,
// and (completed) into landing. The backlog records these changes (with
// their TASK_STATE event) after the task run's event that caused them;
// settling lets a page re-rendered on the run's event show the new state
// at once rather than only on the TASK_STATE that follows.
// Changes a run's event does not foretell (started, blocked, skipped,
// landed, done) are left to their own events.
func settle(tasks []api.Task) {
	state := make(map[string]string, len(tasks))
	for _, t := range tasks {
		state[t.ID] = t.State
	}
	for i := range tasks {
		t := &tasks[i]
		switch {
		case t.State == storage.TaskPending:
			ready := true
			for _, d := range t.DependsOn {
				ready = ready && state[d] == storage.TaskDone
			}
			if ready {
				t.State = storage.TaskReady
			}
		case t.State != storage.TaskRunning && t.State != storage.TaskWaiting:
		case t.RunStatus == api.RunCompleted:
			t.State = storage.TaskLanding
		case t.RunStatus == api.RunWaiting:
			t.State = storage.TaskWaiting
		case t.RunStatus == api.RunRunning || t.RunStatus == api.RunPending:
			t.State = storage.TaskRunning
		}
	}
}

// Run resolves ref and describes the run, without its config; an unknown
// or ambiguous ref is the API's error for it.
func (s *Source) Run(ctx context.Context, ref string) (api.Run, error) {
	run, err := s.store.ResolveRun(ctx, ref, "")
	if err != nil {
		return api.Run{}, apiErr(err)
	}
	view, err := s.sched.Describe(ctx, run, scheduler.DescribeOptions{})
	view.Config = nil
	return view, err
}

// Steps lists a run's steps by seq, without final messages.
func (s *Source) Steps(ctx context.Context, runID string) ([]api.Step, error) {
	steps, err := s.store.StepsLight(ctx, runID)
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixMilli()
	out := make([]api.Step, len(steps))
	for i := range steps {
		out[i] = views.Step(&steps[i], now)
	}
	return out, nil
}

// StepsBetween lists the steps with fromSeq ≤ seq ≤ toSeq, with their
// final messages.
func (s *Source) StepsBetween(ctx context.Context, runID string, fromSeq, toSeq int) ([]dashboard.Step, error) {
	steps, err := s.store.StepsBetween(ctx, runID, fromSeq, toSeq)
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixMilli()
	out := make([]dashboard.Step, len(steps))
	for i := range steps {
		out[i] = dashboard.Step{Step: views.Step(&steps[i], now), FinalMessage: steps[i].FinalMessage}
	}
	return out, nil
}

// LastStep is the run's newest step, nil before its first.
func (s *Source) LastStep(ctx context.Context, runID string) (*api.Step, error) {
	st, err := s.store.LastStep(ctx, runID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := views.Step(&st, time.Now().UnixMilli())
	return &out, nil
}

// ChangedRuns lists the runs with events after after (each once) and the
// newest seq read.
func (s *Source) ChangedRuns(ctx context.Context, after int64, limit int) ([]string, int64, error) {
	return s.store.ChangedRuns(ctx, after, limit)
}

// Seq is the newest committed event seq.
func (s *Source) Seq() int64 { return s.bus.Seq() }

// Wait blocks until the event log passes after.
func (s *Source) Wait(ctx context.Context, after int64) (int64, error) {
	return s.bus.Wait(ctx, after)
}
