package storage

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

// BenchmarkStepWrites is the database work of one step as the scheduler
// does it: read the run's flags, then one transaction that finishes the
// step (with its process) and its STEP_FINISHED event, records the
// evaluation and a progress event, reads the flags again and inserts the
// next step with STEP_STARTED.
func BenchmarkStepWrites(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "loopd.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	stepWrites(b, s, nil)
}

// BenchmarkStepWritesPostgres is BenchmarkStepWrites on the PostgreSQL
// dialect, over the throwaway cluster's Unix socket (default durability:
// fsync and synchronous_commit on).
func BenchmarkStepWritesPostgres(b *testing.B) {
	stepWrites(b, openDialect(b, postgresDialect, Options{}), nil)
}

// BenchmarkStepCommit is the commit of one step as a runner makes it,
// timed one by one and reported as percentiles (p50-ms, p99-ms): on SQLite
// the embedded daemon's transaction, on PostgreSQL a fleet worker's, which
// begins with the fenced update of its leased run. Both sub-benchmarks run
// in the same test binary, one after the other:
//
//	go test -run '^$' -bench BenchmarkStepCommit -benchtime 2000x ./internal/storage/
func BenchmarkStepCommit(b *testing.B) {
	for _, d := range dialects {
		b.Run(string(d), func(b *testing.B) {
			s := openDialect(b, d, Options{})
			var took []time.Duration
			stepWrites(b, s, &took)
			if len(took) == 0 {
				return
			}
			slices.Sort(took)
			at := func(q float64) float64 {
				return float64(took[min(len(took)-1, int(q*float64(len(took))))].Microseconds()) / 1000
			}
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
			b.ReportMetric(float64(len(took)), "commits")
		})
	}
}

// stepWrites runs the step writes b.N times; took, when given, receives
// the duration of each step's commit (the transaction, not the read of
// the flags before it). On PostgreSQL the run is leased and every
// transaction is fenced, as a fleet runner's are.
func stepWrites(b *testing.B, s *Store, took *[]time.Duration) {
	ctx := b.Context()
	newStep := func(seq int) *Step {
		return &Step{RunID: "bench", Seq: seq, Phase: api.PhaseImplementation, Iteration: seq, LogPath: "/x/" + strconv.Itoa(seq)}
	}
	cur := newStep(1)
	if err := s.Write(ctx, func(tx *Tx) error {
		if err := tx.InsertRun(Run{ID: "bench", Workspace: "/ws", Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunRunning}, nil); err != nil {
			return err
		}
		return tx.InsertStep(cur, map[string]any{"seq": 1})
	}); err != nil {
		b.Fatal(err)
	}
	if took != nil && s.Dialect() == "postgres" {
		ctx = fencedBenchRun(b, s)
	}
	pid, ticks := 4242, int64(123456)
	for b.Loop() {
		if _, err := s.RunFlags(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		cur.Status, cur.Pid, cur.Pgid, cur.ProcStart, cur.BootID = api.StepSucceeded, &pid, &pid, &ticks, "boot"
		next := newStep(cur.Seq + 1)
		begun := time.Now()
		if err := s.Write(ctx, func(tx *Tx) error {
			if err := tx.FinishStep(cur, events.StepFinished, map[string]any{"seq": cur.Seq, "status": cur.Status}); err != nil {
				return err
			}
			if err := tx.InsertEvaluation(Evaluation{RunID: "bench", StepID: &cur.ID, Iteration: cur.Seq, Results: `[{"met":false}]`}, cur.Seq%16 == 0); err != nil {
				return err
			}
			if _, err := tx.Event("bench", &cur.ID, events.ConditionProgressed, map[string]any{"progress": 0.5}); err != nil {
				return err
			}
			if _, err := tx.Flags("bench"); err != nil {
				return err
			}
			return tx.InsertStep(next, map[string]any{"seq": next.Seq})
		}); err != nil {
			b.Fatal(err)
		}
		if took != nil {
			*took = append(*took, time.Since(begun))
		}
		cur = next
	}
}

// fencedBenchRun leases the benchmark's run to a worker (it is RUNNING
// with no lease: a claim takes it over) and returns a context whose
// writes are fenced by that lease.
func fencedBenchRun(b *testing.B, s *Store) context.Context {
	var claims []Claim
	if err := s.Write(b.Context(), func(tx *Tx) error {
		var err error
		claims, err = tx.ClaimRuns("bench-worker", time.Hour, 1, nil)
		return err
	}); err != nil || len(claims) != 1 {
		b.Fatalf("lease the benchmark's run: %v (%d claimed)", err, len(claims))
	}
	return WithFence(b.Context(), Lease{RunID: claims[0].RunID, Owner: "bench-worker", Epoch: claims[0].Epoch})
}
