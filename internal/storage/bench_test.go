package storage

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

// BenchmarkStepWrites is the database work of one step as the scheduler
// does it: insert the step with STEP_STARTED, finish
// it (with its process) with STEP_FINISHED, an evaluation and a progress
// event, read the run's flags.
func BenchmarkStepWrites(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "loopd.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	if err := s.Write(ctx, func(tx *Tx) error {
		return tx.InsertRun(Run{ID: "bench", Workspace: "/ws", Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunRunning}, nil)
	}); err != nil {
		b.Fatal(err)
	}
	seq := 0
	for b.Loop() {
		seq++
		st := &Step{RunID: "bench", Seq: seq, Phase: api.PhaseImplementation, Iteration: seq, LogPath: "/x/" + strconv.Itoa(seq)}
		if err := s.Write(ctx, func(tx *Tx) error { return tx.InsertStep(st, map[string]any{"seq": seq}) }); err != nil {
			b.Fatal(err)
		}
		if _, err := s.RunFlags(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		st.Status = api.StepSucceeded
		if err := s.Write(ctx, func(tx *Tx) error {
			if err := tx.FinishStep(st, events.StepFinished, map[string]any{"seq": seq}); err != nil {
				return err
			}
			if err := tx.InsertEvaluation(Evaluation{RunID: "bench", StepID: &st.ID, Iteration: seq, Results: `[{"met":false}]`}, seq%16 == 0); err != nil {
				return err
			}
			_, err := tx.Event("bench", &st.ID, events.ConditionProgressed, map[string]any{"progress": 0.5})
			return err
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.RunFlags(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}
