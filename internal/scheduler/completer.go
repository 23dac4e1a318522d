package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/atomicfile"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/views"
)

// completeStep records a finished step (st nil: an evaluation at resume or
// recovery), evaluates the stop conditions, decides, and commits all of it
// in one transaction. done reports that the runner must return.
//
// When the run goes on, the next step starts in the same transaction as
// this one ends: one commit per step, and the step's row exists before
// its commands run, as always. Its process is started meanwhile, though,
// gated: starting a process (fork, exec of the wrapper shell) takes longer
// than evaluating and committing, most steps are followed by another, and
// the process runs nothing until runStep opens it after the commit. So the
// next step is planned as soon as this one's outcome is known, and while
// this goroutine starts its process another evaluates and commits. When
// the run stops instead, the process is abandoned. Most often the
// process was started even earlier, while st ran (ahead.go): then
// nothing is started here.
func (r *runner) completeStep(st *storage.Step, typ events.Type) (done bool, err error) {
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
		if next, env, nd, err = r.planNext(); err != nil || nd != nil {
			next = nil // the loop plans it again and reports
		}
	}
	if next == nil {
		r.dropAhead()
		return r.evaluateAndRecord(st, typ, nil, nil)
	}
	spec := r.spec(next, env)
	if pre := r.takeAhead(spec); pre != nil {
		// Its process was started while st ran (ahead.go).
		done, err = r.evaluateAndRecord(st, typ, next, env)
		r.s.aheadEnded(r.keepStarted(pre, next, err))
		return done, err
	}
	select {
	case r.s.overlap <- struct{}{}:
		defer func() { <-r.s.overlap }()
	default:
		// The CPUs are busy with other runs: one thing after the other.
		if done, err = r.evaluateAndRecord(st, typ, next, env); err == nil && r.next != next {
			next.removeFiles()
		}
		return done, err
	}
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		done, err = r.evaluateAndRecord(st, typ, next, env)
	}()
	pre := &started{}
	pre.proc, pre.err = r.s.exec.Start(spec)
	<-settled
	r.keepStarted(pre, next, err)
	return done, err
}

// keepStarted keeps pre, a process started for next before next's row
// committed, as next's when the commit (its error err) recorded next:
// runStep opens it. Otherwise it abandons it, and it reports false.
func (r *runner) keepStarted(pre *started, next *planned, err error) bool {
	if err == nil && r.next == next {
		r.nextStart = pre
		return true
	}
	pre.abandon()
	if err == nil {
		// Known not to be recorded: leave no files of a step that does
		// not exist. (After a failed commit they stay: the step is
		// planned again with the same files.)
		next.removeFiles()
	}
	return false
}

// evaluateAndRecord evaluates the stop conditions after st, decides, and commits
// st's end with the evaluation and then either the decision or, when the
// run goes on and next is given, next's start (with environment env).
func (r *runner) evaluateAndRecord(st *storage.Step, typ events.Type, next *planned, env []string) (done bool, err error) {
	if err := r.reloadFlags(); err != nil {
		return false, err
	}
	var stepID int64
	if st != nil {
		stepID = st.ID
	}
	ev := r.eval.Evaluate(r.ctx, r.evalContext(stepID))
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
	if err := r.record(st, typ, &ev, d, next); err != nil {
		return false, err
	}
	return d != nil, nil
}

// holdInStepTxEnv names a test-only hook of fleet workers: when set to a
// file path, the first step commit of the process pauses inside its fenced
// transaction — the run's row locked, the step's end written, not
// committed — after writing that file (the run id and the step's seq),
// until the file is removed or the daemon shuts down. The end-to-end test
// of a worker cut off from the database in the middle of a step's
// transaction waits for the file, then cuts the network.
//
// It is inert unless the variable is set in the daemon's environment, and
// even then outside a fleet (an embedded daemon never pauses): nothing but
// that test sets it.
const holdInStepTxEnv = "LOOPD_TEST_HOLD_IN_STEP_TX"

// heldInStepTx makes holdInStepTx pause one transaction per process: the
// run's later commits (and the other runs') go on.
var heldInStepTx atomic.Bool

// holdInStepTx is the test hook of holdInStepTxEnv, called inside a step's
// commit after the step's end is written.
func (r *runner) holdInStepTx(st *storage.Step) {
	hold := os.Getenv(holdInStepTxEnv)
	if hold == "" || r.s.lease == nil || !heldInStepTx.CompareAndSwap(false, true) {
		return
	}
	// Whole or not at all: the test reads the file as soon as it exists.
	_ = atomicfile.Write(hold, fmt.Appendf(nil, "%s %d\n", r.id, st.Seq))
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-r.s.detach:
			return
		case <-t.C:
			if _, err := os.Stat(hold); errors.Is(err, fs.ErrNotExist) {
				return
			}
		}
	}
}

func (r *runner) record(st *storage.Step, typ events.Type, ev *stop.Evaluation, d *decision, next *planned) error {
	announce := r.toAnnounce(ev)
	inserted := false
	err := r.write(func(tx *storage.Tx) error {
		inserted = false
		if st != nil {
			if err := tx.FinishStep(st, typ, r.pushedPayload(st, stepPayload(st))); err != nil {
				return err
			}
			r.holdInStepTx(st)
		}
		if ev != nil {
			if err := r.recordEvaluation(tx, ev, announce); err != nil {
				return err
			}
		}
		if d == nil && next != nil {
			// A stop or pause asked for while the conditions were being
			// evaluated (a script may take seconds) comes before the next
			// step: the runner's loop acts on it instead.
			// The flags as evaluateAndRecord read them are the ones here
			// while no commit changed any run's since (reloadFlags).
			f := storage.Flags{StopRequest: r.run.StopRequest, PauseRequest: r.run.PauseRequest}
			if !r.flagsCurrent(r.s.store.FlagsVersion()) {
				var err error
				if f, err = tx.Flags(r.id); err != nil {
					return err
				}
			}
			if f.StopRequest == "" && !f.PauseRequest {
				// The aggregates insertStep records are st's with the
				// next step started: one write of them, not two.
				inserted = true
				return r.insertStep(tx, next)
			}
		}
		if st != nil {
			// The history holds st's end already (completeStep).
			if err := tx.SetRunStats(r.id, statsOf(&r.hist)); err != nil {
				return err
			}
		}
		if d != nil {
			return tx.TransitionRun(r.transition(d, st))
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

// insertStep records a planned step as RUNNING, with STEP_STARTED and
// the run's aggregates after it, in tx; the caller appends it to the
// history once tx commits.
func (r *runner) insertStep(tx *storage.Tx, p *planned) error {
	if err := tx.InsertStep(p.step, p.payload); err != nil {
		return err
	}
	return tx.SetRunStats(r.id, withStarted(statsOf(&r.hist), p.step))
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
// runner has not reported yet; record marks them reported once the events
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
	if st != nil && st.Question != "" && st.Answer == "" {
		// The agent asked instead of finishing: a condition that was met
		// still ends the run, else it waits for the answer. Never a
		// completion: the agent said it needs more.
		if v != nil {
			return r.verdictDecision(v)
		}
		if d := r.userRequests(r.run, false); d != nil {
			return d
		}
		return r.needsAnswer(st)
	}
	if gates, ok := r.completed(); ok {
		return &decision{status: api.RunCompleted, event: events.RunCompleted,
			reason:      "completed:" + strings.Join(gates, "+"),
			description: completionDescription(gates, r.hist.Iteration())}
	}
	if v != nil {
		return r.verdictDecision(v)
	}
	if d := r.userRequests(r.run, false); d != nil {
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

// needsAnswer is the decision to wait for the user's answer to the
// question step st asked: WAITING needs_answer with no reset time, until
// `loopctl answer` (Scheduler.Answer).
func (r *runner) needsAnswer(st *storage.Step) *decision {
	desc := fmt.Sprintf("the agent asks: %s — answer with `loopctl answer %s TEXT`", st.Question, shortOf(r.id))
	return &decision{status: api.RunWaiting, event: events.RunWaiting, reason: storage.ReasonNeedsAnswer, description: desc,
		payload: map[string]any{"run_id": r.id, "kind": storage.ReasonNeedsAnswer, "reason": desc, "question": st.Question,
			"seq": st.Seq, "iteration": st.Iteration}}
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
	if r.onto != nil && it <= r.onto.AfterIteration {
		// The base was merged in after this iteration (resume
		// --onto-base): the gates must hold again on the merge.
		return nil, false
	}
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
		case config.GateChanges:
			if !r.changedAgainstBase() {
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

// changedAgainstBase reports whether the run's recorded changes differ
// from its base (the changes gate): the newest ledger commit's tree
// against the base's (a worktree run's base commit, an in-place run's
// baseline snapshot). Changes made and then undone are no change. With no
// ledger, or a ledger that cannot be read, it does not hold: the gate
// never passes on what it could not see.
func (r *runner) changedAgainstBase() bool {
	if r.ledger == nil {
		return false
	}
	var point string
	for i := len(r.hist.Steps) - 1; i >= 0 && point == ""; i-- {
		point = r.hist.Steps[i].ChangeCommit
	}
	if point == "" {
		return false // no step recorded a change
	}
	ctx, cancel := context.WithTimeout(r.ctx, ledgerTimeout)
	defer cancel()
	base := r.run.BaseCommit
	if !r.isWorktree() {
		base = r.ledgerPoint0(ctx)
	}
	if base == "" {
		return true // a recorded change and no base to compare it with
	}
	trees, err := git.Cmd{Dir: r.workdir}.Output(ctx, "rev-parse", point+"^{tree}", base+"^{tree}")
	if err != nil {
		r.log.Warn("changes gate: compare with the base", zap.Error(err))
		return false
	}
	t := strings.Fields(trees)
	return len(t) == 2 && t[0] != t[1]
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
		case string(config.GateChanges):
			parts = append(parts, "the run changed the workspace")
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

// evalContext builds the evaluator's view of the run, entirely from history.
func (r *runner) evalContext(stepID int64) stop.Context {
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
	if last := h.Last(); last != nil && last.Phase != api.PhaseBaseline {
		// The baseline's failures are the workspace's as the run found
		// it, never an error of the run (on_error, output_pattern).
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
		p["usage"] = views.StepUsage(st)
	}
	if t := views.StepTests(st); t != nil {
		p["tests"] = t
	}
	if st.FilesChanged != nil {
		// The change ledger, live for followers (the dashboard's iteration
		// ledger): the same shape as the step's JSON.
		p["changes"] = views.StepChanges(st)
	}
	return p
}
