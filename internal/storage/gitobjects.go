package storage

import (
	"context"
	"fmt"

	"github.com/loopd/loopd/internal/events"
)

const gitObjectColumns = `id, run_id, kind, repo, name, created_at, removed_at, gone_at`

// LiveWorktrees lists the worktrees loopd recorded and believes exist:
// not removed, not found gone, and made (the run's worktree_state is
// "present"; a worktree is recorded before git creates it, when the run
// starts, and a record of one not made yet must not be taken for one
// removed by hand). Oldest first; runID "" selects every run's.
func (s *Store) LiveWorktrees(ctx context.Context, runID string) ([]GitObject, error) {
	var objs []GitObject
	err := s.sel(ctx, &objs, `SELECT g.id, g.run_id, g.kind, g.repo, g.name, g.created_at, g.removed_at, g.gone_at
		FROM git_objects g JOIN runs r ON r.id = g.run_id
		WHERE g.kind = 'worktree' AND g.removed_at IS NULL AND g.gone_at IS NULL AND (? = '' OR g.run_id = ?)
		AND r.worktree_state = 'present' AND r.worktree = g.name
		ORDER BY g.id`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	return objs, nil
}

// RunWorktrees lists every worktree record of one run, whatever its state.
func (s *Store) RunWorktrees(ctx context.Context, runID string) ([]GitObject, error) {
	var objs []GitObject
	err := s.sel(ctx, &objs, `SELECT `+gitObjectColumns+` FROM git_objects
		WHERE kind = 'worktree' AND run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list worktrees of %s: %w", runID, err)
	}
	return objs, nil
}

// EndedWorktreeRuns lists the ids of ended runs that ended at or before
// endedBefore (Unix ms) and still have a worktree record not removed,
// oldest first: what `loopctl clean --ended` visits.
func (s *Store) EndedWorktreeRuns(ctx context.Context, endedBefore int64) ([]string, error) {
	var ids []string
	// EXISTS rather than DISTINCT over a join: PostgreSQL refuses ORDER BY
	// columns a SELECT DISTINCT does not select.
	err := s.sel(ctx, &ids, `SELECT r.id FROM runs r
		WHERE r.status IN ('COMPLETED','FAILED','ABORTED','INTERRUPTED') AND r.ended_at <= ?
		AND EXISTS (SELECT 1 FROM git_objects g WHERE g.run_id = r.id AND g.kind = 'worktree' AND g.removed_at IS NULL)
		ORDER BY r.ended_at, r.id`, endedBefore)
	if err != nil {
		return nil, fmt.Errorf("list ended runs with worktrees: %w", err)
	}
	return ids, nil
}

// EndedFleetRuns lists the fleet runs (with a repo_url) that ended at or
// before endedBefore and were not cleaned yet: their worktrees are on
// their workers, which remove them once the run is marked cleaned.
func (s *Store) EndedFleetRuns(ctx context.Context, endedBefore int64) ([]Run, error) {
	var runs []Run
	err := s.sel(ctx, &runs, `SELECT `+runColumns+` FROM runs
		WHERE status IN ('COMPLETED','FAILED','ABORTED','INTERRUPTED') AND ended_at <= ?
		AND repo_url <> '' AND worktree_state <> 'removed'
		ORDER BY ended_at, id`, endedBefore)
	if err != nil {
		return nil, fmt.Errorf("list ended fleet runs: %w", err)
	}
	return runs, nil
}

// MarkWorktreeGone records that a worktree loopd made was removed by
// someone else; the run's worktree_state becomes "gone" unless loopd has
// already removed it.
func (t *Tx) MarkWorktreeGone(o GitObject) error {
	if _, err := t.exec(`UPDATE git_objects SET gone_at = ? WHERE id = ? AND gone_at IS NULL AND removed_at IS NULL`,
		t.now, o.ID); err != nil {
		return fmt.Errorf("mark worktree gone: %w", err)
	}
	if _, err := t.exec(`UPDATE runs SET worktree_state = 'gone', updated_at = ? WHERE id = ? AND worktree = ?
		AND worktree_state = 'present'`, t.now, o.RunID, o.Name); err != nil {
		return fmt.Errorf("mark run's worktree gone: %w", err)
	}
	return nil
}

// MarkWorktreeRemoved records that loopd removed one of its worktrees.
func (t *Tx) MarkWorktreeRemoved(o GitObject) error {
	if _, err := t.exec(`UPDATE git_objects SET removed_at = ? WHERE id = ? AND removed_at IS NULL`,
		t.now, o.ID); err != nil {
		return fmt.Errorf("mark worktree removed: %w", err)
	}
	if _, err := t.exec(`UPDATE runs SET worktree_state = 'removed', updated_at = ? WHERE id = ? AND worktree = ?`,
		t.now, o.RunID, o.Name); err != nil {
		return fmt.Errorf("mark run's worktree removed: %w", err)
	}
	return nil
}

// RecordPushed records a push of a run's branch (loopctl land --push):
// a RUN_LANDED event with payload, and no landed_commit, since the base
// branch did not move.
func (t *Tx) RecordPushed(runID string, payload any) error {
	var n int
	if err := t.get(&n, `SELECT COUNT(*) FROM runs WHERE id = ?`, runID); err != nil {
		return fmt.Errorf("record push: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	_, err := t.Event(runID, nil, events.RunLanded, payload)
	return err
}

// RecordLandedOnce is RecordLanded of a run not landed yet: a land
// recorded already is ErrConflict (two lands of one fleet run from two
// clones: the second record is refused, not a second RUN_LANDED).
func (t *Tx) RecordLandedOnce(runID, commit string, payload any) error {
	res, err := t.exec(`UPDATE runs SET landed_commit = ?, updated_at = ? WHERE id = ? AND landed_commit = ''`, commit, t.now, runID)
	if err != nil {
		return fmt.Errorf("record landed commit: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("run %s: landed already or gone: %w", runID, ErrConflict)
	}
	_, err = t.Event(runID, nil, events.RunLanded, payload)
	return err
}

// RecordLanded stores the commit a land moved the base branch to, with
// the RUN_LANDED event.
func (t *Tx) RecordLanded(runID, commit string, payload any) error {
	res, err := t.exec(`UPDATE runs SET landed_commit = ?, updated_at = ? WHERE id = ?`, commit, t.now, runID)
	if err != nil {
		return fmt.Errorf("record landed commit: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	_, err = t.Event(runID, nil, events.RunLanded, payload)
	return err
}
