package scheduler

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/postmortem"
	"github.com/loopd/loopd/internal/procgroup"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/views"
)

// recover picks up after a previous daemon: every RUNNING run gets a
// runner (which adopts or resolves its running step), and every ended run
// whose postmortem was not written gets one.
func (s *Scheduler) recover(ctx context.Context) error {
	if s.lease != nil {
		return s.recoverLeased(ctx)
	}
	// The due list is read before any runner starts: a run that a runner
	// ends from here on is that runner's to report.
	due, err := s.store.PostmortemsDue(ctx)
	if err != nil {
		return err
	}
	runs, err := s.store.RunsInStatus(ctx, api.RunRunning)
	if err != nil {
		return err
	}
	for _, run := range runs {
		s.start(run.ID, true)
	}
	for _, id := range due {
		s.finished(id)
	}
	if len(runs) > 0 || len(due) > 0 {
		s.log.Info("recovered", zap.Int("running_runs", len(runs)), zap.Int("postmortems_due", len(due)))
	}
	// Aggregates of runs from before migration 0007, behind the runners:
	// a daemon with a long history resumes its runs first.
	s.runners.Go(func() {
		if err := s.backfillStats(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("record the aggregates of older runs", zap.Error(err))
		}
	})
	return nil
}

// finished is called once a run has reached a terminal status: it writes
// the postmortem in the background, so the terminal status is never
// delayed by it.
func (s *Scheduler) finished(runID string) {
	// One writer per run at a time: two would race on the same files. A
	// request while one writes (the run was resumed and ended again) is
	// kept and served when it is done.
	s.mu.Lock()
	if _, busy := s.writing[runID]; busy {
		s.writing[runID] = true
		s.mu.Unlock()
		return
	}
	s.writing[runID] = false
	s.mu.Unlock()
	s.runners.Go(func() {
		for {
			if err := s.writePostmortem(runID); err != nil {
				s.log.Error("write postmortem", zap.String("run", runID), zap.Error(err))
			}
			s.mu.Lock()
			again := s.writing[runID]
			if !again {
				delete(s.writing, runID)
			} else {
				s.writing[runID] = false
			}
			s.mu.Unlock()
			if !again {
				return
			}
		}
	})
}

func (s *Scheduler) writePostmortem(runID string) error {
	ctx := context.Background()
	run, err := s.store.Run(ctx, runID)
	if err != nil || !run.Status.Terminal() || run.PostmortemAt != nil {
		return err // gone, resumed, or already reported
	}
	view, err := s.Describe(ctx, run, DescribeOptions{})
	if err != nil {
		return err
	}
	steps, err := s.store.Steps(ctx, runID)
	if err != nil {
		return err
	}
	in := postmortem.Input{Run: view}
	var lastFail, lastVerifyFail *storage.Step
	for i := range steps {
		st := &steps[i]
		in.Steps = append(in.Steps, views.Step(st, st.StartedAt))
		if st.Status == api.StepFailed && st.Phase != api.PhaseBaseline { // the baseline's failures are not the run's
			lastFail = st
			if st.Phase == api.PhaseVerification {
				lastVerifyFail = st
			}
		}
	}
	if lastVerifyFail != nil {
		lastFail = lastVerifyFail
	}
	if lastFail != nil {
		cfg, _, _ := decodeFrozen(run)
		in.LastFailureTail = secretsOf(cfg).String(feedbackOutput(lastFail))
	}
	// Only the ends of the timeline: a long run has far more events than
	// a report shows, and loading them all would grow the daemon.
	evs, total, err := s.store.EventEnds(ctx, runID, postmortem.TimelineEnds)
	if err != nil {
		return err
	}
	for _, e := range evs {
		in.Events = append(in.Events, views.Event(e))
	}
	in.EventCount = total
	dir := filepath.Join(s.opts.Home, "runs", runID)
	if _, err := postmortem.Write(dir, in); err != nil {
		return err
	}
	md := filepath.Join(dir, postmortem.MarkdownFile)
	err = s.store.Write(ctx, func(tx *storage.Tx) error {
		return tx.MarkPostmortem(runID, run.Status, map[string]any{"run_id": runID, "status": run.Status,
			"path": md, "summary": filepath.Join(dir, postmortem.SummaryFile)})
	})
	if errors.Is(err, storage.ErrConflict) {
		return nil // resumed meanwhile, or already reported: nothing to announce
	}
	if err != nil {
		return err
	}
	cfg, _, err := decodeFrozen(run)
	if err == nil && cfg.PostmortemCommand != "" && !s.detached() {
		s.runPostmortemCommand(run, cfg.PostmortemCommand, cfg.PostmortemTimeout.Std(), md)
	}
	return nil
}

// runPostmortemCommand runs the user's analysis command after the run has
// ended, bounded by its timeout, with output to runs/<id>/postmortem-command.log.
func (s *Scheduler) runPostmortemCommand(run storage.Run, command string, timeout time.Duration, md string) {
	ctx, cancel := context.WithTimeout(s.postCtx, timeout)
	defer cancel()
	logPath := filepath.Join(s.opts.Home, "runs", run.ID, "postmortem-command.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		s.log.Warn("postmortem command log", zap.Error(err))
		return
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = run.Workspace
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "LOOP_RUN_ID="+run.ID, "LOOP_WORKSPACE="+run.Workspace, "LOOP_POSTMORTEM="+md,
		"LOOP_STATUS="+string(run.Status), "LOOP_REASON="+run.Reason)
	procgroup.Set(cmd)
	if err := cmd.Run(); err != nil {
		s.log.Warn("postmortem command failed", zap.String("run", run.ID), zap.Error(err), zap.String("log", logPath))
	}
}
