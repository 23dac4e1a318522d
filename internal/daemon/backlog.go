package daemon

import (
	"net/http"
	"strings"

	"github.com/loopd/loopd/internal/storage"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/dashboard"
)

// handleTasks is GET /v1/runs/{ref}/tasks: a backlog run's tasks (a task
// run names its backlog: `loopctl tasks last` right after a task run
// started is about the backlog).
func (d *Daemon) handleTasks(w http.ResponseWriter, r *http.Request) {
	run, err := d.resolveBacklog(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	out, err := d.sched.BacklogTasks(r.Context(), run)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// handleRetryTask is POST /v1/runs/{ref}/tasks/{task}/retry: a blocked
// task re-opened, answered with the backlog's tasks.
func (d *Daemon) handleRetryTask(w http.ResponseWriter, r *http.Request) {
	var req api.RetryTaskRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	run, err := d.resolveBacklog(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if d.sessionOnly(r) {
		// What a session may set on resume, it may set on a retry.
		if err := dashboard.ResumeRefusal(req.Set); err != nil {
			d.fail(w, r, err)
			return
		}
	}
	if err := d.sched.RetryTask(r.Context(), run.ID, r.PathValue("task"), req.Set); err != nil {
		d.fail(w, r, err)
		return
	}
	run, err = d.store.Run(r.Context(), run.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	out, err := d.sched.BacklogTasks(r.Context(), run)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// resolveBacklog is resolve, with a task run standing for its backlog.
func (d *Daemon) resolveBacklog(r *http.Request) (storage.Run, error) {
	run, err := d.resolve(r)
	if err != nil || run.Parent == "" {
		return run, err
	}
	return d.store.Run(r.Context(), run.Parent)
}

// taskRunRefusal refuses a request that would steer a task run around its
// backlog's coordinator: the run's work must reach the user's checkout only
// through the backlog's land queue and integration branch, and the
// coordinator's record of the task must keep matching the run. A land or
// push of a task run would put its work outside the integration branch; a
// resume (or --onto-base) would restart a run the coordinator took for
// ended or held; a pause would leave the task `running` with no way back
// but the backlog's own resume. The coordinator itself calls the scheduler
// directly and never comes through here. verb is the refused command;
// instead, what to run in its place.
func (d *Daemon) taskRunRefusal(r *http.Request, id, verb, instead string) error {
	run, err := d.store.Run(r.Context(), id)
	if err != nil || run.Parent == "" {
		return err
	}
	return api.Errorf(api.CodeConflict, "refused: run %s is a task run of backlog %s, which %ss it; use %s",
		id, run.Parent, verb, strings.ReplaceAll(instead, "BACKLOG", run.Parent))
}
