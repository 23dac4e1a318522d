package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Task states (docs/backlogs.md).
const (
	TaskPending = "pending" // waiting for its dependencies
	TaskReady   = "ready"   // every dependency landed; waiting for a slot
	TaskRunning = "running" // its task run is under way
	TaskWaiting = "waiting" // its task run waits (a usage limit, a question)
	TaskLanding = "landing" // its task run completed; in the land queue or being landed
	TaskDone    = "done"    // landed into the integration branch
	TaskBlocked = "blocked" // cannot go on; why says why
	TaskSkipped = "skipped" // a dependency is blocked
)

// Task is a row of the tasks table: one task of a backlog run, as its list
// gave it at start, and where it stands.
type Task struct {
	Backlog       string `db:"backlog"`
	ID            string `db:"id"`
	Position      int    `db:"position"` // 1-based, list order
	Title         string `db:"title"`
	Description   string `db:"description"`
	DependsOn     string `db:"depends_on"` // JSON array of task ids
	VerifyCommand string `db:"verify_command"`
	Settings      string `db:"settings"` // JSON object, config key to value (the list's "set")
	Priority      int    `db:"priority"`
	State         string `db:"state"`
	Why           string `db:"why"`
	TaskRun       string `db:"task_run"`
	LandAttempts  int    `db:"land_attempts"`
	LandBase      string `db:"land_base"` // landing: the integration tip the land started from
	LandedCommit  string `db:"landed_commit"`
	Verified      bool   `db:"verified"`
	UpdatedAt     int64  `db:"updated_at"`
}

// Deps decodes DependsOn; a row written by InsertTask always decodes.
func (t Task) Deps() []string {
	var ids []string
	_ = json.Unmarshal([]byte(t.DependsOn), &ids)
	return ids
}

// Set decodes Settings: config key to value (the task's layer over the
// backlog's config).
func (t Task) Set() map[string]string {
	m := map[string]string{}
	_ = json.Unmarshal([]byte(t.Settings), &m)
	return m
}

const taskColumns = `backlog, id, position, title, description, depends_on, verify_command, settings, priority,
	state, why, task_run, land_attempts, land_base, landed_commit, verified, updated_at`

// InsertTask adds a task to a backlog (at start, in the backlog's creating
// transaction).
func (t *Tx) InsertTask(task Task) error {
	task.UpdatedAt = t.now
	if task.DependsOn == "" {
		task.DependsOn = "[]"
	}
	if task.Settings == "" {
		task.Settings = "{}"
	}
	_, err := t.namedExec(`INSERT INTO tasks (`+taskColumns+`) VALUES (:backlog, :id, :position, :title, :description,
		:depends_on, :verify_command, :settings, :priority, :state, :why, :task_run, :land_attempts, :land_base,
		:landed_commit, :verified, :updated_at)`, task)
	if err != nil {
		return fmt.Errorf("insert task %s: %w", task.ID, err)
	}
	return nil
}

// Tasks reads a backlog's tasks inside the transaction, in list order.
func (t *Tx) Tasks(backlog string) ([]Task, error) {
	var out []Task
	err := t.sel(&out, `SELECT `+taskColumns+` FROM tasks WHERE backlog = ? ORDER BY position`, backlog)
	return out, err
}

// Tasks reads a backlog's tasks, in list order (none: not a backlog).
func (s *Store) Tasks(ctx context.Context, backlog string) ([]Task, error) {
	var out []Task
	err := s.sel(ctx, &out, `SELECT `+taskColumns+` FROM tasks WHERE backlog = ? ORDER BY position`, backlog)
	return out, err
}

// TaskOfRun reads the task a task run runs: ErrNotFound for a run that is
// no task's.
func (s *Store) TaskOfRun(ctx context.Context, runID string) (Task, error) {
	var out Task
	err := s.get(ctx, &out, `SELECT `+taskColumns+` FROM tasks WHERE task_run = ?`, runID)
	if errors.Is(err, sql.ErrNoRows) {
		return out, fmt.Errorf("task of run %s: %w", runID, ErrNotFound)
	}
	return out, err
}

// ChildRuns reads the task runs of a backlog, oldest first.
func (s *Store) ChildRuns(ctx context.Context, parent string) ([]Run, error) {
	var out []Run
	err := s.sel(ctx, &out, `SELECT `+runColumns+` FROM runs WHERE parent = ? ORDER BY created_at, rowid`, parent)
	return out, err
}

// TaskChange is a compare-and-set change of a task: it applies only while
// the task is in one of From. Nil fields are left as they are.
type TaskChange struct {
	Backlog, ID string
	From        []string
	To          string
	Why         *string
	TaskRun     *string
	LandBase    *string
	Landed      *string
	Verified    *bool
	Settings    *string // JSON object (loopctl tasks --retry --set)
	// LandAttempt adds one to land_attempts (a refused land sent back);
	// ResetLandAttempts sets it to 0 (a retry).
	LandAttempt, ResetLandAttempts bool
}

// ChangeTask applies c: ErrConflict when the task is not in a From state,
// ErrNotFound when there is no such task.
func (t *Tx) ChangeTask(c TaskChange) error {
	if len(c.From) == 0 {
		return fmt.Errorf("change task %s: no from states", c.ID)
	}
	set := []string{"state = ?", "updated_at = ?"}
	args := []any{c.To, t.now}
	add := func(col string, v any) {
		set = append(set, col+" = ?")
		args = append(args, v)
	}
	if c.Why != nil {
		add("why", *c.Why)
	}
	if c.TaskRun != nil {
		add("task_run", *c.TaskRun)
	}
	if c.LandBase != nil {
		add("land_base", *c.LandBase)
	}
	if c.Landed != nil {
		add("landed_commit", *c.Landed)
	}
	if c.Verified != nil {
		add("verified", *c.Verified)
	}
	if c.Settings != nil {
		add("settings", *c.Settings)
	}
	switch {
	case c.LandAttempt:
		set = append(set, "land_attempts = land_attempts + 1")
	case c.ResetLandAttempts:
		set = append(set, "land_attempts = 0")
	}
	q := `UPDATE tasks SET ` + strings.Join(set, ", ") + ` WHERE backlog = ? AND id = ? AND state IN (?` +
		strings.Repeat(", ?", len(c.From)-1) + `)`
	args = append(args, c.Backlog, c.ID)
	for _, f := range c.From {
		args = append(args, f)
	}
	res, err := t.exec(q, args...)
	if err != nil {
		return fmt.Errorf("change task %s to %s: %w", c.ID, c.To, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var one int
		if err := t.get(&one, `SELECT 1 FROM tasks WHERE backlog = ? AND id = ?`, c.Backlog, c.ID); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("task %s of %s: %w", c.ID, c.Backlog, ErrNotFound)
		}
		return fmt.Errorf("task %s to %s: %w", c.ID, c.To, ErrConflict)
	}
	return nil
}
