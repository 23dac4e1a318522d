package storage

import (
	"context"
	"fmt"
)

// EndedRunsWithGitRefs lists the ids of ended runs (ended at or before
// endedBefore, Unix ms) that may still have git refs loopd made: a branch
// record not removed (worktree runs) or snapshot refs (in-place runs in
// git). Oldest first: what `loopctl clean --ended --branches` visits.
func (s *Store) EndedRunsWithGitRefs(ctx context.Context, endedBefore int64) ([]string, error) {
	var ids []string
	err := s.sel(ctx, &ids, `SELECT r.id FROM runs r
		WHERE r.status IN ('COMPLETED','FAILED','ABORTED','INTERRUPTED') AND r.ended_at <= ?
		AND (r.isolation = 'in_place' OR EXISTS (SELECT 1 FROM git_objects g
			WHERE g.run_id = r.id AND g.kind = 'branch' AND g.removed_at IS NULL))
		ORDER BY r.ended_at, r.id`, endedBefore)
	if err != nil {
		return nil, fmt.Errorf("list ended runs with git refs: %w", err)
	}
	return ids, nil
}

// RunBranches lists a run's branch records that are not removed.
func (s *Store) RunBranches(ctx context.Context, runID string) ([]GitObject, error) {
	var objs []GitObject
	err := s.sel(ctx, &objs, `SELECT `+gitObjectColumns+` FROM git_objects
		WHERE kind = 'branch' AND run_id = ? AND removed_at IS NULL ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list branches of %s: %w", runID, err)
	}
	return objs, nil
}

// MarkBranchRemoved records that loopd deleted one of its branches.
func (t *Tx) MarkBranchRemoved(o GitObject) error {
	if _, err := t.exec(`UPDATE git_objects SET removed_at = ? WHERE id = ? AND kind = 'branch' AND removed_at IS NULL`,
		t.now, o.ID); err != nil {
		return fmt.Errorf("mark branch removed: %w", err)
	}
	return nil
}
