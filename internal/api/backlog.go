package api

import (
	"context"
	"net/http"
	"net/url"
)

// Task is one task of a backlog run and where it stands: what
// `loopctl tasks RUN --json` prints and GET /v1/runs/{id}/tasks answers.
type Task struct {
	ID          string   `json:"id"`
	Position    int      `json:"position"` // 1-based, list order
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	DependsOn   []string `json:"depends_on"`
	Priority    int      `json:"priority,omitempty"` // 1 goes first; 0 not given
	// State is pending, ready, running, waiting, landing, done, blocked or
	// skipped; Why says why a task is blocked or skipped.
	State string `json:"state"`
	Why   string `json:"why,omitempty"`
	// Run is the task run's id ("" before the task started) and RunStatus
	// its status.
	Run       string    `json:"run"`
	RunStatus RunStatus `json:"run_status,omitempty"`
	// Iterations, Usage and Tests are the task run's (zero before it
	// started); Tests are its last verification's, nil when none ran.
	Iterations int    `json:"iterations"`
	Usage      Usage  `json:"usage"`
	Tests      *Tests `json:"tests"`
	// FilesChanged, Insertions and Deletions are the task run's recorded
	// changes, summed over its iterations.
	FilesChanged int `json:"files_changed"`
	Insertions   int `json:"insertions"`
	Deletions    int `json:"deletions"`
	// LandAttempts counts the lands into the integration branch that were
	// refused and sent back to the task run.
	LandAttempts int `json:"land_attempts"`
	// LandedCommit is the integration branch's commit once the task
	// landed; Verified says the landed combination was tested.
	LandedCommit string `json:"landed_commit"`
	Verified     bool   `json:"verified"`
}

// BacklogTasks is a backlog run's tasks, in list order.
type BacklogTasks struct {
	Backlog string    `json:"backlog"` // the backlog run's id
	Status  RunStatus `json:"status"`
	Reason  string    `json:"reason"`
	Goal    string    `json:"goal"`
	// Branch is the integration branch (loop/<short-id>) every task lands
	// into; BaseBranch is the branch `loopctl land BACKLOG` lands it into.
	Branch     string `json:"branch"`
	BaseBranch string `json:"base_branch"`
	Tasks      []Task `json:"tasks"`
}

// RetryTaskRequest re-opens a blocked task (and the tasks skipped because
// of it): POST /v1/runs/{id}/tasks/{task}/retry. Set changes the task's
// settings (key=value) for its next task run.
type RetryTaskRequest struct {
	Set []string `json:"set,omitempty"`
}

// Tasks returns a backlog run's tasks.
func (c *Client) Tasks(ctx context.Context, ref RunRef) (BacklogTasks, error) {
	var out BacklogTasks
	err := c.do(ctx, http.MethodGet, ref.path("/tasks"), ref.query(), nil, &out)
	return out, err
}

// RetryTask re-opens a blocked task of a backlog run (and the tasks skipped
// because of it) and returns the backlog's tasks after it.
func (c *Client) RetryTask(ctx context.Context, ref RunRef, task string, req RetryTaskRequest) (BacklogTasks, error) {
	var out BacklogTasks
	err := c.do(ctx, http.MethodPost, ref.path("/tasks/"+url.PathEscape(task)+"/retry"), ref.query(), req, &out)
	return out, err
}
