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
// migrations/0007_run_stats.sql) so that they need not read every step.
type RunStats struct {
	LastSeq    int            `json:"last_seq"`
	LastStatus api.StepStatus `json:"last_status"`
	Iteration  int            `json:"iteration"`
	Counters   api.Counters   `json:"counters"`
	Usage      api.Usage      `json:"usage"`
	// FailingTrend is the failing-test counts of the verification
	// failures since the last pass (api.Run.FailingTrend).
	FailingTrend []int `json:"failing_trend,omitempty"`
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
// aggregates (runs from before migration 0007), at most limit.
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

// RunView is what a run's description needs besides its row: its recorded
// aggregates and its newest step (the one they were computed after). Last
// holds every column only when that step is RUNNING (it is shown as the
// current step); otherwise only its id, seq and status.
type RunView struct {
	Stats RunStats
	Last  Step
}

// runViewRow is a row of qRunViews.
type runViewRow struct {
	RunID  string         `db:"run_id"`
	Body   string         `db:"body"`
	StepID int64          `db:"step_id"`
	Seq    int            `db:"seq"`
	Status api.StepStatus `db:"status"`
}

// qRunViews reads the recorded aggregates of runs named by a JSON array,
// with their newest step's id, seq and status, for the runs whose
// aggregates are current: the step they were computed after is still the
// newest and has the same status. One statement for any number of runs,
// and few columns: modernc's SQLite costs per column read.
const qRunViews = `SELECT s.run_id, s.body, st.id AS step_id, st.seq, st.status FROM run_stats s
	JOIN steps st ON st.run_id = s.run_id AND st.seq = s.last_seq
	WHERE s.run_id IN (SELECT value FROM json_each(?)) AND st.status = s.last_status
	AND NOT EXISTS (SELECT 1 FROM steps x WHERE x.run_id = s.run_id AND x.seq > s.last_seq)`

// qRunViewsPG is qRunViews with PostgreSQL's JSON array expansion.
const qRunViewsPG = `SELECT s.run_id, s.body, st.id AS step_id, st.seq, st.status FROM run_stats s
	JOIN steps st ON st.run_id = s.run_id AND st.seq = s.last_seq
	WHERE s.run_id IN (SELECT jsonb_array_elements_text(?::jsonb)) AND st.status = s.last_status
	AND NOT EXISTS (SELECT 1 FROM steps x WHERE x.run_id = s.run_id AND x.seq > s.last_seq)`

// RunViews returns the current RunView of each of the runs that has one:
// a run missing from the map is to be derived from its steps.
func (s *Store) RunViews(ctx context.Context, ids []string) (map[string]RunView, error) {
	names, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	var rows []runViewRow
	q := qRunViews
	if s.pg {
		q = qRunViewsPG
	}
	if err := s.sel(ctx, &rows, q, string(names)); err != nil {
		return nil, fmt.Errorf("read run aggregates: %w", err)
	}
	out := make(map[string]RunView, len(rows))
	for _, r := range rows {
		var st RunStats
		if err := json.Unmarshal([]byte(r.Body), &st); err != nil {
			return nil, fmt.Errorf("decode run stats of %s: %w", r.RunID, err)
		}
		last := Step{ID: r.StepID, RunID: r.RunID, Seq: r.Seq, Status: r.Status}
		if r.Status == api.StepRunning {
			// The current step is shown whole: one more read, for the
			// few runs that have one.
			if last, err = s.Step(ctx, r.RunID, r.Seq); err != nil {
				if errors.Is(err, ErrNotFound) {
					continue // it moved on meanwhile: derived from the steps
				}
				return nil, err
			}
			if last.Status != api.StepRunning {
				continue
			}
		}
		out[r.RunID] = RunView{Stats: st, Last: last}
	}
	return out, nil
}

// LastEvaluations returns the newest evaluation of each of the runs that
// has one.
func (s *Store) LastEvaluations(ctx context.Context, ids []string) (map[string]Evaluation, error) {
	names, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	var evs []Evaluation
	in := `SELECT value FROM json_each(?)`
	if s.pg {
		in = `SELECT jsonb_array_elements_text(?::jsonb)`
	}
	err = s.sel(ctx, &evs, `SELECT `+evaluationColumns+` FROM evaluations
		WHERE id IN (SELECT MAX(id) FROM evaluations WHERE run_id IN (`+in+`) GROUP BY run_id)`, string(names))
	if err != nil {
		return nil, fmt.Errorf("read last evaluations: %w", err)
	}
	out := make(map[string]Evaluation, len(evs))
	for _, e := range evs {
		out[e.RunID] = e
	}
	return out, nil
}
