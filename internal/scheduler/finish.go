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
	// A task run that ended is its backlog's news: it lands or blocks now.
	s.kickBacklogs()
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
	if s.lease != nil {
		return s.writePostmortemLeased(runID)
	}
	ctx := context.Background()
	run, err := s.store.Run(ctx, runID)
	if err != nil || !run.Status.Terminal() || run.PostmortemAt != nil {
		return err // gone, resumed, or already reported
	}
	md, err := s.writeReport(ctx, run)
	if err != nil {
		return err
	}
	if err := s.markPostmortem(ctx, run, md); errors.Is(err, storage.ErrConflict) {
		return nil // resumed meanwhile, or already reported: nothing to announce
	} else if err != nil {
		return err
	}
	cfg, _, err := decodeFrozen(run)
	if err == nil && cfg.PostmortemCommand != "" && !s.detached() {
		s.runPostmortemCommand(run, cfg.PostmortemCommand, cfg.PostmortemTimeout.Std(), md)
	}
	return nil
}

// writeReport writes run's postmortem.md and summary.json under this
// daemon's home and returns the markdown's path.
func (s *Scheduler) writeReport(ctx context.Context, run storage.Run) (string, error) {
	runID := run.ID
	view, err := s.Describe(ctx, run, DescribeOptions{})
	if err != nil {
		return "", err
	}
	steps, err := s.store.Steps(ctx, runID)
	if err != nil {
		return "", err
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
		return "", err
	}
	for _, e := range evs {
		in.Events = append(in.Events, views.Event(e))
	}
	in.EventCount = total
	dir := filepath.Join(s.opts.Home, "runs", runID)
	if _, err := postmortem.Write(dir, in); err != nil {
		return "", err
	}
	return filepath.Join(dir, postmortem.MarkdownFile), nil
}

// markPostmortem records the report written (POSTMORTEM_WRITTEN), once:
// ErrConflict when the run was resumed meanwhile or is reported already.
func (s *Scheduler) markPostmortem(ctx context.Context, run storage.Run, md string) error {
	dir := filepath.Dir(md)
	return s.store.Write(ctx, func(tx *storage.Tx) error {
		return tx.MarkPostmortem(run.ID, run.Status, map[string]any{"run_id": run.ID, "status": run.Status,
			"path": md, "summary": filepath.Join(dir, postmortem.SummaryFile)})
	})
}

// writePostmortemLeased is writePostmortem for a fleet worker. Any worker
// may end up writing a run's report — the one that ended it, or, when that
// one died first, whichever claims it after the claim expired
// (claimPostmortems) — so the report and the postmortem_command are
// claimed (storage.ClaimPostmortem: owner, epoch, expiry on the database's
// clock) and the claim released only once both are done: one worker at a
// time sees to them, and a worker lost in the middle leaves them to
// another, which runs what was not finished (the command again, if the
// lost worker was running it: at least once across a crash, never twice
// at once).
func (s *Scheduler) writePostmortemLeased(runID string) error {
	ctx := context.Background()
	run, err := s.store.Run(ctx, runID)
	if err != nil || !run.Status.Terminal() {
		return err
	}
	c, ok, err := s.store.ClaimPostmortem(ctx, runID, s.lease.f.WorkerID, s.postmortemTTL(run))
	if err != nil || !ok {
		return err // done, or another worker's
	}
	return s.postmortemClaimed(ctx, c)
}

// postmortemTTL is how long a claim of run's postmortem lasts: its
// command's timeout and a lease TTL more.
func (s *Scheduler) postmortemTTL(run storage.Run) time.Duration {
	cfg, _, err := decodeFrozen(run)
	if err != nil || cfg.PostmortemCommand == "" {
		return s.lease.f.TTL
	}
	return cfg.PostmortemTimeout.Std() + s.lease.f.TTL
}

// postmortemClaimed writes the report of a claimed postmortem (unless it
// is written already), runs the postmortem_command, and releases the
// claim.
func (s *Scheduler) postmortemClaimed(ctx context.Context, c storage.PostmortemClaim) error {
	run, err := s.store.Run(ctx, c.RunID)
	if err != nil || !run.Status.Terminal() {
		return err
	}
	// The report is on this worker's disk: written here, or written again
	// here for the command when the worker that wrote it is gone.
	md, err := s.writeReport(ctx, run)
	if err != nil {
		return err
	}
	if !c.Written {
		if err := s.markPostmortem(ctx, run, md); errors.Is(err, storage.ErrConflict) {
			return nil // resumed meanwhile
		} else if err != nil {
			return err
		}
	}
	cfg, _, err := decodeFrozen(run)
	if err == nil && cfg.PostmortemCommand != "" {
		if s.detached() {
			return nil // shutting down: the claim expires and another worker runs it
		}
		s.runPostmortemCommand(run, cfg.PostmortemCommand, cfg.PostmortemTimeout.Std(), md)
	}
	if _, err := s.store.ReleasePostmortem(ctx, s.lease.f.WorkerID, c); err != nil {
		return err
	}
	return nil
}

// claimPostmortems, on every claim scan of a fleet worker, takes over the
// postmortems other workers did not see to: runs that ended more than a
// lease TTL ago whose report was never written, or whose claim expired
// with its worker.
func (s *Scheduler) claimPostmortems(ctx context.Context) {
	if s.isStopping() {
		return
	}
	cs, err := s.store.ClaimPostmortemsDue(ctx, s.lease.f.WorkerID, s.lease.f.TTL+postmortemCommandBound, time.Now().UnixMilli(), s.lease.f.TTL, 4)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("claim due postmortems", zap.String("problem", storage.Explain(err)))
		}
		return
	}
	for _, c := range cs {
		s.log.Info("taking over a run's postmortem", zap.String("run", c.RunID), zap.Bool("report_written", c.Written))
		s.runners.Go(func() {
			if err := s.postmortemClaimed(context.Background(), c); err != nil {
				s.log.Error("write postmortem", zap.String("run", c.RunID), zap.Error(err))
			}
		})
	}
}

// postmortemCommandBound is the longest postmortem_timeout a claim taken
// over by a scan covers (the key's default): a scan claims before it
// reads the run's config.
const postmortemCommandBound = 10 * time.Minute

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
