package storage

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// StepTotals aggregates the steps of one phase and status, for metrics.
type StepTotals struct {
	Phase  string
	Status string
	Count  int64
	// Ended steps only: the sum of their durations in seconds and, per
	// bound of StepTotalsQuery, how many took at most that long.
	Ended       int64
	DurationSum float64
	Buckets     []int64
	// Usage of these steps.
	InputTokens, OutputTokens, CacheReadTokens, CacheWriteTokens int64
	CostUSD                                                      float64
}

// StepTotals aggregates every step by phase and status in one pass.
// bounds are the upper bounds, in seconds, of a duration histogram of the
// ended steps (cumulative counts). Cost is the priced cost where the model
// was known, else the agent's reported cost.
func (s *Store) StepTotals(ctx context.Context, bounds []float64) ([]StepTotals, error) {
	var q strings.Builder
	q.WriteString(`SELECT phase, status, COUNT(*), COUNT(ended_at), COALESCE(SUM((ended_at - started_at) / 1000.0), 0),
		SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), SUM(cache_write_tokens),
		COALESCE(SUM(COALESCE(priced_cost_usd, reported_cost_usd, 0)), 0)`)
	for _, b := range bounds {
		// Bounds are numbers formatted here, never user input.
		le := strconv.FormatFloat(b*1000, 'f', -1, 64)
		if s.pg {
			// PostgreSQL sums no booleans.
			fmt.Fprintf(&q, ", COUNT(*) FILTER (WHERE ended_at IS NOT NULL AND ended_at - started_at <= %s)", le)
		} else {
			fmt.Fprintf(&q, ", SUM(ended_at IS NOT NULL AND ended_at - started_at <= %s)", le)
		}
	}
	q.WriteString(` FROM steps GROUP BY phase, status ORDER BY phase, status`)
	rows, err := s.r.QueryContext(ctx, q.String())
	if err != nil {
		return nil, fmt.Errorf("step totals: %w", err)
	}
	defer rows.Close()
	var out []StepTotals
	for rows.Next() {
		t := StepTotals{Buckets: make([]int64, len(bounds))}
		dest := []any{&t.Phase, &t.Status, &t.Count, &t.Ended, &t.DurationSum, &t.InputTokens, &t.OutputTokens,
			&t.CacheReadTokens, &t.CacheWriteTokens, &t.CostUSD}
		for i := range t.Buckets {
			dest = append(dest, &t.Buckets[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("step totals: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RunCounts counts runs by status.
func (s *Store) RunCounts(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Status string `db:"status"`
		N      int64  `db:"n"`
	}
	if err := s.sel(ctx, &rows, `SELECT status, COUNT(*) AS n FROM runs GROUP BY status`); err != nil {
		return nil, fmt.Errorf("run counts: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// WaitingSince returns when each WAITING run began waiting (its last
// status change), in Unix milliseconds.
func (s *Store) WaitingSince(ctx context.Context) ([]int64, error) {
	var since []int64
	err := s.sel(ctx, &since, `SELECT updated_at FROM runs WHERE status = 'WAITING'`)
	return since, err
}

// EventCounts counts the events with seq > after by type, and returns the
// newest seq counted (after when there is none): a caller counts the log
// incrementally.
func (s *Store) EventCounts(ctx context.Context, after int64) (map[string]int64, int64, error) {
	var rows []struct {
		Type string `db:"type"`
		N    int64  `db:"n"`
		Max  int64  `db:"max_seq"`
	}
	if err := s.sel(ctx, &rows, `SELECT type, COUNT(*) AS n, MAX(seq) AS max_seq FROM events WHERE seq > ? GROUP BY type`, after); err != nil {
		return nil, after, fmt.Errorf("event counts: %w", err)
	}
	out := make(map[string]int64, len(rows))
	last := after
	for _, r := range rows {
		out[r.Type] = r.N
		last = max(last, r.Max)
	}
	return out, last, nil
}
