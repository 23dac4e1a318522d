package storage

import "context"

// LastEventSeqs returns the newest event seq of each of the given runs (0
// for a run without events): one index lookup per run, through one
// prepared statement.
func (s *Store) LastEventSeqs(ctx context.Context, runIDs []string) (map[string]int64, error) {
	out := make(map[string]int64, len(runIDs))
	for _, id := range runIDs {
		var seq int64
		if err := s.get(ctx, &seq, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?`, id); err != nil {
			return nil, err
		}
		out[id] = seq
	}
	return out, nil
}
