package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loopd/loopd/internal/api"
)

// RunStats are a run's aggregates after its step LastSeq had LastStatus:
// what `list` and `status` show, kept current with each step (see
// migrations/0005_run_stats.sql) so that they need not read every step.
type RunStats struct {
	LastSeq    int            `json:"last_seq"`
	LastStatus api.StepStatus `json:"last_status"`
	Iteration  int            `json:"iteration"`
	Counters   api.Counters   `json:"counters"`
	Usage      api.Usage      `json:"usage"`
	// EndedMS sums the durations of the steps that have ended;
	// RunningSince is when the running step (the newest) started.
	EndedMS      int64  `json:"ended_ms"`
	RunningSince *int64 `json:"running_since,omitempty"`
}

// SetRunStats records a run's aggregates, in the transaction that changed
// the step they were computed after.
func (t *Tx) SetRunStats(runID string, st RunStats) error {
	body, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode run stats: %w", err)
	}
	_, err = t.exec(qSetRunStats, runID, st.LastSeq, st.LastStatus, string(body))
	if err != nil {
		return fmt.Errorf("record run stats: %w", err)
	}
	return nil
}

const qSetRunStats = `INSERT INTO run_stats (run_id, last_seq, last_status, body) VALUES (?, ?, ?, ?)
	ON CONFLICT (run_id) DO UPDATE SET last_seq = excluded.last_seq, last_status = excluded.last_status, body = excluded.body`

// RunStats reads a run's recorded aggregates; ErrNotFound when none were
// recorded.
func (s *Store) RunStats(ctx context.Context, runID string) (RunStats, error) {
	var body string
	err := s.get(ctx, &body, `SELECT body FROM run_stats WHERE run_id = ?`, runID)
	if errors.Is(err, sql.ErrNoRows) {
		return RunStats{}, ErrNotFound
	}
	if err != nil {
		return RunStats{}, err
	}
	var st RunStats
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		return RunStats{}, fmt.Errorf("decode run stats of %s: %w", runID, err)
	}
	return st, nil
}

// LastStep reads a run's newest step, with every column; ErrNotFound
// when it has none.
func (s *Store) LastStep(ctx context.Context, runID string) (Step, error) {
	var st Step
	err := s.get(ctx, &st, `SELECT `+stepColumns+` FROM steps WHERE run_id = ? ORDER BY seq DESC LIMIT 1`, runID)
	if errors.Is(err, sql.ErrNoRows) {
		return st, fmt.Errorf("steps of run %s: %w", runID, ErrNotFound)
	}
	return st, err
}

// RunsWithoutStats lists the runs that have steps but no recorded
// aggregates (runs from before migration 0005), at most limit.
func (s *Store) RunsWithoutStats(ctx context.Context, limit int) ([]string, error) {
	var ids []string
	err := s.sel(ctx, &ids, `SELECT r.id FROM runs r WHERE NOT EXISTS (SELECT 1 FROM run_stats s WHERE s.run_id = r.id)
		AND EXISTS (SELECT 1 FROM steps st WHERE st.run_id = r.id) LIMIT ?`, limit)
	return ids, err
}

// SetRunStatsIfMissing records a run's aggregates unless some are
// recorded already (newer ones, from the run's own steps).
func (t *Tx) SetRunStatsIfMissing(runID string, st RunStats) error {
	body, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode run stats: %w", err)
	}
	_, err = t.exec(`INSERT INTO run_stats (run_id, last_seq, last_status, body) VALUES (?, ?, ?, ?)
		ON CONFLICT (run_id) DO NOTHING`, runID, st.LastSeq, st.LastStatus, string(body))
	if err != nil {
		return fmt.Errorf("record run stats: %w", err)
	}
	return nil
}
