package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

// Run is a row of the runs table.
type Run struct {
	ID           string        `db:"id"`
	Name         string        `db:"name"`
	Workspace    string        `db:"workspace"`
	Goal         string        `db:"goal"`
	Config       string        `db:"config"`     // frozen config JSON
	Conditions   string        `db:"conditions"` // frozen stop.Set JSON
	Status       api.RunStatus `db:"status"`
	Reason       string        `db:"reason"`
	Description  string        `db:"description"`
	Condition    string        `db:"condition"`
	ExitCode     *int          `db:"exit_code"`
	StopRequest  string        `db:"stop_request"` // "", "graceful" or "now"
	PauseRequest bool          `db:"pause_request"`
	UserSignal   bool          `db:"user_signal"`
	WaitUntil    *int64        `db:"wait_until"`
	PostmortemAt *int64        `db:"postmortem_at"`
	CreatedAt    int64         `db:"created_at"`
	StartedAt    *int64        `db:"started_at"`
	EndedAt      *int64        `db:"ended_at"`
	UpdatedAt    int64         `db:"updated_at"`

	// Workspace isolation (docs/workspaces.md).
	Isolation     string `db:"isolation"`      // "in_place" or "worktree"
	Worktree      string `db:"worktree"`       // the run's worktree; "" for in_place
	Branch        string `db:"branch"`         // loop/<short-id>
	BaseBranch    string `db:"base_branch"`    // the checkout's branch when the run started
	BaseCommit    string `db:"base_commit"`    // the checkout's HEAD when the run started
	LandedCommit  string `db:"landed_commit"`  // what `loopctl land` made or moved the base branch to
	WorktreeState string `db:"worktree_state"` // "", "present", "gone" (removed by hand) or "removed" (cleaned)

	// RepoURL is the repository a fleet run comes from (`loopctl start`
	// against LOOPD_URL: the clone's origin); BaseCommit is then its HEAD.
	RepoURL string `db:"repo_url"`
	// CreatedBy is the name of the user token a run was created with
	// ("" on the socket or with the node's own http.token).
	CreatedBy string `db:"created_by"`
	// Worker is the fleet worker that holds, or last held, the run's
	// lease (docs/fleet.md); "" in the embedded mode.
	Worker string `db:"lease_owner"`
	// Backlogs (docs/backlogs.md).
	Kind   string `db:"kind"`   // KindBacklog for a backlog run, "" for any other
	Parent string `db:"parent"` // a task run's backlog; "" otherwise
}

// KindBacklog is runs.kind of a backlog run.
const KindBacklog = "backlog"

// Stop request kinds stored in runs.stop_request.
const (
	StopGraceful = "graceful" // finish the current step, then INTERRUPTED
	StopNow      = "now"      // kill the current step, then INTERRUPTED
)

// runColumns are the columns a run is read with; runInsertColumns those
// InsertRun writes (the lease is only ever set by a fleet worker's claim).
const runColumns = runInsertColumns + `, lease_owner`

const runInsertColumns = `id, name, workspace, goal, config, conditions, status, reason, description, condition,
	exit_code, stop_request, pause_request, user_signal, wait_until, postmortem_at, created_at, started_at, ended_at, updated_at,
	isolation, worktree, branch, base_branch, base_commit, landed_commit, worktree_state, repo_url, created_by, kind, parent`

// InsertRun creates a run and its RUN_CREATED event.
func (t *Tx) InsertRun(r Run, payload any) error {
	t.flags = true
	r.CreatedAt, r.UpdatedAt = t.now, t.now
	if r.Isolation == "" {
		r.Isolation = "in_place"
	}
	_, err := t.namedExec(`INSERT INTO runs (`+runInsertColumns+`) VALUES (
		:id, :name, :workspace, :goal, :config, :conditions, :status, :reason, :description, :condition,
		:exit_code, :stop_request, :pause_request, :user_signal, :wait_until, :postmortem_at, :created_at, :started_at, :ended_at, :updated_at,
		:isolation, :worktree, :branch, :base_branch, :base_commit, :landed_commit, :worktree_state, :repo_url, :created_by, :kind, :parent)`, r)
	if err != nil {
		return fmt.Errorf("insert run: %w", err)
	}
	_, err = t.Event(r.ID, nil, events.RunCreated, payload)
	return err
}

// Run reads a run inside the transaction.
func (t *Tx) Run(id string) (Run, error) {
	var r Run
	err := t.get(&r, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// Transition is a compare-and-set change of a run's status together with
// the event that records it.
type Transition struct {
	RunID string
	From  []api.RunStatus // the change applies only from one of these
	To    api.RunStatus

	// Terminal details; set for terminal statuses.
	Reason, Description, Condition string

	WaitUntil     *int64 // WAITING: when to resume
	ClearRequests bool   // reset pending stop and pause requests
	Event         events.Type
	StepID        *int64
	Payload       any
}

// TransitionRun applies tr: ErrConflict when the run is not in a From status.
func (t *Tx) TransitionRun(tr Transition) error {
	if len(tr.From) == 0 {
		return fmt.Errorf("transition %s: no from statuses", tr.RunID)
	}
	var exit *int
	var ended *int64
	if tr.To.Terminal() {
		c := tr.To.ExitCode()
		exit, ended = &c, &t.now
	}
	// Any change of status makes the postmortem of an earlier ending stale.
	set := []string{"status = ?", "reason = ?", "description = ?", "condition = ?", "exit_code = ?",
		"ended_at = ?", "wait_until = ?", "updated_at = ?", "postmortem_at = NULL", "postmortem_owner = ''"}
	args := []any{tr.To, tr.Reason, tr.Description, tr.Condition, exit, ended, tr.WaitUntil, t.now}
	if tr.To == api.RunRunning {
		set = append(set, "started_at = COALESCE(started_at, ?)")
		args = append(args, t.now)
	}
	if tr.ClearRequests {
		set = append(set, "stop_request = ''", "pause_request = 0")
	}
	t.flags = true
	q := `UPDATE runs SET ` + strings.Join(set, ", ") + ` WHERE id = ? AND status IN (?` +
		strings.Repeat(", ?", len(tr.From)-1) + `)`
	args = append(args, tr.RunID)
	for _, f := range tr.From {
		args = append(args, f)
	}
	res, err := t.exec(q, args...)
	if err != nil {
		return fmt.Errorf("transition run %s to %s: %w", tr.RunID, tr.To, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("run %s to %s: %w", tr.RunID, tr.To, ErrConflict)
	}
	if tr.Event != "" {
		if _, err := t.Event(tr.RunID, tr.StepID, tr.Event, tr.Payload); err != nil {
			return err
		}
	}
	return nil
}

// SetStopRequest records a stop request on a run that has not ended.
func (t *Tx) SetStopRequest(id, kind string) error {
	return t.updateLive(id, `stop_request = ?`, kind)
}

// SetPauseRequest records (or clears) a pause request on a run that has not ended.
func (t *Tx) SetPauseRequest(id string, on bool) error {
	return t.updateLive(id, `pause_request = ?`, on)
}

// SetUserSignal raises the run's user_signal condition.
func (t *Tx) SetUserSignal(id string) error {
	return t.updateLive(id, `user_signal = 1`)
}

// UpdateConfig replaces a run's frozen config and conditions (resume --set).
func (t *Tx) UpdateConfig(id, config, conditions string) error {
	res, err := t.exec(`UPDATE runs SET config = ?, conditions = ?, updated_at = ? WHERE id = ?`,
		config, conditions, t.now, id)
	if err != nil {
		return fmt.Errorf("update run config: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

func (t *Tx) updateLive(id, set string, args ...any) error {
	t.flags = true // every caller sets one of the run's Flags
	args = append(args, t.now, id)
	res, err := t.exec(`UPDATE runs SET `+set+`, updated_at = ? WHERE id = ?
		AND status NOT IN ('COMPLETED','FAILED','ABORTED','INTERRUPTED')`, args...)
	if err != nil {
		return fmt.Errorf("update run %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("run %s has ended: %w", id, ErrConflict)
	}
	return nil
}

// Run reads one run by its full id.
func (s *Store) Run(ctx context.Context, id string) (Run, error) {
	var r Run
	err := s.get(ctx, &r, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return r, err
}

// ResolveRun finds the run a user named: "last" (the newest run in
// workspace, or anywhere when workspace is ""), a full id, or a unique id
// prefix.
func (s *Store) ResolveRun(ctx context.Context, ref, workspace string) (Run, error) {
	if ref == "" {
		return Run{}, fmt.Errorf("empty run id: %w", ErrNotFound)
	}
	if ref == "last" {
		var r Run
		var err error
		if workspace != "" {
			err = s.get(ctx, &r, `SELECT `+runColumns+` FROM runs WHERE workspace = ?
				ORDER BY created_at DESC, rowid DESC LIMIT 1`, workspace)
		} else {
			err = s.get(ctx, &r, `SELECT `+runColumns+` FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1`)
		}
		if errors.Is(err, sql.ErrNoRows) {
			where := "any workspace"
			if workspace != "" {
				where = workspace
			}
			return r, fmt.Errorf("no runs in %s: %w", where, ErrNotFound)
		}
		return r, err
	}
	if r, err := s.Run(ctx, ref); err == nil || !errors.Is(err, ErrNotFound) {
		return r, err
	}
	// Prefix match; ids are lowercase hex, so anything else cannot match.
	ref = strings.ToLower(ref)
	if strings.Trim(ref, "0123456789abcdef") != "" {
		return Run{}, fmt.Errorf("run %q: %w", ref, ErrNotFound)
	}
	var ids []string
	if err := s.sel(ctx, &ids, `SELECT id FROM runs WHERE id >= ? AND id < ? ORDER BY id LIMIT 6`,
		ref, ref+"\uffff"); err != nil {
		return Run{}, err
	}
	switch len(ids) {
	case 0:
		return Run{}, fmt.Errorf("run %q: %w", ref, ErrNotFound)
	case 1:
		return s.Run(ctx, ids[0])
	}
	return Run{}, &AmbiguousError{Prefix: ref, Matches: ids}
}

// RunFilter selects runs for ListRuns.
type RunFilter struct {
	Status    api.RunStatus // "" = any
	Workspace string        // "" = any
	Limit     int           // 0 = 100
}

// ListRuns lists runs, newest first.
func (s *Store) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	var where []string
	var args []any
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, f.Status)
	}
	if f.Workspace != "" {
		where = append(where, "workspace = ?")
		args = append(args, f.Workspace)
	}
	q := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q += ` ORDER BY created_at DESC, rowid DESC LIMIT ?`
	args = append(args, limit)
	var runs []Run
	err := s.sel(ctx, &runs, q, args...)
	return runs, err
}

// RunsInStatus lists runs in any of the given statuses, oldest first.
func (s *Store) RunsInStatus(ctx context.Context, statuses ...api.RunStatus) ([]Run, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	args := make([]any, len(statuses))
	for i, st := range statuses {
		args[i] = st
	}
	var runs []Run
	err := s.sel(ctx, &runs, `SELECT `+runColumns+` FROM runs WHERE status IN (?`+
		strings.Repeat(", ?", len(statuses)-1)+`) ORDER BY created_at, rowid`, args...)
	return runs, err
}

// Claimable returns the oldest run that may start now: PENDING, or WAITING
// with its usage limit reset. ErrNotFound when there is none.
func (s *Store) Claimable(ctx context.Context, now int64) (Run, error) {
	var r Run
	err := s.get(ctx, &r, `SELECT `+runColumns+` FROM runs
		WHERE status = 'PENDING' OR (status = 'WAITING' AND COALESCE(wait_until, 0) <= ? AND reason <> '`+ReasonNeedsAnswer+`')
		ORDER BY created_at, rowid LIMIT 1`, now)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// ReasonNeedsAnswer is the reason of a run WAITING for the user's answer
// to its agent's question: it has no reset time and is never claimed by
// itself, only resumed by an answer.
const ReasonNeedsAnswer = "needs_answer"

// NextWakeUp returns the earliest reset time among WAITING runs, or 0.
func (s *Store) NextWakeUp(ctx context.Context) (int64, error) {
	var at sql.NullInt64
	err := s.get(ctx, &at, `SELECT MIN(COALESCE(wait_until, 0)) FROM runs WHERE status = 'WAITING' AND reason <> '`+ReasonNeedsAnswer+`'`)
	return at.Int64, err
}

// MarkPostmortem records that a terminal run's postmortem was written, with
// its POSTMORTEM_WRITTEN event (compare-and-set: ErrConflict when the run
// is no longer in the status the postmortem describes, or its postmortem
// was already recorded, so there is never a second event for one ending).
func (t *Tx) MarkPostmortem(id string, status api.RunStatus, payload any) error {
	res, err := t.exec(`UPDATE runs SET postmortem_at = ? WHERE id = ? AND status = ?
		AND postmortem_at IS NULL`, t.now, id, status)
	if err != nil {
		return fmt.Errorf("mark postmortem: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("mark postmortem of %s: %w", id, ErrConflict)
	}
	_, err = t.Event(id, nil, events.PostmortemWritten, payload)
	return err
}

// PostmortemsDue lists terminal runs whose postmortem was not written (the
// daemon died between the terminal commit and the report).
func (s *Store) PostmortemsDue(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.sel(ctx, &ids, `SELECT id FROM runs WHERE postmortem_at IS NULL
		AND status IN ('COMPLETED','FAILED','ABORTED','INTERRUPTED') ORDER BY created_at`)
	return ids, err
}

// ClearUserSignal lowers a run's user_signal.
func (t *Tx) ClearUserSignal(id string) error {
	t.flags = true
	_, err := t.exec(`UPDATE runs SET user_signal = 0, updated_at = ? WHERE id = ?`, t.now, id)
	return err
}

// Flags are the parts of a run that change while it runs: its status and
// the user's pending requests.
type Flags struct {
	Status       api.RunStatus `db:"status"`
	StopRequest  string        `db:"stop_request"`
	PauseRequest bool          `db:"pause_request"`
	UserSignal   bool          `db:"user_signal"`
}

// RunFlags reads a run's Flags: what a runner checks between steps, at a
// fraction of the cost of the whole row.
func (s *Store) RunFlags(ctx context.Context, id string) (Flags, error) {
	var f Flags
	err := s.get(ctx, &f, qFlags, id)
	if errors.Is(err, sql.ErrNoRows) {
		return f, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return f, err
}

const qFlags = `SELECT status, stop_request, pause_request, user_signal FROM runs WHERE id = ?`

// Flags reads a run's Flags inside the transaction.
func (t *Tx) Flags(id string) (Flags, error) {
	var f Flags
	err := t.get(&f, qFlags, id)
	if errors.Is(err, sql.ErrNoRows) {
		return f, fmt.Errorf("run %s: %w", id, ErrNotFound)
	}
	return f, err
}
