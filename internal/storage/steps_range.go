package storage

import (
	"context"
)

// StepsBetween lists a run's steps with fromSeq ≤ seq ≤ toSeq, with every
// column: one page of a long run's ledger, read through the (run_id, seq)
// index without loading the rest.
func (s *Store) StepsBetween(ctx context.Context, runID string, fromSeq, toSeq int) ([]Step, error) {
	var steps []Step
	err := s.sel(ctx, &steps, `SELECT `+stepColumns+` FROM steps WHERE run_id = ? AND seq BETWEEN ? AND ? ORDER BY seq`,
		runID, fromSeq, toSeq)
	return steps, err
}

// ChangedRuns lists the runs that have events with seq > after (each run
// once, in order of their first such event), reading at most limit
// events, and the newest seq read (after when there is none).
func (s *Store) ChangedRuns(ctx context.Context, after int64, limit int) ([]string, int64, error) {
	var rows []struct {
		Seq   int64  `db:"seq"`
		RunID string `db:"run_id"`
	}
	if err := s.sel(ctx, &rows, `SELECT seq, run_id FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit); err != nil {
		return nil, after, err
	}
	var ids []string
	seen := map[string]bool{}
	for _, r := range rows {
		after = r.Seq
		if r.RunID != "" && !seen[r.RunID] {
			seen[r.RunID] = true
			ids = append(ids, r.RunID)
		}
	}
	return ids, after, nil
}
