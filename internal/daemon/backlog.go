package daemon

import (
	"net/http"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/dashboard"
	"github.com/loopd/loopd/internal/storage"
)

// handleTasks is GET /v1/runs/{ref}/tasks: a backlog run's tasks (a task
// run names its backlog).
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
	out, err := d.sched.RetryTask(r.Context(), run.ID, r.PathValue("task"), req.Set)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// resolveBacklog is resolve, with a task run standing for its backlog.
func (d *Daemon) resolveBacklog(r *http.Request) (storage.Run, error) {
	run, err := d.resolve(r)
	if err != nil {
		return run, err
	}
	return d.sched.BacklogOf(r.Context(), run)
}
