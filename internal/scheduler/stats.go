package scheduler

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/views"
)

// statsOf computes a run's aggregates from its history: what Describe
// shows without reading every step. Every number is the same fold as the
// History's own, so the two can never disagree.
func statsOf(h *History) storage.RunStats {
	st := storage.RunStats{Iteration: h.Iteration(), Counters: h.Counters(), Usage: h.Usage(), FailingTrend: h.FailingTrend()}
	t := h.sum()
	st.EndedMS = t.endedMS
	if len(t.running) > 0 {
		since := t.running[len(t.running)-1]
		st.RunningSince = &since
	}
	if last := h.Last(); last != nil {
		st.LastSeq, st.LastStatus = last.Seq, last.Status
	}
	return st
}

// withStarted is st after a step that has just been inserted RUNNING (and
// is not in the history yet): it changes only what a running step changes.
func withStarted(st storage.RunStats, s *storage.Step) storage.RunStats {
	st.LastSeq, st.LastStatus, st.Iteration = s.Seq, s.Status, s.Iteration
	since := s.StartedAt
	st.RunningSince = &since
	return st
}

// backfillStats records the aggregates of runs that have none (created
// before migration 0007), so that Describe reads them from then on. It
// runs at startup; a run it has not reached yet is derived from its steps
// meanwhile.
func (s *Scheduler) backfillStats(ctx context.Context) error {
	total := 0
	for {
		ids, err := s.store.RunsWithoutStats(ctx, 100)
		if err != nil || len(ids) == 0 {
			if err == nil {
				s.log.Info("recorded the aggregates of older runs", zap.Int("runs", total))
			}
			return err
		}
		for _, id := range ids {
			run, err := s.store.Run(ctx, id)
			if err != nil {
				return err
			}
			cfg, _, err := decodeFrozen(run)
			if err != nil {
				return err
			}
			steps, err := s.store.StepsLight(ctx, id)
			if err != nil {
				return fmt.Errorf("load steps: %w", err)
			}
			h := NewHistory(steps, pipelineOf(cfg))
			st := statsOf(&h)
			// Only if still missing: a runner may have recorded newer ones.
			err = s.store.Write(ctx, func(tx *storage.Tx) error { return tx.SetRunStatsIfMissing(id, st) })
			if err != nil {
				return err
			}
			total++
		}
	}
}

// fastDescribe fills the aggregates of out from the recorded ones, and
// reports false when there are none current (the newest step is not the
// one they were computed after): the caller derives them from the steps.
func (s *Scheduler) fastDescribe(ctx context.Context, run storage.Run, out *api.Run, now int64) (bool, error) {
	views, err := s.store.RunViews(ctx, []string{run.ID})
	if err != nil {
		return false, err
	}
	v, ok := views[run.ID]
	if ok {
		s.fillFromView(run, out, &v, now)
	}
	return ok, nil
}

// fillFromView fills the aggregates of out from a run's current view.
func (s *Scheduler) fillFromView(run storage.Run, out *api.Run, v *storage.RunView, now int64) {
	stats, last := &v.Stats, &v.Last
	out.Iteration, out.Counters, out.Usage = stats.Iteration, stats.Counters, stats.Usage
	out.FailingTrend = stats.FailingTrend
	out.ElapsedMS = stats.EndedMS
	if stats.RunningSince != nil {
		out.ElapsedMS += max(now-*stats.RunningSince, 0)
	}
	out.Steps = last.Seq
	if last.Status == api.StepRunning {
		cur := views.Step(last, now)
		if cur.Pid == 0 {
			cur.Pid = s.RunningPid(run.ID)
		}
		out.CurrentStep = &cur
	}
}
