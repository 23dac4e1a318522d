package storage

import (
	"path/filepath"
	"strconv"
	"testing"

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
	stepWrites(b, s)
}

// BenchmarkStepWritesPostgres is BenchmarkStepWrites on the PostgreSQL
// dialect, over the throwaway cluster's Unix socket (default durability:
// fsync and synchronous_commit on).
func BenchmarkStepWritesPostgres(b *testing.B) {
	stepWrites(b, openDialect(b, postgresDialect, Options{}))
}

func stepWrites(b *testing.B, s *Store) {
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
	pid, ticks := 4242, int64(123456)
	for b.Loop() {
		if _, err := s.RunFlags(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		cur.Status, cur.Pid, cur.Pgid, cur.ProcStart, cur.BootID = api.StepSucceeded, &pid, &pid, &ticks, "boot"
		next := newStep(cur.Seq + 1)
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
		cur = next
	}
}
