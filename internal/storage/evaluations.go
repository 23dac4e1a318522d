package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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

// evaluationColumns are the columns of an Evaluation, in the order of its
// fields.
const evaluationColumns = `id, run_id, step_id, iteration, at, duration_us, results`

// InsertEvaluation records an evaluation; with prune, it also drops the
// run's evaluations beyond the newest EvaluationsKept (callers prune every
// few inserts rather than on each: readers take the newest EvaluationsKept).
func (t *Tx) InsertEvaluation(e Evaluation, prune bool) error {
	_, err := t.exec(qInsertEvaluation, e.RunID, e.StepID, e.Iteration, e.At, e.DurationUS, e.Results)
	if err != nil {
		return fmt.Errorf("insert evaluation: %w", err)
	}
	if !prune {
		return nil
	}
	// Ids grow, so the rows to drop are those at or below the run's
	// (EvaluationsKept+1)-th newest id: one probe of evaluations_run.
	if _, err = t.exec(qPruneEvaluations, e.RunID, e.RunID, EvaluationsKept); err != nil {
		return fmt.Errorf("prune evaluations: %w", err)
	}
	return nil
}

// Evaluations returns a run's newest EvaluationsKept evaluations, oldest
// first.
func (s *Store) Evaluations(ctx context.Context, runID string) ([]Evaluation, error) {
	var evs []Evaluation
	err := s.sel(ctx, &evs, `SELECT `+evaluationColumns+`
		FROM evaluations WHERE run_id = ? ORDER BY id DESC LIMIT ?`, runID, EvaluationsKept)
	slices.Reverse(evs)
	return evs, err
}

// LastEvaluation returns a run's newest evaluation, or ErrNotFound.
func (s *Store) LastEvaluation(ctx context.Context, runID string) (Evaluation, error) {
	var e Evaluation
	err := s.get(ctx, &e, `SELECT `+evaluationColumns+`
		FROM evaluations WHERE run_id = ? ORDER BY id DESC LIMIT 1`, runID)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("last evaluation of %s: %w", runID, ErrNotFound)
	}
	return e, err
}

// Statements of the step path, prepared when the store opens (hotWrites).
const qInsertEvaluation = `INSERT INTO evaluations (run_id, step_id, iteration, at, duration_us, results)
		VALUES (?, ?, ?, ?, ?, ?)`
const qPruneEvaluations = `DELETE FROM evaluations WHERE run_id = ? AND id <= (
		SELECT id FROM evaluations WHERE run_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`
