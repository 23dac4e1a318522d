package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ActiveInPlaceRun returns the oldest active (PENDING, RUNNING, PAUSED,
// WAITING) in-place run in workspace other than except, or ErrNotFound.
// Called in the transaction that inserts or resumes a run, it makes the
// one-active-run-per-workspace rule hold under racing starts: the writer
// is a single connection in BEGIN IMMEDIATE, so check and insert are one.
func (t *Tx) ActiveInPlaceRun(workspace, except string) (Run, error) {
	var r Run
	err := t.get(&r, `SELECT `+runColumns+` FROM runs
		WHERE workspace = ? AND isolation = 'in_place' AND id != ?
		AND status IN ('PENDING','RUNNING','PAUSED','WAITING')
		ORDER BY created_at, rowid LIMIT 1`, workspace, except)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// Git object kinds recorded in git_objects.
const (
	GitWorktree = "worktree"
	GitBranch   = "branch"
)

// GitObject is a worktree or branch loopd created for a run; loopd removes
// only what it recorded here.
type GitObject struct {
	ID        int64  `db:"id"`
	RunID     string `db:"run_id"`
	Kind      string `db:"kind"` // GitWorktree or GitBranch
	Repo      string `db:"repo"` // the repository's common git directory
	Name      string `db:"name"` // the worktree's path, or the branch's short name
	CreatedAt int64  `db:"created_at"`
	RemovedAt *int64 `db:"removed_at"`
	GoneAt    *int64 `db:"gone_at"`
}

// RecordGitObject records a worktree or branch loopd is about to create.
// It is recorded before git runs, so that a crash in between leaves a
// record of something that may exist (reconciled later), never an object
// loopd made and forgot. Recording the same object twice is a no-op.
func (t *Tx) RecordGitObject(o GitObject) error {
	_, err := t.exec(`INSERT INTO git_objects (run_id, kind, repo, name, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (repo, kind, name) DO NOTHING`, o.RunID, o.Kind, o.Repo, o.Name, t.now)
	if err != nil {
		return fmt.Errorf("record git %s: %w", o.Kind, err)
	}
	return nil
}

// GitObjects lists what loopd created in git for a run.
func (s *Store) GitObjects(ctx context.Context, runID string) ([]GitObject, error) {
	var out []GitObject
	err := s.sel(ctx, &out, `SELECT id, run_id, kind, repo, name, created_at, removed_at, gone_at
		FROM git_objects WHERE run_id = ? ORDER BY id`, runID)
	return out, err
}

// SetWorktreeState records what loopd last saw of a run's worktree: ""
// (none yet), "present", "gone" (removed by someone else) or "removed"
// (by loopd). updated_at is left alone: it dates the run's status.
func (t *Tx) SetWorktreeState(runID, state string) error {
	res, err := t.exec(`UPDATE runs SET worktree_state = ? WHERE id = ?`, state, runID)
	if err != nil {
		return fmt.Errorf("set worktree state: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}
