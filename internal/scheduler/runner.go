package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/agent"
	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/redact"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
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

	// Where the steps run (the workspace, or the run's worktree) and the
	// change ledger (nil when the workspace is not in git); set in load.
	workdir    string
	ledger     *git.Ledger
	ledgerBase string // an in-place run's baseline snapshot, once known

	// Decided once per load so the per-step path does no work for what
	// the run does not use.
	usesOutput, usesScript, usesProgress bool
	prices                               stop.Prices
	approve                              *regexp.Regexp  // review_approve_pattern
	warnedKeys                           map[string]bool // unmeasurable conditions already reported by this runner (set in load)
	evaluations                          int             // recorded by this runner, for pruning

	mu         sync.Mutex
	stepCancel context.CancelCauseFunc // cancels the current step, nil between steps
	proc       *supervise.Process      // the current step's process, nil between steps
	pending    error                   // a cancel requested before the step started

	// next is a step the last conclusion inserted, to launch with nextEnv;
	// its process was started with the commit and waits at its gate.
	next      *planned
	nextEnv   []string
	nextStart *started

	kick chan struct{} // poke: a request arrived while the runner waits to retry

	// stepEnded is when the runner noticed the last step's end, until the
	// next step is let run (Options.OnStepGap); zero otherwise.
	stepEnded time.Time
}

func newRunner(s *Scheduler, id string) *runner {
	return &runner{s: s, id: id, log: s.log.With(zap.String("run", id)),
		dir: filepath.Join(s.opts.Home, "runs", id), kick: make(chan struct{}, 1)}
}

// cancelStep kills the current step (or the next one, as soon as it
// starts) with cause. It returns a channel closed when the killed step's
// process has ended, or nil when no step was running.
func (r *runner) cancelStep(cause error) <-chan struct{} {
	r.mu.Lock()
	cancel, proc := r.stepCancel, r.proc
	if cancel == nil {
		r.pending = cause
	}
	r.mu.Unlock()
	if cancel == nil {
		r.poke()
		return nil
	}
	cancel(cause)
	return proc.Done()
}

// maxSameErrors is how many times in a row a runner may fail with the
// same error before it ends the run ABORTED fatal:internal: an error that
// does not go away (a run directory that cannot be created) would
// otherwise keep the run RUNNING, retrying, forever.
const maxSameErrors = 5

// main runs the loop until the run leaves RUNNING or the daemon detaches.
// An internal error (the database unavailable, a full disk) does not end
// the run at once: the runner waits and starts over from the database,
// which is how a restarted daemon would pick it up too. Between attempts
// the user's stop and pause still apply, and an error that comes back
// identical maxSameErrors times ends the run ABORTED fatal:internal.
func (r *runner) main(recovered bool) {
	var last string
	same := 0
	for attempt := 0; ; attempt++ {
		// Only a daemon restart is a recovery; a retry after an internal
		// error reloads the same way but announces nothing.
		err := r.loop(recovered && attempt == 0)
		if err == nil || errors.Is(err, errDetached) || r.s.detached() {
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
		if done := r.settleFailed(err, fatal, same); done {
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

// settleFailed applies what must happen to a run whose runner failed
// with err, without loading the run (loading may be what fails): a stop
// or pause the user asked for, or, when fatal, the end of the run. done
// reports that the run has left RUNNING and the runner must return.
func (r *runner) settleFailed(err error, fatal bool, count int) (done bool) {
	var d *decision
	werr := r.s.store.Write(bg(), func(tx *storage.Tx) error {
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
		err := r.s.store.Write(bg(), fn)
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

// bg is the context for database writes: they are short and must finish
// even while the daemon shuts down, so a step's outcome is never lost
// between its end and its record.
func bg() context.Context { return context.Background() }

func (r *runner) load() error {
	run, err := r.s.store.Run(bg(), r.id)
	if err != nil {
		return err
	}
	cfg, set, err := decodeFrozen(run)
	if err != nil {
		return err
	}
	steps, err := r.s.store.Steps(bg(), r.id)
	if err != nil {
		return fmt.Errorf("load steps: %w", err)
	}
	r.run, r.cfg, r.set = run, cfg, set
	if r.envTrust, err = r.s.store.RunEnvTrust(bg(), r.id); err != nil {
		return err
	}
	r.secrets = secretsOf(cfg)
	r.loadWorkspace()
	r.next, r.nextEnv = nil, nil // the database is the truth: a step it holds RUNNING is reconciled
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
	r.eval = stop.NewEvaluator(set, stop.Options{
		Clock:  stop.ClockFunc(r.s.opts.Now),
		Logger: r.s.opts.Logger.Named("stop"),
		Prices: r.prices,
	})
	// Seed the evaluator's "previous progress" from the last persisted
	// evaluation so a restart does not re-announce unchanged progress.
	if last, err := r.s.store.LastEvaluation(bg(), r.id); err == nil {
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
		Setup: cfg.Isolation == config.IsolationWorktree && cfg.SetupCommand != ""}
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

// loop is one pass of the runner over its run, from the database.
func (r *runner) loop(recovered bool) error {
	r.stepEnded = time.Time{} // a retry's wait is not a gap between steps
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
		done, err := r.reconcile(last)
		if err != nil || done {
			return err
		}
	} else if len(r.hist.Steps) > 0 {
		// Resumed or recovered between steps: thresholds are re-checked
		// before anything runs (a resumed run whose limit was not raised
		// ends again at once, with the same reason).
		done, err := r.conclude(nil, "")
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
			return errDetached
		}
		if st == nil {
			var d *decision
			var err error
			if st, env, d, err = r.begin(); err != nil {
				return err
			}
			if d != nil {
				return r.commit(nil, "", nil, d, nil)
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
		done, err := r.launch(st, env, pre)
		if err != nil {
			return err
		}
		end, err := r.conclude(done, events.StepFinished)
		if err != nil || end {
			return err
		}
	}
}

// begin checks that the run may go on and plans its next step; it returns
// a decision instead when the run must stop first, and neither when the
// run is no longer RUNNING.
func (r *runner) begin() (*planned, []string, *decision, error) {
	if err := r.refresh(); err != nil {
		return nil, nil, nil, err
	}
	if r.run.Status != api.RunRunning {
		return nil, nil, nil, nil
	}
	if d := r.requests(r.run, false); d != nil {
		return nil, nil, d, nil
	}
	return r.following()
}

// following plans the step after the history: it checks what the step
// needs (the agent installed, a readable env_file) and its prompt.
func (r *runner) following() (*planned, []string, *decision, error) {
	if r.s.diskFull() {
		// The step could not write its output: it would fail for a
		// reason that is not its own.
		return nil, nil, r.waitForDisk(), nil
	}
	if d := r.prepareWorkspace(); d != nil {
		return nil, nil, d, nil
	}
	next := r.hist.Next()
	if next.Phase == api.PhaseImplementation {
		if d := r.checkAgent(); d != nil {
			return nil, nil, d, nil
		}
	}
	if next.Phase == api.PhaseImplementation || next.Phase == api.PhaseReview {
		// The agent (or a reviewer that is one) reads its own project
		// files at every start.
		if d := r.checkAgentFiles(); d != nil {
			return nil, nil, d, nil
		}
	}
	env, err := r.envWithFile()
	if err != nil {
		return nil, nil, r.envFileDecision(err), nil
	}
	if next.Phase == api.PhaseImplementation {
		if d := r.checkRoot(env); d != nil {
			return nil, nil, d, nil
		}
	}
	p, err := r.plan(next)
	return p, env, nil, err
}

// refresh re-reads what of the run can change under the runner: its
// status and the user's requests.
func (r *runner) refresh() error {
	f, err := r.s.store.RunFlags(bg(), r.id)
	if err != nil {
		return err
	}
	r.run.Status, r.run.StopRequest, r.run.PauseRequest, r.run.UserSignal = f.Status, f.StopRequest, f.PauseRequest, f.UserSignal
	return nil
}

// decision is what happens to the run after an evaluation.
type decision struct {
	status      api.RunStatus // RUNNING-status changes only; "" = go on
	reason      string
	description string
	condition   stop.Condition
	waitUntil   *int64
	event       events.Type
	payload     any
}

// requests turns pending user requests into a decision; killed says
// whether a step was just killed for a stop --now.
func (r *runner) requests(run storage.Run, killed bool) *decision {
	if run.StopRequest == storage.StopGraceful && r.inFlightLost() {
		// A graceful stop lets the step in flight finish. That step's
		// outcome was lost (the daemon died while it ran): its phase runs
		// again, and the stop applies once that step has finished.
		return nil
	}
	if run.StopRequest != "" {
		return r.interrupted(run.StopRequest, killed)
	}
	if run.PauseRequest {
		return &decision{status: api.RunPaused, event: events.RunPaused,
			payload: map[string]any{"run_id": r.id}}
	}
	return nil
}

// inFlightLost reports whether the run's newest step is INTERRUPTED: it was
// in flight when the daemon died, and its outcome is lost.
func (r *runner) inFlightLost() bool {
	last := r.hist.Last()
	return last != nil && last.Status == api.StepInterrupted
}

func (r *runner) interrupted(kind string, killed bool) *decision {
	desc := "stopped by the user after the current step (loopctl stop)"
	switch {
	case kind == storage.StopNow && killed:
		desc = "stopped by the user; the running step was killed (loopctl stop --now)"
	case kind == storage.StopNow:
		desc = "stopped by the user before the next step (loopctl stop --now)"
	}
	return &decision{status: api.RunInterrupted, reason: "user_stop", description: desc, event: events.RunInterrupted}
}

// checkAgent ends the run when the agent preset's binary is not installed.
func (r *runner) checkAgent() *decision {
	bin := r.cfg.AgentBinary()
	if bin == "" {
		return nil
	}
	if _, err := r.s.opts.LookPath(bin); err == nil {
		return nil
	}
	return &decision{status: api.RunAborted, reason: "fatal:agent_not_found", event: events.RunAborted,
		description: agentNotFound(bin)}
}

// checkRoot ends the run when Claude Code would refuse to start: as root it
// refuses --dangerously-skip-permissions (which the claude preset passes)
// unless IS_SANDBOX=1 says it runs in a sandbox. Every step would fail the
// same way in a second, so the run stops at once, saying what to do.
func (r *runner) checkRoot(env []string) *decision {
	refusal := agent.RootRefusalFor(string(r.cfg.Agent), r.cfg.AgentCommand)
	if os.Geteuid() != 0 || refusal == nil || lookupEnv(env, refusal.SandboxEnv) == "1" {
		return nil
	}
	return &decision{status: api.RunAborted, reason: "fatal:agent_refused_root", event: events.RunAborted,
		description: refusal.Description}
}

// lookupEnv returns the last value of key in env (later entries win, as
// for the step's process).
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func agentNotFound(bin string) string {
	hint := agent.InstallHint(bin)
	msg := fmt.Sprintf("the agent %q was not found on the daemon's PATH", bin)
	if hint != "" {
		msg += ": " + hint
	}
	return msg + ", or set agent=command with your own agent_command; then `loopctl resume` the run"
}

// conclude records a finished step (st nil: an evaluation at resume or
// recovery), evaluates the stop conditions, decides, and commits all of it
// in one transaction. done reports that the runner must return.
//
// When the run goes on, the next step starts in the same transaction as
// this one ends: one commit per step, and the step's row exists before
// its commands run, as always. Its process is started meanwhile, though,
// gated: starting a process (fork, exec of the wrapper shell) takes longer
// than evaluating and committing, most steps are followed by another, and
// the process runs nothing until launch opens it after the commit. So the
// next step is planned as soon as this one's outcome is known, and while
// this goroutine starts its process another evaluates and commits. When
// the run stops instead, the process is abandoned.
func (r *runner) conclude(st *storage.Step, typ events.Type) (done bool, err error) {
	if st != nil {
		if st.EndedAt == nil {
			// Set here, not only by FinishStep (which sets it on st, not on
			// the history's copy): a step the history took for running
			// would count its time again after every later step.
			now := r.s.opts.Now().UnixMilli()
			st.EndedAt = &now
		}
		r.redactStep(st)
		r.hist.SetLast(*st)
		if st.Status == api.StepInterrupted {
			typ = events.StepInterrupted // however its outcome was lost
		}
	}
	var next *planned
	var env []string
	if st != nil && !r.s.detached() && !r.s.isStopping() {
		var nd *decision
		if next, env, nd, err = r.following(); err != nil || nd != nil {
			next = nil // the loop plans it again and reports
		}
	}
	if next == nil {
		return r.settle(st, typ, nil, nil)
	}
	select {
	case r.s.overlap <- struct{}{}:
		defer func() { <-r.s.overlap }()
	default:
		// The CPUs are busy with other runs: one thing after the other.
		if done, err = r.settle(st, typ, next, env); err == nil && r.next != next {
			next.removeFiles()
		}
		return done, err
	}
	spec := r.spec(next, env)
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		done, err = r.settle(st, typ, next, env)
	}()
	pre := &started{}
	pre.proc, pre.err = supervise.Start(spec)
	<-settled
	if err == nil && r.next == next {
		r.nextStart = pre // recorded: launch opens it
		return done, nil
	}
	pre.abandon()
	if err == nil {
		// Known not to be recorded: leave no files of a step that does
		// not exist. (After a failed commit they stay: the step is
		// planned again with the same files.)
		next.removeFiles()
	}
	return done, err
}

// settle evaluates the stop conditions after st, decides, and commits
// st's end with the evaluation and then either the decision or, when the
// run goes on and next is given, next's start (with environment env).
func (r *runner) settle(st *storage.Step, typ events.Type, next *planned, env []string) (done bool, err error) {
	if err := r.refresh(); err != nil {
		return false, err
	}
	var stepID int64
	if st != nil {
		stepID = st.ID
	}
	ev := r.eval.Evaluate(context.Background(), r.context(stepID))
	logEvaluation(r.s.opts.Logger.Named("stop"), r.s.opts.DebugConditions, ev, r.secrets.String)
	d := r.decide(ev, st)
	if d != nil {
		next = nil
	}
	if next != nil {
		if err := next.writePrompt(); err != nil {
			// st's end is recorded all the same; the loop plans the
			// next step again, and reports if the write fails again.
			r.log.Warn("plan the next step", zap.Error(err))
			next = nil
		}
	}
	r.nextEnv = env
	if err := r.commit(st, typ, &ev, d, next); err != nil {
		return false, err
	}
	return d != nil, nil
}

func (r *runner) commit(st *storage.Step, typ events.Type, ev *stop.Evaluation, d *decision, next *planned) error {
	announce := r.toAnnounce(ev)
	inserted := false
	err := r.write(func(tx *storage.Tx) error {
		inserted = false
		if st != nil {
			if err := tx.FinishStep(st, typ, stepPayload(st)); err != nil {
				return err
			}
			// The history holds st's end already (conclude).
			if err := tx.SetRunStats(r.id, statsOf(&r.hist)); err != nil {
				return err
			}
		}
		if ev != nil {
			if err := r.recordEvaluation(tx, ev, announce); err != nil {
				return err
			}
		}
		if d != nil {
			return tx.TransitionRun(r.transition(d, st))
		}
		if next != nil {
			// A stop or pause asked for while the conditions were being
			// evaluated (a script may take seconds) comes before the next
			// step: the runner's loop acts on it instead.
			f, err := tx.Flags(r.id)
			if err != nil {
				return err
			}
			if f.StopRequest != "" || f.PauseRequest {
				return nil
			}
			inserted = true
			return r.insertStep(tx, next)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, key := range announce {
		r.warnedKeys[key] = true
	}
	if ev != nil {
		r.evaluations++
	}
	if next != nil && inserted {
		r.hist.Append(*next.step)
		r.next = next
	}
	if d != nil {
		r.log.Info("run "+strings.ToLower(string(d.status)), zap.String("reason", d.reason), zap.String("description", d.description))
		if d.status.Terminal() {
			r.s.finished(r.id)
		}
	}
	return nil
}

func (r *runner) transition(d *decision, st *storage.Step) storage.Transition {
	d.description = r.secrets.String(d.description)
	tr := storage.Transition{RunID: r.id, From: []api.RunStatus{api.RunRunning}, To: d.status,
		Reason: d.reason, Description: d.description, WaitUntil: d.waitUntil, Event: d.event,
		ClearRequests: true, Payload: d.payload}
	if st != nil {
		tr.StepID = &st.ID
	}
	if d.status.Terminal() {
		var cond any
		if d.condition != nil {
			b, _ := json.Marshal(d.condition)
			tr.Condition = string(b)
			cond = json.RawMessage(b)
		}
		tr.Payload = events.TerminalPayload{RunID: r.id, Reason: d.reason, Description: d.description, Condition: cond}
	}
	return tr
}

func (r *runner) recordEvaluation(tx *storage.Tx, ev *stop.Evaluation, announce []string) error {
	results, err := json.Marshal(r.redactResults(ev.Results))
	if err != nil {
		return fmt.Errorf("encode evaluation: %w", err)
	}
	e := storage.Evaluation{RunID: r.id, Iteration: ev.Iteration, At: ev.At.UnixMilli(),
		DurationUS: ev.Duration.Microseconds(), Results: string(results)}
	if ev.Step != 0 {
		e.StepID = &ev.Step
	}
	// Pruning every pruneEvery evaluations keeps the table bounded without
	// a DELETE per step.
	if err := tx.InsertEvaluation(e, r.evaluations%pruneEvery == 0); err != nil {
		return err
	}
	for _, p := range ev.Progressed {
		if p.Previous == nil && p.Current == 0 {
			continue // first seen at zero: nothing has progressed yet
		}
		payload := map[string]any{
			"condition": p.Condition, "type": p.Condition.Type(), "kind": p.Class, "description": p.Description,
			"previous": p.Previous, "progress": p.Current, "delta": p.Delta,
		}
		if _, err := tx.Event(r.id, e.StepID, events.ConditionProgressed, payload); err != nil {
			return err
		}
	}
	// A budget that cannot be measured is said (once per runner), never
	// silently counted as $0.
	for _, res := range ev.Results {
		if res.Unmeasurable && slices.Contains(announce, warnKey(res)) {
			payload := map[string]any{"condition": res.Condition, "type": res.Condition.Type(), "kind": res.Class,
				"description": res.Description, "unmeasurable": true, "reason": res.Reason, "progress": nil}
			if _, err := tx.Event(r.id, e.StepID, events.ConditionProgressed, payload); err != nil {
				return err
			}
		}
	}
	return nil
}

// toAnnounce lists the unmeasurable conditions of an evaluation that this
// runner has not reported yet; commit marks them reported once the events
// are committed (a transaction that is retried must announce them again).
func (r *runner) toAnnounce(ev *stop.Evaluation) []string {
	if ev == nil {
		return nil
	}
	var keys []string
	for _, res := range ev.Results {
		if res.Unmeasurable && !r.warnedKeys[warnKey(res)] {
			keys = append(keys, warnKey(res))
		}
	}
	return keys
}

func warnKey(res stop.Result) string { return string(res.Class) + fmt.Sprint(res.Index) }

// decide resolves an evaluation after a step: failure beats success beats
// limit (the completion gate is a success), then the user's requests, then
// a usage limit.
func (r *runner) decide(ev stop.Evaluation, st *storage.Step) *decision {
	// A step killed by `stop --now` ends the run as the user asked.
	if st != nil && st.Status == api.StepCanceled && st.CancelCause == storage.CancelUser {
		return r.interrupted(storage.StopNow, true)
	}
	if st != nil && st.Phase == api.PhaseSetup && st.Status == api.StepFailed {
		return &decision{status: api.RunFailed, reason: "setup_failed", event: events.RunFailed,
			// The run's config is frozen: a setup_command corrected in
			// .loop/config is not what resume runs, so name the --set.
			description: fmt.Sprintf("setup_command failed in the worktree %s: %s; see `loopctl logs %s --step %d`, fix the cause, then `loopctl resume %s` "+
				"(the run keeps the setup_command it started with; to run a corrected one: `loopctl resume %s --set setup_command=…`)",
				r.workdir, st.Error, shortOf(r.id), st.Seq, shortOf(r.id), shortOf(r.id))}
	}
	v := ev.Stop
	if v != nil && v.Class == stop.ClassFailure {
		return r.verdictDecision(v)
	}
	if gates, ok := r.completed(); ok {
		return &decision{status: api.RunCompleted, event: events.RunCompleted,
			reason:      "completed:" + strings.Join(gates, "+"),
			description: completionDescription(gates, r.hist.Iteration())}
	}
	if v != nil {
		return r.verdictDecision(v)
	}
	if d := r.requests(r.run, false); d != nil {
		return d
	}
	if st != nil && st.APIUnavailable && st.RateLimitedUntil == nil {
		return &decision{status: api.RunAborted, reason: "fatal:api_unavailable", event: events.RunAborted,
			description: st.Error + "; `loopctl resume` the run when the API is back"}
	}
	if st != nil && st.RateLimitedUntil != nil {
		reason := "usage_limit"
		if st.APIUnavailable {
			reason = "api_unavailable"
		}
		return &decision{status: api.RunWaiting, waitUntil: st.RateLimitedUntil, event: events.RunWaiting,
			reason: reason, description: st.Error,
			payload: map[string]any{"run_id": r.id, "until": api.Millis(*st.RateLimitedUntil), "reason": st.Error, "kind": reason}}
	}
	return nil
}

func (r *runner) verdictDecision(v *stop.Verdict) *decision {
	// The detail ("Reached 7 iterations") says what happened; the
	// description ("after 7 iterations") is the fallback.
	d := &decision{reason: v.Reason, condition: v.Condition, description: v.Description}
	if v.Detail != "" {
		d.description = v.Detail
	}
	switch v.Class {
	case stop.ClassFailure:
		d.status, d.event = api.RunFailed, events.RunFailed
	case stop.ClassSuccess:
		d.status, d.event = api.RunCompleted, events.RunCompleted
	default:
		d.status, d.event = api.RunAborted, events.RunAborted
	}
	return d
}

// completed checks the completion gate: every configured gate holds after
// the same iteration, which must have ended with all its phases passing.
func (r *runner) completed() ([]string, bool) {
	last := r.hist.Last()
	if last == nil || !r.hist.IterationEnded() || last.Status != api.StepSucceeded {
		return nil, false
	}
	it := last.Iteration
	impl := r.hist.LastIn(it, api.PhaseImplementation)
	if impl == nil || impl.Status != api.StepSucceeded {
		return nil, false
	}
	// gates lists the gates that held for real; a verify or review gate
	// with no verification or reviewer configured holds vacuously and is
	// not named in the reason.
	var gates []string
	for _, g := range r.cfg.Completion {
		switch g {
		case config.GatePromise:
			if !impl.Promise {
				return nil, false
			}
		case config.GateVerify:
			if !r.hist.Pipeline.Verification {
				continue
			}
			if v := r.hist.LastIn(it, api.PhaseVerification); v == nil || v.Status != api.StepSucceeded {
				return nil, false
			}
		case config.GateReview:
			if !r.hist.Pipeline.Review {
				continue
			}
			if v := r.hist.LastIn(it, api.PhaseReview); v == nil || v.Status != api.StepSucceeded {
				return nil, false
			}
		case config.GatePlan:
			p, err := readPlan(r.workdir, r.cfg.PlanFile)
			if err != nil || p.Unchecked > 0 {
				return nil, false
			}
		}
		gates = append(gates, string(g))
	}
	if len(gates) == 0 {
		// Every configured gate was vacuous: the iteration passing is all
		// there was to check.
		for _, g := range r.cfg.Completion {
			gates = append(gates, string(g))
		}
	}
	return gates, true
}

func completionDescription(gates []string, iteration int) string {
	var parts []string
	for _, g := range gates {
		switch g {
		case string(config.GatePromise):
			parts = append(parts, "the agent promised completion")
		case string(config.GateVerify):
			parts = append(parts, "verification passed")
		case string(config.GateReview):
			parts = append(parts, "the review approved")
		case string(config.GatePlan):
			parts = append(parts, "every plan item is checked")
		}
	}
	return fmt.Sprintf("%s in iteration %d", joinAnd(parts), iteration)
}

func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// context builds the evaluator's view of the run, entirely from history.
func (r *runner) context(stepID int64) stop.Context {
	h := &r.hist
	streaks := h.Streaks()
	_, stuck := h.StuckTask()
	c := stop.Context{
		RunID:                   r.id,
		Step:                    stepID,
		Iteration:               h.CompletedIterations(),
		Elapsed:                 time.Duration(h.ElapsedMS(r.s.opts.Now().UnixMilli())) * time.Millisecond,
		Workspace:               r.workdir,
		TestFailureStreak:       h.TestFailureStreak(),
		IterationsSinceProgress: h.IterationsSinceProgress(),
		UserSignal:              r.run.UserSignal,
		ConsecutiveFailures:     map[string]int{},
		StuckTaskFailures:       stuck,
		Usage:                   stopUsage(h.Usage(), r.cfg),
	}
	for p, n := range streaks {
		c.ConsecutiveFailures[string(p)] = n
	}
	if last := h.Last(); last != nil {
		c.HasError = last.Status == api.StepFailed
		c.LastError = last.Error
		if r.usesOutput {
			c.LastOutput = tail(last.LogPath, outputTail)
		}
	}
	if v := h.LastVerification(); v != nil && (v.TestsPassed != nil || v.TestsFailed != nil) {
		c.TestsKnown = true
		c.PassedTests = v.TestsPassedNames
		c.FailedTests = v.TestsFailedNames
	}
	if r.usesScript {
		c.Env = r.baseEnv()
	}
	return c
}

func stopUsage(u api.Usage, cfg config.Config) stop.Usage {
	model := u.Model
	if model == "" {
		model = cfg.Model
	}
	reported, known := u.ReportedCost()
	return stop.Usage{
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens,
		Model: model, PricedCostUSD: u.CostUSD, PricedKnown: !u.CostUnknown,
		ReportedCostUSD: reported, ReportedKnown: known,
	}
}

func stepPayload(st *storage.Step) map[string]any {
	p := map[string]any{"seq": st.Seq, "phase": st.Phase, "iteration": st.Iteration, "status": st.Status,
		"exit_code": st.ExitCode, "error": st.Error}
	if st.EndedAt != nil {
		p["duration_ms"] = *st.EndedAt - st.StartedAt
	}
	if st.UsageFound {
		p["usage"] = stepUsage(st)
	}
	if t := stepTests(st); t != nil {
		p["tests"] = t
	}
	if st.FilesChanged != nil {
		// The change ledger, live for followers (the dashboard's iteration
		// ledger): the same shape as the step's JSON.
		p["changes"] = StepJSON(st, 0).Changes
	}
	return p
}
