package storage

import (
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

// StepTotals counts steps by phase and status, sums usage and cost, and
// puts ended steps' durations in cumulative buckets; EventCounts counts
// incrementally.
func TestStepTotalsAndEventCounts(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "r1")
		steps := []struct {
			phase, status string
			startMS       int64
			endMS         *int64
			in            int64
			priced, rep   *float64
		}{
			{"implementation", "SUCCEEDED", 0, ptr[int64](500), 100, ptr(0.5), ptr(9.0)}, // 0.5s, priced wins
			{"implementation", "SUCCEEDED", 0, ptr[int64](3_000), 200, nil, ptr(0.25)},   // 3s, reported
			{"implementation", "FAILED", 0, ptr[int64](100_000), 300, nil, nil},          // 100s, no cost
			{"verification", "SUCCEEDED", 0, ptr[int64](20_000), 0, nil, nil},            // 20s
			{"implementation", "RUNNING", 0, nil, 50, nil, nil},                          // not ended
		}
		for i, st := range steps {
			_, err := s.w.Exec(s.w.Rebind(`INSERT INTO steps (run_id, seq, phase, iteration, status, started_at, ended_at, log_path,
				input_tokens, priced_cost_usd, reported_cost_usd) VALUES ('r1', ?, ?, 1, ?, ?, ?, '', ?, ?, ?)`),
				i+1, st.phase, st.status, st.startMS, st.endMS, st.in, st.priced, st.rep)
			if err != nil {
				t.Fatal(err)
			}
		}
		totals, err := s.StepTotals(t.Context(), []float64{1, 5, 60})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]StepTotals{}
		for _, tt := range totals {
			got[tt.Phase+"/"+tt.Status] = tt
		}
		ok := got["implementation/SUCCEEDED"]
		if ok.Count != 2 || ok.Ended != 2 || ok.DurationSum != 3.5 || ok.InputTokens != 300 || ok.CostUSD != 0.75 ||
			ok.Buckets[0] != 1 || ok.Buckets[1] != 2 || ok.Buckets[2] != 2 {
			t.Errorf("implementation/SUCCEEDED = %+v", ok)
		}
		if f := got["implementation/FAILED"]; f.Count != 1 || f.Buckets[2] != 0 || f.DurationSum != 100 || f.CostUSD != 0 {
			t.Errorf("implementation/FAILED = %+v", f)
		}
		if r := got["implementation/RUNNING"]; r.Count != 1 || r.Ended != 0 || r.Buckets[2] != 0 || r.InputTokens != 50 {
			t.Errorf("implementation/RUNNING = %+v", r)
		}
		if v := got["verification/SUCCEEDED"]; v.Count != 1 || v.Buckets[1] != 0 || v.Buckets[2] != 1 {
			t.Errorf("verification/SUCCEEDED = %+v", v)
		}

		counts, last, err := s.EventCounts(t.Context(), 0)
		if err != nil || counts[string(events.RunCreated)] != 1 || last == 0 {
			t.Fatalf("EventCounts = %v, %d, %v", counts, last, err)
		}
		if err := s.Write(t.Context(), func(tx *Tx) error {
			_, err := tx.Event("r1", nil, events.RunCreated, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		more, last2, err := s.EventCounts(t.Context(), last)
		if err != nil || len(more) != 1 || more[string(events.RunCreated)] != 1 || last2 != last+1 {
			t.Errorf("EventCounts after %d = %v, %d, %v; want only the new event", last, more, last2, err)
		}
		runs, err := s.RunCounts(t.Context())
		if err != nil || runs[string(api.RunPending)] != 1 {
			t.Errorf("RunCounts = %v, %v", runs, err)
		}
	})
}

func ptr[T any](v T) *T { return &v }
