package scheduler

import (
	"context"
	"errors"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/agent"
	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
)

// StepExecutor is the seam between a run's state machine and the
// processes of its steps: the runner decides what runs (the planner's
// files), the executor runs it, and the runner classifies and records the
// end (outcome.go, completer.go). The default is package supervise; tests
// drive the state machine with an executor of their own and no process at
// all, and a fleet of daemons would put its leases and fencing here.
//
// The contract the runner relies on, which every implementation keeps:
//   - Start returns a gated process: it runs none of the step's commands
//     until Open, so it can be started before the step's row commits, and
//     Abandon ends it without its commands having run.
//   - A step's process carries spec.Tag, so that a later daemon can Find
//     and Adopt it, and Sweep what it left behind.
//   - Exit is valid once Done is closed; Exit.Recorded means the step's
//     own exit status was written to spec.StatusPath.
type StepExecutor interface {
	// Start starts a step's process, gated.
	Start(spec supervise.Spec) (StepProcess, error)
	// Find looks for the running process of the step tagged tag, for a
	// step an earlier daemon left RUNNING without a recorded identity.
	Find(tag string) (supervise.Identity, bool)
	// Adopt re-attaches to a step's process an earlier daemon started.
	// It fails when that process is gone.
	Adopt(id supervise.Identity, tag, statusPath string) (StepProcess, error)
	// Sweep ends what a step whose leader is gone left running.
	Sweep(tag string, started time.Time)
}

// StepProcess is one step's process, started or adopted by a
// StepExecutor. *supervise.Process is one.
type StepProcess interface {
	// Open lets a gated step run its commands.
	Open() error
	// Abandon ends a gated step that was not opened; it returns once the
	// process is gone.
	Abandon()
	// Watch waits for the step's end under its limits, stopping it when
	// one is reached or ctx is canceled (with a cause), and returns how it
	// ended; supervise.Detached leaves it running.
	Watch(ctx context.Context, l supervise.Limits) supervise.Ending
	// Done is closed once the step's process has ended.
	Done() <-chan struct{}
	// Exit is how the process ended; valid once Done is closed.
	Exit() supervise.Exit
	// Ident identifies the process, to be recorded with the step.
	Ident() supervise.Identity
}

// processes is the StepExecutor of package supervise: real processes.
type processes struct{}

func (processes) Start(spec supervise.Spec) (StepProcess, error) {
	p, err := supervise.Start(spec)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return p, nil
}

func (processes) Find(tag string) (supervise.Identity, bool) { return supervise.Find(tag) }

func (processes) Adopt(id supervise.Identity, tag, statusPath string) (StepProcess, error) {
	p, err := supervise.Adopt(id, tag, statusPath)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (processes) Sweep(tag string, started time.Time) { supervise.Sweep(tag, started) }

// started is a step's process started, gated, before the step was
// recorded (see completeStep), or the error that prevented it.
type started struct {
	proc StepProcess
	err  error
}

// abandon ends a process whose step was not recorded, or will not run:
// it runs nothing, and it is gone when abandon returns, so a later step
// with the same seq (and tag) never meets it.
func (s *started) abandon() {
	if s.err == nil {
		s.proc.Abandon()
	}
}

// runStep runs an inserted step to its end and returns it with its
// outcome, not yet recorded as finished (completeStep does that, with the
// evaluation). The step's process is the one completeStep started with the
// step's commit (pre), or else is started now.
func (r *runner) runStep(p *planned, env []string, pre *started) (*storage.Step, error) {
	st := p.step
	r.launched = st.Seq
	r.log.Debug("step started", zap.Int("seq", st.Seq), zap.String("phase", string(st.Phase)), zap.Int("iteration", st.Iteration))
	var proc StepProcess
	var err error
	if pre != nil {
		proc, err = pre.proc, pre.err
	} else {
		proc, err = r.s.exec.Start(r.spec(p, env))
	}
	if err == nil && r.s.lease != nil {
		if werr := r.awaitLease(); werr != nil {
			proc.Abandon() // nothing of it ran
			return nil, werr
		}
	}
	if err == nil {
		proc, err = r.open(proc, pre != nil, p, env)
		if !r.stepEnded.IsZero() && r.s.opts.OnStepGap != nil {
			r.s.opts.OnStepGap(time.Since(r.stepEnded))
		}
		r.stepEnded = time.Time{}
		if err == nil {
			if n, ok := proc.(interface{ PrepareNext() }); ok {
				n.PrepareNext() // off the way between this step and the next
			}
			r.startAhead(st)
		}
	}
	if err != nil {
		st.Status, st.Error = api.StepFailed, "could not start the step: "+err.Error()
		if errors.Is(err, supervise.ErrNoSpace) || r.s.diskFull() {
			// Nothing ran: not a failure of the phase.
			st.Status = api.StepInterrupted
			st.Error = "could not start the step: " + errDiskFull.Error() + "; the phase runs again once space is freed"
		}
		return st, nil
	}
	done, err := r.watchStep(st, proc)
	if done != nil {
		// The process is recorded with the step's finish, not before: a
		// daemon that dies before then finds the step by the tag in its
		// argv (supervise.Find), which a recycled pid cannot carry.
		id := proc.Ident()
		done.Pid, done.Pgid, done.ProcStart, done.BootID = &id.Pid, &id.Pid, &id.StartTicks, id.BootID
	}
	return done, err
}

// open lets a step's process run its commands. A process started before
// the step's row committed (early: with the commit, or ahead, while the
// step before ran) may have ended while it waited — killed, or unable to
// create its log then (the disk full) — having run nothing of the step (an
// Open that fails opened nothing): it is started once more, afresh, under
// the same tag once it is gone. An error says why the step could not run.
func (r *runner) open(proc StepProcess, early bool, p *planned, env []string) (StepProcess, error) {
	err := proc.Open()
	if err != nil && early {
		proc.Abandon()
		fresh, serr := r.s.exec.Start(r.spec(p, env))
		if serr != nil {
			return nil, serr
		}
		proc, err = fresh, fresh.Open()
	}
	if err != nil {
		proc.Abandon() // its wrapper is gone: nothing of the step ran
		if failed := proc.Exit().Failed; failed != "" {
			err = errors.New(failed) // why it is gone
		}
		return nil, err
	}
	return proc, nil
}

// watchStep waits for a step's process under the run's limits and fills in
// its outcome. It returns errDetached, leaving the process running, when
// the daemon shuts down.
func (r *runner) watchStep(st *storage.Step, proc StepProcess) (*storage.Step, error) {
	ctx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	r.fenced.Store(nil)
	r.live.begin(cancel, proc)
	if r.s.lease != nil {
		cp := *st
		r.live.mu.Lock()
		r.live.step, r.live.prices = &cp, r.prices
		r.live.mu.Unlock()
	}
	defer r.live.end()
	deadline, capped := r.deadline(st)
	var check func(time.Time) bool
	var checkEvery time.Duration
	if st.Phase == api.PhaseImplementation || st.Phase == api.PhaseReview {
		// An agent that ended its turn but lingers (a background job keeps
		// it alive) is stopped after the kill grace, not at idle_timeout.
		w := logWatch{Grace: r.s.opts.Grace}
		// Only Codex is known to print reconnect notices; other agents'
		// logs are not parsed for them.
		if st.Phase == api.PhaseReview || agent.WatchesReconnects(string(r.cfg.Agent)) {
			w.OnReconnects = func() { cancel(errAPIReconnects) }
			w.ReconnectEvery = time.Second
			if idle := r.cfg.IdleTimeout.Std(); idle > 0 {
				w.ReconnectEvery = min(max(idle/20, 100*time.Millisecond), time.Second)
			}
		}
		lw := newLogWatcher(st.LogPath, w)
		defer lw.close()
		check, checkEvery = lw.check, lw.every()
	}
	ending := proc.Watch(ctx, supervise.Limits{
		Deadline:    deadline,
		IdleTimeout: r.cfg.IdleTimeout.Std(),
		LogPath:     st.LogPath,
		Since:       time.UnixMilli(st.StartedAt),
		Grace:       r.s.opts.Grace,
		Detach:      r.s.detach,
		Check:       check,
		CheckEvery:  checkEvery,
		OnKill: func(why supervise.Ending) {
			if why == supervise.Lingered {
				// Its turn is over and its outcome is in its log: nothing
				// to record first (a daemon that dies now finds the step
				// ended without a status, and it runs again).
				return
			}
			if isFenceCause(context.Cause(ctx)) {
				// The lease is gone or cannot be renewed: the step was
				// killed already, and the database may be unreachable.
				return
			}
			// Recorded before the first signal: a daemon that dies during
			// the kill must still know the step was stopped, and why. One
			// attempt only: a full disk must not keep the step alive (this
			// daemon classifies it from memory all the same).
			st.CancelCause = cancelCause(why, context.Cause(ctx), capped)
			err := r.s.store.Write(r.ctx, func(tx *storage.Tx) error { return tx.SetCancelCause(st.ID, st.CancelCause) })
			if err != nil {
				r.log.Warn("record why a step is stopped", zap.Int("seq", st.Seq), zap.String("problem", storage.Explain(err)))
			}
		},
	})
	if ending == supervise.Detached {
		return nil, errDetached
	}
	r.stepEnded = time.Now()
	ex := proc.Exit()
	if ex.Recorded {
		// The step's own record says when it ended, not when this daemon
		// noticed: a daemon frozen for a while (SIGSTOP, a suspended VM)
		// must not count its freeze as the step's running time.
		if at, ok := supervise.RecordedEnd(r.files(st.Seq, st.Phase).status, r.files(st.Seq, st.Phase).tag); ok {
			ended := max(at.UnixMilli(), st.StartedAt)
			st.EndedAt = &ended
		}
	}
	r.classifyEnd(st, ex, ending)
	cause := r.fencedCause()
	if cause == nil && ex.Signal == syscall.SIGKILL && r.s.guardFired() {
		cause = errSelfFenced // its wrapper's guard: this worker's renewals are late
	}
	if cause != nil {
		// Stopped for its lease, not for anything it did: its phase runs
		// again if this worker still holds the run.
		st.Status, st.Error, st.CancelCause = api.StepInterrupted, cause.Error(), storage.CancelNone
	}
	return st, nil
}

// cancelCause names why Watch is stopping a step.
func cancelCause(why supervise.Ending, cause error, capped bool) storage.CancelCause {
	switch {
	case why == supervise.Idle, errors.Is(cause, errAPIReconnects):
		// Reconnect notices are output that is no activity: an idle step.
		return storage.CancelIdle
	case why == supervise.TimedOut && capped:
		return storage.CancelMaxDuration
	case why == supervise.TimedOut:
		return storage.CancelStepTimeout
	case errors.Is(cause, errDaemonStop):
		return storage.CancelDaemonStop
	}
	return storage.CancelUser
}

// deadline is when the step must stop: its step_timeout, or sooner when
// the run's max_duration runs out first (capped).
func (r *runner) deadline(st *storage.Step) (time.Time, bool) {
	started := time.UnixMilli(st.StartedAt)
	deadline := started.Add(r.cfg.StepTimeout.Std())
	if max := r.cfg.MaxDuration.Std(); max > 0 {
		now := r.s.opts.Now()
		before := time.Duration(r.hist.ElapsedMS(now.UnixMilli()))*time.Millisecond - now.Sub(started)
		if runEnd := started.Add(max - before); runEnd.Before(deadline) {
			return runEnd, true
		}
	}
	return deadline, false
}
