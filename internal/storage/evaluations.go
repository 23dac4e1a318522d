package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// EvaluationsKept is how many evaluations are kept per run.
const EvaluationsKept = 100

// Evaluation is a row of the evaluations table.
type Evaluation struct {
	ID         int64  `db:"id"`
	RunID      string `db:"run_id"`
	StepID     *int64 `db:"step_id"`
	Iteration  int    `db:"iteration"`
	At         int64  `db:"at"`
	DurationUS int64  `db:"duration_us"`
	Results    string `db:"results"` // JSON
}

// InsertEvaluation records an evaluation and drops the run's evaluations
// beyond the newest EvaluationsKept.
func (t *Tx) InsertEvaluation(e Evaluation) error {
	_, err := t.tx.ExecContext(t.ctx, `INSERT INTO evaluations (run_id, step_id, iteration, at, duration_us, results)
		VALUES (?, ?, ?, ?, ?, ?)`, e.RunID, e.StepID, e.Iteration, e.At, e.DurationUS, e.Results)
	if err != nil {
		return fmt.Errorf("insert evaluation: %w", err)
	}
	// Ids grow, so the rows to drop are those at or below the run's
	// (EvaluationsKept+1)-th newest id: one probe of evaluations_run.
	_, err = t.tx.ExecContext(t.ctx, `DELETE FROM evaluations WHERE run_id = ? AND id <= (
		SELECT id FROM evaluations WHERE run_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
		e.RunID, e.RunID, EvaluationsKept)
	if err != nil {
		return fmt.Errorf("prune evaluations: %w", err)
	}
	return nil
}

// Evaluations returns a run's kept evaluations, oldest first.
func (s *Store) Evaluations(ctx context.Context, runID string) ([]Evaluation, error) {
	var evs []Evaluation
	err := s.r.SelectContext(ctx, &evs, `SELECT id, run_id, step_id, iteration, at, duration_us, results
		FROM evaluations WHERE run_id = ? ORDER BY id`, runID)
	return evs, err
}

// LastEvaluation returns a run's newest evaluation, or ErrNotFound.
func (s *Store) LastEvaluation(ctx context.Context, runID string) (Evaluation, error) {
	var e Evaluation
	err := s.r.GetContext(ctx, &e, `SELECT id, run_id, step_id, iteration, at, duration_us, results
		FROM evaluations WHERE run_id = ? ORDER BY id DESC LIMIT 1`, runID)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("last evaluation of %s: %w", runID, ErrNotFound)
	}
	return e, err
}
