// Package scheduler is loopd's run state machine: it claims runs, executes
// their steps through package supervise, derives every counter from the
// persisted step history, asks package stop for a verdict after each step,
// and re-attaches to runs and steps after a daemon restart.
//
// One goroutine (a runner) drives each RUNNING run; the Scheduler owns them
// and waits for them. The database is the only source of truth: a runner
// keeps its run's steps in memory only as a copy of rows it committed.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/storage"
)

// Options configure a Scheduler.
type Options struct {
	Store         *storage.Store
	Home          string // LOOPD_HOME: run artifacts go to Home/runs/<id>/
	MaxConcurrent int    // RUNNING runs at once; default 4
	Logger        *zap.Logger
	// Grace is the time between SIGTERM and SIGKILL when a step is stopped;
	// default 5s.
	Grace time.Duration
	// UsageLimitBackoff is how long a run WAITs when the agent reports a
	// usage limit without a reset time; default 10m.
	UsageLimitBackoff time.Duration
	// APIBackoff is the first wait of a run whose model API is unavailable
	// (section 15): it doubles with each unavailable attempt in a row, up
	// to APIBackoffCap; default 1m.
	APIBackoff time.Duration
	// APIBackoffCap caps APIBackoff's doubling; default 30 times APIBackoff.
	APIBackoffCap time.Duration
	// RetryBackoff is how long a runner that hit an internal error (a full
	// disk, say) waits before it reloads its run and tries again; default 5s.
	RetryBackoff time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// DebugConditions logs every stop-condition evaluation.
	DebugConditions bool
	// Executor runs the steps' processes; default: package supervise.
	Executor StepExecutor
	// Fleet, when set, makes the scheduler a worker of a fleet over the
	// PostgreSQL store (lease.go); nil for the embedded daemon.
	Fleet *Fleet
	// OnStepGap, when set, is told how long the daemon took between
	// noticing a step's end and letting the run's next step run: recording
	// the end, evaluating the stop conditions, committing, starting the
	// next step's process. It is what the daemon adds between two steps.
	OnStepGap func(time.Duration)
	// OnAhead, when set, is told what became of each process started
	// ahead of its step (ahead.go): used for the step it was started for,
	// or discarded (the run stopped, or the plan differed).
	OnAhead func(used bool)
	// OnActive, when set, is told the number of runs with a runner each
	// time it changes (the daemon sizes its garbage collector by it). It
	// is called with the scheduler's lock held: it must return quickly
	// and not call the scheduler.
	OnActive func(n int)
}

// Scheduler runs loops.
type Scheduler struct {
	opts  Options
	store *storage.Store
	log   *zap.Logger
	exec  StepExecutor

	wake chan struct{} // a run became claimable, or a slot freed

	// overlap admits the runners that may start their next step's
	// process while they evaluate and commit (see completeStep): one per two
	// CPUs. On a machine busy with many runs the others do one after the
	// other, so that the daemon's API requests still get a CPU.
	overlap chan struct{}
	// ahead admits the runners that may hold a process started ahead of
	// their step's end (ahead.go).
	ahead chan struct{}

	mu      sync.Mutex
	active  map[string]*runner
	writing map[string]bool // runs whose postmortem is being written

	frozenCache map[frozenKey]frozenEntry // decoded frozen configs, for Describe
	stopping    bool                      // no new steps: the daemon is stopping
	detach      chan struct{}             // closed on shutdown: runners leave their steps running

	runners sync.WaitGroup // runners and postmortem writers

	ontoBusy sync.Map // ids of runs a resume --onto-base is merging into

	lease *leaseBook // a fleet worker's leases; nil for the embedded daemon
	// Backlog runs are driven by coordinators (backlog.go), not runners:
	// they hold no run slot (their task runs do), under mu.
	backlogs map[string]*backlogRunner
	lander   *landing.Lander // lands task runs into integration branches (SetLander)

	// postCtx bounds postmortem commands: canceled at shutdown, which must
	// not wait for a user's analysis command.
	postCtx    context.Context
	postCancel context.CancelFunc
}

// New returns a Scheduler; call Run to start it.
func New(opts Options) *Scheduler {
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 4
	}
	if opts.Grace <= 0 {
		opts.Grace = 5 * time.Second
	}
	if opts.UsageLimitBackoff <= 0 {
		opts.UsageLimitBackoff = 10 * time.Minute
	}
	if opts.APIBackoff <= 0 {
		opts.APIBackoff = time.Minute
	}
	if opts.APIBackoffCap <= 0 {
		opts.APIBackoffCap = 30 * opts.APIBackoff
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Executor == nil {
		opts.Executor = processes{}
	}
	postCtx, postCancel := context.WithCancel(context.Background())
	var lease *leaseBook
	if opts.Fleet != nil {
		lease = newLeaseBook(*opts.Fleet)
	}
	return &Scheduler{
		lease:       lease,
		overlap:     make(chan struct{}, max(runtime.GOMAXPROCS(0)/2, 1)),
		ahead:       make(chan struct{}, aheadSlots),
		opts:        opts,
		store:       opts.Store,
		exec:        opts.Executor,
		log:         opts.Logger.Named("scheduler"),
		wake:        make(chan struct{}, 1),
		active:      map[string]*runner{},
		writing:     map[string]bool{},
		frozenCache: map[frozenKey]frozenEntry{},
		backlogs:    map[string]*backlogRunner{},
		detach:      make(chan struct{}),
		postCtx:     postCtx,
		postCancel:  postCancel,
	}
}

// Wake makes the scheduler look for claimable runs now.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Active returns the number of runs with a runner.
func (s *Scheduler) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

// MaxConcurrent is the configured number of run slots.
func (s *Scheduler) MaxConcurrent() int { return s.opts.MaxConcurrent }

// Run recovers the runs a previous daemon left RUNNING, then claims runs
// as slots free up until ctx is done. On return every runner has stopped;
// steps that were running are left running for the next daemon to adopt.
func (s *Scheduler) Run(ctx context.Context) error {
	defer s.shutdown()
	if err := s.recover(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while recovering: the next daemon recovers
		}
		return fmt.Errorf("recover: %w", err)
	}
	if s.lease != nil {
		s.runLeases(ctx)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wakeAt, err := s.claim(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("claim runs", zap.Error(err))
			wakeAt = s.opts.Now().Add(s.opts.RetryBackoff)
		}
		// One timer, reset each pass; without a wake-up time it waits for
		// Wake (a new run, a resume, or a freed slot).
		timer.Stop()
		var fire <-chan time.Time
		if !wakeAt.IsZero() {
			timer.Reset(max(time.Until(wakeAt), time.Millisecond))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-fire:
		}
	}
}

// shutdown detaches every runner and waits for them. Runners finish the
// database write they are in, if any, and leave their steps running.
func (s *Scheduler) shutdown() {
	s.mu.Lock()
	s.stopping = true
	select {
	case <-s.detach:
	default:
		close(s.detach)
	}
	s.mu.Unlock()
	s.postCancel()
	s.runners.Wait()
}

// KillSteps stops every running step (SIGTERM, grace, SIGKILL), keeps
// runners from starting new ones, and returns once the steps' processes
// have ended; used by `loopctl daemon stop --kill-steps` before shutdown.
// The killed steps are recorded CANCELED (by their runners, or from the
// cause recorded before the kill by the next daemon) and their runs stay
// RUNNING, to continue when a daemon next starts. It does not wait for
// the runners themselves: one may be waiting for a full disk, which only
// shutdown interrupts.
func (s *Scheduler) KillSteps() {
	s.mu.Lock()
	s.stopping = true
	runners := make([]*runner, 0, len(s.active))
	for _, r := range s.active {
		runners = append(runners, r)
	}
	s.mu.Unlock()
	// Every step is signalled first, then waited for: each runner carries
	// out its own kill (SIGTERM, grace, SIGKILL), so the graces run side
	// by side instead of adding up (steps ignoring SIGTERM each cost the
	// whole grace).
	var dones []<-chan struct{}
	for _, r := range runners {
		if done := r.cancelStep(errDaemonStop); done != nil {
			dones = append(dones, done)
		}
	}
	for _, done := range dones {
		<-done
	}
}

func (s *Scheduler) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// claim starts runners for claimable runs while slots are free. It returns
// when the next WAITING run becomes due (zero when none waits).
func (s *Scheduler) claim(ctx context.Context) (time.Time, error) {
	if s.lease != nil {
		return s.claimLeased(ctx)
	}
	for {
		if s.Active() >= s.opts.MaxConcurrent || s.isStopping() {
			// No slot: a due WAITING run waits for one. Returning no
			// wake-up time matters — a time in the past would spin this
			// loop — and release wakes it when a slot frees.
			return time.Time{}, nil
		}
		now := s.opts.Now().UnixMilli()
		run, err := s.store.Claimable(ctx, now)
		if errors.Is(err, storage.ErrNotFound) {
			break
		}
		if err != nil {
			return time.Time{}, err
		}
		tr := storage.Transition{RunID: run.ID, From: []api.RunStatus{run.Status}, To: api.RunRunning,
			Event: events.RunStarted, Payload: map[string]any{"run_id": run.ID}}
		if run.Status == api.RunWaiting {
			tr.Event = events.RunResumed
			why := "usage limit reset"
			switch run.Reason {
			case "api_unavailable":
				why = "back-off over: trying the model API again"
			case reasonDiskFull:
				why = "retrying after LOOPD_HOME was out of disk space"
			}
			tr.Payload = map[string]any{"run_id": run.ID, "reason": why}
		}
		err = s.store.Write(ctx, func(tx *storage.Tx) error { return tx.TransitionRun(tr) })
		if errors.Is(err, storage.ErrConflict) {
			continue // someone (a stop, a pause) changed it first
		}
		if err != nil {
			return time.Time{}, err
		}
		s.start(run.ID, false)
	}
	at, err := s.store.NextWakeUp(ctx)
	if err != nil || at == 0 {
		return time.Time{}, err
	}
	return time.UnixMilli(at), nil
}

// start launches the runner of a RUNNING run (a backlog's coordinator
// for a backlog run).
func (s *Scheduler) start(runID string, recovered bool) {
	if s.startBacklog(runID, recovered) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.active[runID]; ok {
		return
	}
	r := newRunner(s, runID)
	s.active[runID] = r
	s.activeChanged()
	s.runners.Go(func() {
		defer s.release(runID)
		r.drive(recovered)
	})
}

// release forgets a run's runner once it has returned. A run that is
// RUNNING again by then (resumed and claimed while its old runner was
// still returning, when start found the slot taken) gets a new runner.
func (s *Scheduler) release(runID string) {
	s.mu.Lock()
	r := s.active[runID]
	delete(s.active, runID)
	s.activeChanged()
	s.mu.Unlock()
	if s.lease != nil {
		if !s.detached() && !s.isStopping() {
			s.releaseLeased(r)
		} else if r != nil && r.fencedCause() != nil {
			s.lease.forget(runID, r.epoch)
		}
	} else if !s.detached() && !s.isStopping() {
		if run, err := s.store.Run(context.Background(), runID); err == nil && run.Status == api.RunRunning {
			s.start(runID, false)
		}
	}
	s.Wake()
}

// activeChanged tells Options.OnActive the number of runs with a runner;
// the caller holds s.mu.
func (s *Scheduler) activeChanged() {
	if s.opts.OnActive != nil {
		s.opts.OnActive(len(s.active))
	}
}

func (s *Scheduler) runner(runID string) *runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[runID]
}

func (s *Scheduler) detached() bool {
	select {
	case <-s.detach:
		return true
	default:
		return false
	}
}
