package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/redact"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/trust"
)

// pruneEvery is how often a runner prunes its run's old evaluations.
const pruneEvery = 16

// Causes of a canceled step.
var (
	errStopNow    = errors.New("stopped by the user (loopctl stop --now)")
	errDaemonStop = errors.New("stopped with the daemon (loopctl daemon stop --kill-steps)")
)

// errDetached ends a runner because the daemon is shutting down.
var errDetached = errors.New("detached: daemon shutting down")

// runner drives one RUNNING run.
type runner struct {
	s   *Scheduler
	id  string
	log *zap.Logger
	// ctx is the run's context, for its database work, its ledger and its
	// stop conditions. It is not canceled when the daemon shuts down: a
	// write in progress must finish, so that a step's outcome is never
	// lost between its end and its record (the runner watches the
	// scheduler's detach channel instead). It ends when the runner returns.
	ctx    context.Context
	cancel context.CancelFunc

	run  storage.Run
	cfg  config.Config
	set  stop.Set
	hist History
	eval *stop.Evaluator
	dir  string // LOOPD_HOME/runs/<id>
	// envTrust is the env file the workspace picked, which every step
	// loads only while its content is still trusted ("" when none).
	envTrust string
	// secrets redacts the step environment's secret values from what is
	// stored and fed back (nil when redact_secrets is off); set in load
	// and with each step's environment.
	secrets *redact.Redactor

	// flagsAt is the store's FlagsVersion when reloadFlags last read the
	// run's flags; flagsKnown says it may be trusted (see reloadFlags).
	flagsAt    uint64
	flagsKnown bool

	// Where the steps run (the workspace, or the run's worktree) and the
	// change ledger (nil when the workspace is not in git); set in load.
	workdir    string
	ledger     *git.Ledger
	ledgerBase string    // an in-place run's baseline snapshot, once known
	onto       *ontoBase // the last merge of the base by resume --onto-base (nil: none); set in load

	// Decided once per load so the per-step path does no work for what
	// the run does not use.
	usesOutput, usesScript, usesProgress bool
	prices                               stop.Prices
	approve                              *regexp.Regexp   // review_approve_pattern
	warnedKeys                           map[string]bool  // unmeasurable conditions already reported by this runner (set in load)
	agentFiles                           trust.AgentCache // the agents' project files as last read (checkAgentFiles)
	evaluations                          int              // recorded by this runner, for pruning

	live liveStep // the running step, which other goroutines may stop

	// next is a step the last completeStep inserted, to run with nextEnv;
	// its process was started with the commit and waits at its gate.
	next      *planned
	nextEnv   []string
	nextStart *started
	// ahead is the process of the step predicted after the running one,
	// started while it runs (ahead.go); nil when there is none.
	ahead *ahead

	kick chan struct{} // poke: a request arrived while the runner waits to retry

	// stepEnded is when the runner noticed the last step's end, until the
	// next step is let run (Options.OnStepGap); zero otherwise.
	stepEnded time.Time

	// launched is the seq of the step this runner started since its last
	// load (0: none): only such a step is known never to have been
	// recorded in the ledger (git.Ledger.SnapshotNew).
	launched int

	// Fleet workers only (lease.go): the epoch of the run's lease this
	// runner executes under, the worker the run was taken over from
	// (until its lost step is recorded), and why the current step was
	// stopped by fencing (nil: it was not).
	epoch     int64
	takenFrom string
	fenced    atomic.Pointer[error]
	// stopSeen says a renewal has answered this runner's lease with a
	// stop --now (logged once; the stop is carried out at every renewal
	// until the run ends: doing it again is harmless).
	stopSeen atomic.Bool

	// git is a fleet run's git state on this worker (fleetgit.go).
	git fleetGit
}

func newRunner(s *Scheduler, id string) *runner {
	ctx, cancel := context.WithCancel(context.Background())
	return &runner{s: s, id: id, log: s.log.With(zap.String("run", id)), ctx: ctx, cancel: cancel,
		dir: filepath.Join(s.opts.Home, "runs", id), kick: make(chan struct{}, 1)}
}

// runContext is the run's context. A runner made without newRunner (the
// one LandVerification makes to load a run's env file as a step would)
// has none, and reads with the background context.
func (r *runner) runContext() context.Context {
	if r.ctx == nil {
		return context.Background()
	}
	return r.ctx
}

// cancelStep kills the current step (or the next one, as soon as it
// starts) with cause. It returns a channel closed when the killed step's
// process has ended, or nil when no step was running.
func (r *runner) cancelStep(cause error) <-chan struct{} {
	done := r.live.stop(cause)
	if done == nil {
		r.poke()
	}
	return done
}

// carryOutStop does what a stop request recorded on the run asks of its
// runner at once: stop --now kills the running step (or the next one, as
// soon as it starts), which the runner then records CANCELED by the user
// and the run INTERRUPTED user_stop; a graceful stop wakes a runner
// waiting to retry after an error, which then ends the run, while a step
// that runs finishes first. Stop calls it on the node that runs the run; a
// fleet worker's renewal, for a stop recorded through another node.
func (r *runner) carryOutStop(kind string) {
	if kind == storage.StopNow {
		r.cancelStep(errStopNow)
		return
	}
	r.poke()
}

// liveStep is the part of a runner that other goroutines touch: the
// running step's process and how to stop it (loopctl stop --now, daemon
// stop --kill-steps, the pid status shows). Everything else in a runner
// belongs to the runner's own goroutine.
type liveStep struct {
	mu      sync.Mutex
	cancel  context.CancelCauseFunc // cancels the current step, nil between steps
	proc    StepProcess             // the current step's process, nil between steps
	pending error                   // a cancel requested before the step started
	// step is a copy of the current step's row as it started, and
	// prices the run's price table: a fleet worker's heartbeat reads the
	// step's transcript and prices it for the usage checkpoint.
	step   *storage.Step
	prices stop.Prices
}

// begin makes proc the running step, stopped by cancel; a stop requested
// before it started applies now.
func (l *liveStep) begin(cancel context.CancelCauseFunc, proc StepProcess) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel, l.proc = cancel, proc
	if l.pending != nil {
		cancel(l.pending)
		l.pending = nil
	}
}

// end forgets the running step.
func (l *liveStep) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel, l.proc, l.step, l.prices = nil, nil, nil, nil
}

// stop cancels the running step with cause and returns a channel closed
// when its process has ended; with no step running it keeps cause for
// the next one and returns nil.
func (l *liveStep) stop(cause error) <-chan struct{} {
	l.mu.Lock()
	cancel, proc := l.cancel, l.proc
	if cancel == nil {
		l.pending = cause
	}
	l.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel(cause)
	return proc.Done()
}

// request keeps cause for the next step to start.
func (l *liveStep) request(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = cause
}

// pid is the running step's pid; 0 between steps.
func (l *liveStep) pid() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.proc == nil {
		return 0
	}
	return l.proc.Ident().Pid
}

// maxSameErrors is how many times in a row a runner may fail with the
// same error before it ends the run ABORTED fatal:internal: an error that
// does not go away (a run directory that cannot be created) would
// otherwise keep the run RUNNING, retrying, forever.
const maxSameErrors = 5

// drive runs the loop until the run leaves RUNNING or the daemon detaches.
// An internal error (the database unavailable, a full disk) does not end
// the run at once: the runner waits and starts over from the database,
// which is how a restarted daemon would pick it up too. Between attempts
// the user's stop and pause still apply, and an error that comes back
// identical maxSameErrors times ends the run ABORTED fatal:internal.
func (r *runner) drive(recovered bool) {
	defer r.cancel()
	var last string
	same := 0
	for attempt := 0; ; attempt++ {
		// Only a daemon restart is a recovery; a retry after an internal
		// error reloads the same way but announces nothing.
		err := r.runFromStore(recovered && attempt == 0)
		if err == nil || errors.Is(err, errDetached) || r.s.detached() || r.fencedOut(err) {
			return
		}
		if msg := err.Error(); msg == last {
			same++
		} else {
			last, same = msg, 1
		}
		// A database or a LOOPD_HOME that cannot be written (a full
		// disk, a quota, a read-only remount) is not the run's fault and
		// goes away by itself: it never ends the run.
		fatal := same >= maxSameErrors && !storage.Transient(err) && !diskTrouble(err)
		if done := r.applyRequestsAfterError(err, fatal, same); done {
			return
		}
		r.log.Error("run loop failed; retrying from the database", zap.Error(err), zap.Duration("backoff", r.s.opts.RetryBackoff),
			zap.Int("same_error_count", same))
		select {
		case <-r.s.detach:
			return
		case <-r.kick:
		case <-time.After(r.s.opts.RetryBackoff):
		}
	}
}

// applyRequestsAfterError applies what must happen to a run whose runner failed
// with err, without loading the run (loading may be what fails): a stop
// or pause the user asked for, or, when fatal, the end of the run. done
// reports that the run has left RUNNING and the runner must return.
func (r *runner) applyRequestsAfterError(err error, fatal bool, count int) (done bool) {
	var d *decision
	werr := r.s.store.Write(r.ctx, func(tx *storage.Tx) error {
		d = nil
		f, ferr := tx.Flags(r.id)
		if ferr != nil {
			return ferr
		}
		if f.Status != api.RunRunning {
			d = &decision{status: f.Status}
			return nil
		}
		switch {
		case f.StopRequest != "":
			d = &decision{status: api.RunInterrupted, reason: "user_stop", event: events.RunInterrupted,
				description: "stopped by the user while the run could not continue: " + err.Error()}
		case f.PauseRequest:
			d = &decision{status: api.RunPaused, event: events.RunPaused, payload: map[string]any{"run_id": r.id}}
		case fatal:
			d = &decision{status: api.RunAborted, reason: "fatal:internal", event: events.RunAborted,
				description: fmt.Sprintf("loopd could not continue this run (the same error %d times in a row): %s; "+
					"fix the cause, then `loopctl resume` the run", count, err.Error())}
		default:
			return nil
		}
		return tx.TransitionRun(r.transition(d, nil))
	})
	if werr != nil {
		r.log.Warn("apply requests to a failing run", zap.String("problem", storage.Explain(werr)))
		return false
	}
	if d == nil {
		return false
	}
	if d.event != "" {
		r.log.Info("run "+strings.ToLower(string(d.status)), zap.String("reason", d.reason), zap.String("description", d.description))
		if d.status.Terminal() {
			r.s.finished(r.id)
		}
	}
	return true
}

// poke wakes a runner that waits to retry after an error, so that a stop
// or pause asked for meanwhile applies at once.
func (r *runner) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// write commits fn, retrying while the failure is transient (a full
// disk, a read-only or failing file system): the runner holds an outcome
// it knows — a finished step, a decision — and must not drop it for a
// problem that goes away, because re-deriving it later would mark the
// step INTERRUPTED and run a paid agent again. It gives up when the daemon
// shuts down (the step's status file is then the record).
func (r *runner) write(fn func(tx *storage.Tx) error) error {
	backoff := 100 * time.Millisecond
	for {
		err := r.s.store.Write(r.ctx, fn)
		if err == nil || !storage.Transient(err) {
			return err
		}
		r.log.Error("cannot record to the database; retrying", zap.String("problem", storage.Explain(err)),
			zap.Duration("backoff", backoff))
		select {
		case <-r.s.detach:
			return errDetached
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, r.s.opts.RetryBackoff)
	}
}

func (r *runner) load() error {
	run, err := r.s.store.Run(r.ctx, r.id)
	if err != nil {
		return err
	}
	cfg, set, err := decodeFrozen(run)
	if err != nil {
		return err
	}
	steps, err := r.s.store.Steps(r.ctx, r.id)
	if err != nil {
		return fmt.Errorf("load steps: %w", err)
	}
	r.run, r.cfg, r.set = run, cfg, set
	if r.envTrust, err = r.s.store.RunEnvTrust(r.ctx, r.id); err != nil {
		return err
	}
	r.secrets = secretsOf(cfg)
	r.loadWorkspace()
	r.next, r.nextEnv = nil, nil // the database is the truth: a step it holds RUNNING is recovered (recoverStep)
	r.launched = 0
	if r.warnedKeys == nil {
		r.warnedKeys = map[string]bool{}
	}
	r.usesOutput, r.usesScript = set.Uses(stop.TypeOutputPattern), set.Uses(stop.TypeCustomScript)
	r.usesProgress = set.Uses(stop.TypeNoProgress)
	r.prices = pricesOf(cfg)
	if r.approve, err = regexp.Compile(cfg.ReviewApprovePattern); err != nil {
		return fmt.Errorf("review_approve_pattern: %w", err) // validated at creation; a frozen config is trusted
	}
	r.hist = NewHistory(steps, pipelineOf(cfg))
	r.removeUnrecordedFiles()
	r.eval = stop.NewEvaluator(set, stop.Options{
		Clock:  stop.ClockFunc(r.s.opts.Now),
		Logger: r.s.opts.Logger.Named("stop"),
		Prices: r.prices,
	})
	// Seed the evaluator's "previous progress" from the last persisted
	// evaluation so a restart does not re-announce unchanged progress.
	if last, err := r.s.store.LastEvaluation(r.ctx, r.id); err == nil {
		var prev []stop.Result
		if json.Unmarshal([]byte(last.Results), &prev) == nil {
			r.eval.Restore(prev)
		}
	}
	return prepareRunDir(r.dir)
}

// decodeFrozen decodes a run's frozen config and its complete condition set
// (config shorthands merged with the stop file's conditions).
func decodeFrozen(run storage.Run) (config.Config, stop.Set, error) {
	var cfg config.Config
	if err := json.Unmarshal([]byte(run.Config), &cfg); err != nil {
		return cfg, stop.Set{}, fmt.Errorf("decode frozen config of %s: %w", run.ID, err)
	}
	file, err := stop.DecodeSet([]byte(run.Conditions))
	if err != nil {
		return cfg, stop.Set{}, fmt.Errorf("decode frozen conditions of %s: %w", run.ID, err)
	}
	set := shorthandsOf(cfg).Set()
	set.Merge(file)
	return cfg, set, nil
}

func shorthandsOf(cfg config.Config) stop.Shorthands {
	return stop.Shorthands{
		MaxIterations:   cfg.MaxIterations,
		MaxDuration:     cfg.MaxDuration.Std(),
		MaxTokens:       cfg.MaxTokens,
		MaxInputTokens:  cfg.MaxInputTokens,
		MaxOutputTokens: cfg.MaxOutputTokens,
		MaxCost:         cfg.MaxCost,
		MaxConsecutiveFailures: map[string]int{
			string(api.PhaseImplementation): cfg.MaxConsecutiveImplementationFailures,
			string(api.PhaseReview):         cfg.MaxConsecutiveReviewFailures,
			string(api.PhaseVerification):   cfg.MaxConsecutiveVerificationFailures,
		},
		MaxTaskFailures:      planLimit(cfg),
		NoProgressIterations: cfg.NoProgressIterations,
	}
}

// planLimit is the stuck-task limit: it needs a plan to know the task.
func planLimit(cfg config.Config) int {
	if cfg.PlanFile == "" {
		return 0
	}
	return cfg.MaxTaskFailures
}

func pipelineOf(cfg config.Config) Pipeline {
	return Pipeline{Review: cfg.ReviewCommand != "", Verification: len(cfg.VerifyCommands) > 0,
		Setup:          cfg.Isolation == config.IsolationWorktree && cfg.SetupCommand != "",
		Baseline:       cfg.VerifyBaseline && len(cfg.VerifyCommands) > 0,
		ProgressResets: cfg.ProgressResetsStreak}
}

// defaultPrices is the built-in pricing table, built once and shared by
// every run without price.<model> overrides: it is never modified (a run
// with overrides gets its own copy), and a table per run was most of a
// runner's memory.
var defaultPrices = sync.OnceValue(stop.DefaultPrices)

func pricesOf(cfg config.Config) stop.Prices {
	if len(cfg.Prices) == 0 {
		return defaultPrices()
	}
	prices := stop.DefaultPrices()
	for model, p := range cfg.Prices {
		prices.Override(model, stop.Price{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite,
			CacheWrite1h: p.CacheWrite1h})
	}
	return prices
}

// runFromStore is one pass of the runner over its run, from the database.
func (r *runner) runFromStore(recovered bool) error {
	r.stepEnded = time.Time{} // a retry's wait is not a gap between steps
	defer r.dropAhead()
	if err := r.load(); err != nil {
		return err
	}
	if r.run.Status != api.RunRunning {
		return nil // stopped or paused while we were not looking
	}
	if recovered {
		err := r.write(func(tx *storage.Tx) error {
			_, err := tx.Event(r.id, nil, events.RunRecovered, map[string]any{"run_id": r.id, "steps": len(r.hist.Steps)})
			return err
		})
		if err != nil {
			return err
		}
	}
	// A step a previous daemon left RUNNING: adopt it, record it, or mark
	// it INTERRUPTED. Never start another while it may be alive.
	if last := r.hist.Last(); last != nil && last.Status == api.StepRunning {
		done, err := r.recoverStep(last)
		if err != nil || done {
			return err
		}
	} else if len(r.hist.Steps) > 0 {
		// Resumed or recovered between steps: thresholds are re-checked
		// before anything runs (a resumed run whose limit was not raised
		// ends again at once, with the same reason).
		done, err := r.completeStep(nil, "")
		if err != nil || done {
			return err
		}
	}
	for {
		st, env, pre := r.next, r.nextEnv, r.nextStart
		r.next, r.nextEnv, r.nextStart = nil, nil, nil
		if r.s.detached() || r.s.isStopping() {
			// A step the last conclusion inserted is INTERRUPTED by the
			// next daemon; its process never runs it.
			if pre != nil {
				pre.abandon()
			}
			if st != nil && r.s.lease != nil && !r.s.detached() {
				return r.cancelUnstarted(st)
			}
			return errDetached
		}
		if st == nil {
			var d *decision
			var err error
			if st, env, d, err = r.planOrStop(); err != nil {
				return err
			}
			if d != nil {
				return r.record(nil, "", nil, d, nil)
			}
			if st == nil {
				return nil // the run left RUNNING
			}
			if err := st.writePrompt(); err != nil {
				return err
			}
			if err := r.write(func(tx *storage.Tx) error { return r.insertStep(tx, st) }); err != nil {
				return err
			}
			r.hist.Append(*st.step)
		}
		done, err := r.runStep(st, env, pre)
		if err != nil {
			return err
		}
		end, err := r.completeStep(done, events.StepFinished)
		if err != nil || end {
			return err
		}
	}
}
