package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/agent"
	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/filetail"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
	"github.com/loopd/loopd/internal/testreport"
	"github.com/loopd/loopd/internal/transcript"
	"github.com/loopd/loopd/internal/workspace"
)

const (
	outputTail      = 64 << 10 // bytes of a step's output given to output_pattern and the reviewer check
	finalMessageCap = 8 << 10  // bytes of the agent's final message kept in the database
)

// stepFiles are a step's artifacts under LOOPD_HOME/runs/<id>/.
type stepFiles struct {
	log, prompt string
	status      string // the run's exits file, where each step's wrapper appends its exit status
	tag         string // in the step's argv and environment: identifies its processes after a restart
}

func (r *runner) files(seq int, phase api.Phase) stepFiles {
	base := filepath.Join(r.dir, fmt.Sprintf("%04d-%s", seq, phase))
	return stepFiles{
		log: base + ".log", prompt: base + ".prompt", status: filepath.Join(r.dir, "exits"),
		tag: "loopd-step:" + r.id + ":" + strconv.Itoa(seq),
	}
}

// planned is a step about to start: its row (inserted, or to be inserted
// in the same transaction as the previous step's end) and its start event.
type planned struct {
	step    *storage.Step
	payload map[string]any // STEP_STARTED
	files   stepFiles
	prompt  []byte // an agent step's prompt, for its prompt file
}

// plan prepares the next step: its prompt (an agent's, written by
// writePrompt) and its row, not yet inserted.
func (r *runner) plan(next Next) (*planned, error) {
	seq := len(r.hist.Steps) + 1
	f := r.files(seq, next.Phase)
	st := &storage.Step{RunID: r.id, Seq: seq, Phase: next.Phase, Iteration: next.Iteration, LogPath: f.log}
	var prompt []byte
	if next.Phase == api.PhaseImplementation {
		if r.cfg.PlanFile != "" {
			if plan, err := readPlan(r.workdir, r.cfg.PlanFile); err == nil {
				st.PlanTask = r.secrets.String(plan.Current) // stored and sent to the model: a verify script can write PLAN.md
				st.PlanChecked = &plan.Checked
			}
		}
		prompt = []byte(r.prompt(next, st.PlanTask))
	} else if impl := r.hist.LastIn(next.Iteration, api.PhaseImplementation); impl != nil {
		// Stuck-task detection needs to know which task a verification judged.
		st.PlanTask = impl.PlanTask
	}
	return &planned{step: st, files: f, prompt: prompt, payload: map[string]any{"seq": seq, "phase": next.Phase, "iteration": next.Iteration,
		"retry": next.Retry, "log_path": f.log}}, nil
}

// writePrompt writes an agent step's prompt file. It is written before
// the step is recorded, but off the way to its process's start: the
// process opens it only when launch opens its gate.
func (p *planned) writePrompt() error {
	if p.prompt == nil {
		return nil
	}
	if err := os.WriteFile(p.files.prompt, p.prompt, 0o600); err != nil {
		return fmt.Errorf("write prompt: %w", err)
	}
	return nil
}

// removeFiles removes the files plan and the step's start created, for a
// planned step that was never recorded.
func (p *planned) removeFiles() {
	os.Remove(p.files.log)
	if p.step.Phase == api.PhaseImplementation {
		os.Remove(p.files.prompt)
	}
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

// spec describes a planned step's process, in environment env (the
// daemon's plus the run's env_file). Steps are always gated: the process
// may be started before the step's row is committed, and runs its
// commands only when launch opens it, after.
func (r *runner) spec(p *planned, env []string) supervise.Spec {
	st, f := p.step, p.files
	prompt := f.prompt // LOOP_PROMPT_FILE: the prompt of the iteration's implementation
	if st.Phase != api.PhaseImplementation {
		prompt = r.files(r.implSeq(st), api.PhaseImplementation).prompt
	}
	var commands []string
	stdin := ""
	switch st.Phase {
	case api.PhaseImplementation:
		commands, stdin = []string{r.cfg.AgentCommandLine()}, f.prompt
	case api.PhaseReview:
		commands = []string{r.cfg.ReviewCommand}
	case api.PhaseVerification:
		commands = r.cfg.VerifyCommands
	case api.PhaseSetup:
		// LOOP_CHECKOUT: the user's checkout, to copy what git does not
		// carry into a new worktree (cp "$LOOP_CHECKOUT/.env" .).
		commands = []string{r.cfg.SetupCommand}
		env = append(env[:len(env):len(env)], "LOOP_CHECKOUT="+r.run.Workspace)
	}
	return supervise.Spec{
		Dir: r.workdir, Commands: commands, StdinPath: stdin,
		Env:     r.stepEnv(env, st, prompt),
		LogPath: f.log, StatusPath: f.status, Tag: f.tag, Gated: true,
	}
}

// started is a step's process started, gated, before the step was
// recorded (see conclude), or the error that prevented it.
type started struct {
	proc *supervise.Process
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

// launch runs an inserted step to its end and returns it with its
// outcome, not yet recorded as finished (conclude does that, with the
// evaluation). The step's process is the one conclude started with the
// step's commit (pre), or else is started now.
func (r *runner) launch(p *planned, env []string, pre *started) (*storage.Step, error) {
	st := p.step
	r.log.Debug("step started", zap.Int("seq", st.Seq), zap.String("phase", string(st.Phase)), zap.Int("iteration", st.Iteration))
	var proc *supervise.Process
	var err error
	if pre != nil {
		proc, err = pre.proc, pre.err
	} else {
		proc, err = supervise.Start(r.spec(p, env))
	}
	if err == nil {
		err = proc.Open()
		if !r.stepEnded.IsZero() && r.s.opts.OnStepGap != nil {
			r.s.opts.OnStepGap(time.Since(r.stepEnded))
		}
		r.stepEnded = time.Time{}
		if err != nil {
			proc.Abandon() // its wrapper is gone: nothing of the step ran
			if failed := proc.Exit().Failed; failed != "" {
				err = errors.New(failed) // why it is gone
			}
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
	done, err := r.watch(st, proc)
	if done != nil {
		// The process is recorded with the step's finish, not before: a
		// daemon that dies before then finds the step by the tag in its
		// argv (supervise.Find), which a recycled pid cannot carry.
		id := proc.Ident()
		done.Pid, done.Pgid, done.ProcStart, done.BootID = &id.Pid, &id.Pid, &id.StartTicks, id.BootID
	}
	return done, err
}

// implSeq is the seq of the implementation step of st's iteration, whose
// prompt file every step of the iteration gets as LOOP_PROMPT_FILE.
func (r *runner) implSeq(st *storage.Step) int {
	for i := len(r.hist.Steps) - 1; i >= 0; i-- {
		if s := &r.hist.Steps[i]; s.Iteration == st.Iteration && s.Phase == api.PhaseImplementation {
			return s.Seq
		}
	}
	return st.Seq
}

// watch waits for a step's process under the run's limits and fills in
// its outcome. It returns errDetached, leaving the process running, when
// the daemon shuts down.
func (r *runner) watch(st *storage.Step, proc *supervise.Process) (*storage.Step, error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	r.mu.Lock()
	r.stepCancel, r.proc = cancel, proc
	if r.pending != nil {
		cancel(r.pending)
		r.pending = nil
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.stepCancel, r.proc = nil, nil
		r.mu.Unlock()
	}()
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
			// Recorded before the first signal: a daemon that dies during
			// the kill must still know the step was stopped, and why. One
			// attempt only: a full disk must not keep the step alive (this
			// daemon classifies it from memory all the same).
			st.CancelCause = cancelCause(why, context.Cause(ctx), capped)
			err := r.s.store.Write(bg(), func(tx *storage.Tx) error { return tx.SetCancelCause(st.ID, st.CancelCause) })
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
	r.outcome(st, ex, ending)
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

// outcome classifies a step's end and reads what its output says. A step
// the daemon stopped is classified by why it was stopped (recorded before
// the kill, so this holds after a restart too), not by the exit code the
// kill produced.
func (r *runner) outcome(st *storage.Step, ex supervise.Exit, ending supervise.Ending) {
	if ending == supervise.Lingered {
		// The agent ended its turn and only lingered: the step ends as if
		// it had exited by itself, and the turn's outcome (read from its
		// log below: an error, a usage limit, the promise) decides. Its
		// exit code stays unknown: it was stopped.
		r.log.Info("the agent ended its turn but did not exit; stopped what was left of the step",
			zap.Int("seq", st.Seq))
		ex, ending = supervise.Exit{Code: 0, Recorded: true}, supervise.Exited
		defer func() { st.ExitCode = nil }()
	}
	if ex.Code >= 0 {
		code := ex.Code
		st.ExitCode = &code
	}
	cause := st.CancelCause
	if ex.Recorded && ex.Code == 0 && (cause == storage.CancelUser || cause == storage.CancelDaemonStop || cause == storage.CancelMaxDuration) &&
		r.finishedDespiteStop(st) {
		// It finished its work despite being asked to stop: a success
		// is kept, not thrown away to be paid for again.
		cause = storage.CancelNone
	}
	switch cause {
	case storage.CancelUser:
		st.Status, st.Error = api.StepCanceled, errStopNow.Error()
	case storage.CancelDaemonStop:
		st.Status, st.Error = api.StepCanceled, errDaemonStop.Error()
	case storage.CancelMaxDuration:
		st.Status = api.StepCanceled
		st.Error = "stopped: the run reached its max_duration of " + r.cfg.MaxDuration.String()
	case storage.CancelStepTimeout:
		st.Status = api.StepFailed
		st.Error = "timed out after " + r.cfg.StepTimeout.String() + " (step_timeout)"
	case storage.CancelIdle:
		st.Status = api.StepFailed
		st.Error = "no output for " + r.cfg.IdleTimeout.String() + " (idle_timeout)"
	default:
		switch {
		case ending != supervise.Exited && !ex.Recorded:
			// Stopped without a recorded cause (its record failed):
			// never a failure of the phase.
			st.Status, st.Error = api.StepCanceled, "stopped by the daemon"
		case ex.Failed != "":
			// It could not even begin (a full disk): a failure, not a lost
			// outcome, or it would be tried again and again.
			st.Status, st.Error = api.StepFailed, ex.Failed
		case ex.Signal != 0:
			st.Status, st.Error = api.StepFailed, ex.String()
		case !ex.Recorded && ex.Code < 0:
			st.Status = api.StepInterrupted
			st.Error = "the step's process ended without recording its exit status; its outcome is lost and the phase runs again"
		case ex.Code != 0:
			st.Status, st.Error = api.StepFailed, ex.String()
		default:
			st.Status = api.StepSucceeded
		}
	}
	if st.Status == api.StepFailed && r.s.diskFull() {
		// Its output could not be written: the disk, not the step,
		// failed. Never counted; the phase runs again once there is
		// space (the run waits for it, see following).
		st.Status = api.StepInterrupted
		st.Error = errDiskFull.Error() + " while the step ran (" + st.Error + "); the phase runs again once space is freed"
		r.log.Warn("step failed while LOOPD_HOME was out of disk space; not counted as a failure", zap.Int("seq", st.Seq))
	}
	switch st.Phase {
	case api.PhaseImplementation, api.PhaseReview:
		r.readAgentOutput(st)
	case api.PhaseVerification:
		if st.Status != api.StepCanceled && st.Status != api.StepInterrupted {
			r.readTests(st)
		}
	}
	if st.Phase == api.PhaseImplementation {
		// Before the fingerprint: in a worktree the ledger commit is part
		// of the state it reads.
		r.recordChanges(st)
	}
	if st.Phase == api.PhaseImplementation && (st.Status == api.StepSucceeded || st.Status == api.StepFailed) {
		if r.cfg.NoProgressIterations > 0 || r.usesProgress {
			r.fingerprint(st)
		}
		if r.cfg.PlanFile != "" {
			if plan, err := readPlan(r.workdir, r.cfg.PlanFile); err == nil {
				st.PlanChecked = &plan.Checked
			}
		}
	}
}

// finishedDespiteStop reports whether a step that exited 0 after it was
// asked to stop had really finished its work. An agent that reports the
// end of its turn (Claude Code, Codex, Gemini CLI) must have reported it:
// a killed CLI may exit 0 without finishing (Gemini CLI's child does when
// terminated), and that is a stopped step, not a success.
func (r *runner) finishedDespiteStop(st *storage.Step) bool {
	if st.Phase != api.PhaseImplementation {
		return true
	}
	res, err := transcript.ParseFile(st.LogPath)
	if err != nil {
		return true // unreadable: the exit code is all there is
	}
	structured := res.Format != transcript.FormatText && res.Format != transcript.FormatGeneric
	return !structured || res.ResultSeen
}

// readAgentOutput parses an agent's (or reviewer's) output for usage,
// cost, the final message, the completion promise, usage limits, the model
// API's trouble, the agent's own words on an error and the reviewer's
// approval.
func (r *runner) readAgentOutput(st *storage.Step) {
	res, err := transcript.ParseFile(st.LogPath)
	if err != nil {
		r.log.Warn("read agent output", zap.Int("seq", st.Seq), zap.Error(err))
	}
	// A killed Gemini step or a failed Codex turn printed no usage: found
	// says the session file had it, and it is priced like any other.
	u, found := r.sessionUsage(st, res)
	st.InputTokens, st.OutputTokens = u.InputTokens, u.OutputTokens
	st.CacheReadTokens, st.CacheWriteTokens = u.CacheReadTokens, u.CacheWriteTokens
	st.ReasoningTokens = u.ReasoningTokens
	st.UsageFound, st.ReportedCostUSD = found, u.ReportedCostUSD
	st.Model = res.Model
	if st.Model == "" && st.Phase == api.PhaseImplementation {
		st.Model = r.cfg.Model
	}
	if price, ok := r.prices.Lookup(st.Model); ok && found {
		// 1-hour cache writes are priced at their own rate; the split is
		// read from the log again whenever the step is priced.
		cost := stop.Cost(stop.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens,
			CacheWrite1hTokens: u.CacheWrite1hTokens}, price)
		st.PricedCostUSD = &cost
	}
	st.FinalMessage = tailString(res.FinalMessage, finalMessageCap)
	if st.Status == api.StepCanceled || st.Status == api.StepInterrupted {
		return
	}
	if st.Phase == api.PhaseImplementation {
		// A structured agent's final message counts only when the agent
		// reported the end of its turn without error: a step killed
		// mid-turn may end on an assistant text that merely quotes it.
		ended := res.Format == transcript.FormatText || res.Format == transcript.FormatGeneric || (res.ResultSeen && !res.IsError)
		st.Promise = ended && transcript.HasPromise(res.FinalMessage, r.cfg.CompletionPromise)
	}
	if res.RateLimit != nil {
		now := r.s.opts.Now()
		until := res.RateLimit.ResetsAt
		if until.IsZero() || until.Before(now) {
			until = now.Add(r.s.opts.UsageLimitBackoff)
		}
		ms := until.UnixMilli()
		st.RateLimitedUntil = &ms
		st.Status = api.StepFailed
		// The agent's own words first, as for every error.
		st.Error = "the agent hit its usage limit; the run waits until " + until.Format(time.RFC3339) + " and repeats this step"
		if res.RateLimit.Message != "" {
			st.Error = res.RateLimit.Message + " (" + st.Error + ")"
		}
		return
	}
	if res.APIError && !(st.Status == api.StepSucceeded && !res.IsError) {
		r.apiUnavailable(st, res)
		return
	}
	if res.IsError && st.Status == api.StepSucceeded {
		st.Status, st.Error = api.StepFailed, "the agent reported an error"
		if res.ErrorText != "" {
			st.Error += ": " + res.ErrorText
		}
	} else if st.Status == api.StepFailed && st.CancelCause == storage.CancelNone && st.ExitCode != nil && *st.ExitCode != 0 {
		// "exit code 1" says nothing; the agent's last error says why: a
		// refusal to run as root, an untrusted directory, an API error.
		if words := agentWords(res); words != "" {
			st.Error = words + " (" + st.Error + ")"
		}
	}
	if st.Phase == api.PhaseReview && st.Status == api.StepSucceeded {
		text := res.FinalMessage
		if res.Format == transcript.FormatText || text == "" {
			text = tail(st.LogPath, outputTail)
		}
		if !r.approve.MatchString(text) {
			st.Status = api.StepFailed
			st.Error = fmt.Sprintf("the review did not approve (no match for %q in its output)", r.cfg.ReviewApprovePattern)
		}
	}
}

// agentWords is the agent's last word on an error: its structured error
// report, or else the last line of a plain-text output (where CLIs print
// their refusals).
func agentWords(res transcript.Result) string {
	if res.ErrorText != "" {
		return res.ErrorText
	}
	if res.Format != transcript.FormatText && res.Format != transcript.FormatGeneric {
		return ""
	}
	msg := strings.TrimRight(res.FinalMessage, " \t\r\n")
	if i := strings.LastIndexAny(msg, "\r\n"); i >= 0 {
		msg = msg[i+1:]
	}
	msg = strings.TrimSpace(msg)
	if len(msg) > 1024 {
		msg = tailString(msg, 1024)
	}
	return msg
}

// apiUnavailable classifies a step that the model API's trouble ended: the
// run WAITs with a back-off that doubles with each unavailable attempt in a
// row (APIBackoff up to APIBackoffCap), counting no iteration and no
// failure; once the trouble has lasted max_api_wait, the run ends ABORTED
// fatal:api_unavailable (decide). The series is read from the persisted
// steps (History.APIOutage), so a daemon restart changes nothing.
func (r *runner) apiUnavailable(st *storage.Step, res transcript.Result) {
	now := r.s.opts.Now()
	st.Status, st.APIUnavailable = api.StepFailed, true
	words := res.ErrorText
	if words == "" {
		words = "the model API did not answer"
	}
	if res.Reconnects > 0 && st.CancelCause == storage.CancelIdle {
		words = fmt.Sprintf("the agent kept reconnecting to the model API (%d attempts): %s", res.Reconnects, words)
	}
	n, since := r.hist.APIOutage(st.ID)
	if n == 0 {
		since = st.StartedAt
	}
	maxWait := r.cfg.MaxAPIWait.Std()
	if maxWait > 0 && now.Sub(time.UnixMilli(since)) >= maxWait {
		st.Error = fmt.Sprintf("the model API has been unavailable for %s, longer than max_api_wait (%s): %s",
			now.Sub(time.UnixMilli(since)).Round(time.Second), r.cfg.MaxAPIWait, words)
		return
	}
	wait := r.s.opts.APIBackoff
	for range n {
		wait = min(wait*2, r.s.opts.APIBackoffCap)
	}
	until := now.Add(wait)
	if end := time.UnixMilli(since).Add(maxWait); maxWait > 0 && until.After(end) {
		until = end // the last attempt comes when max_api_wait runs out
	}
	ms := until.UnixMilli()
	st.RateLimitedUntil = &ms
	st.Error = fmt.Sprintf("%s; the model API is unavailable (attempt %d), the run waits until %s and repeats this step",
		words, n+1, until.Format(time.RFC3339))
}

// sessionUsage is the step's usage: what its output says, or, for the
// agents that keep session files (Codex, Gemini CLI), what they recorded
// per response when they have it (see agent.StepUsage).
func (r *runner) sessionUsage(st *storage.Step, res transcript.Result) (u transcript.Usage, found bool) {
	u, found, err := agent.StepUsage(res, r.agentEnv, time.UnixMilli(st.StartedAt))
	if err != nil {
		r.log.Warn("read "+string(res.Format)+" session file", zap.Int("seq", st.Seq), zap.Error(err))
	}
	return u, found
}

// agentEnv is the value of key in the agent's environment (the daemon's
// and the run's env_file, the latter winning).
func (r *runner) agentEnv(key string) string {
	return lookupEnv(r.baseEnv(), key)
}

// readTests reads a verification step's test results: the JUnit report
// when one is configured and was written by this step, else the output.
// Failing tests fail the step even when the command exited 0.
func (r *runner) readTests(st *storage.Step) {
	var res testreport.Result
	if f, err := os.Open(st.LogPath); err == nil {
		res, err = testreport.Parse(f)
		f.Close()
		if err != nil {
			r.log.Warn("read test output", zap.Int("seq", st.Seq), zap.Error(err))
		}
	}
	// A report counts only if this step wrote it: an older one left by an
	// earlier attempt says nothing about this one.
	if path := r.cfg.VerifyReport; path != "" {
		if fi, err := os.Stat(path); err == nil && fi.ModTime().UnixMilli() >= st.StartedAt-1000 {
			if f, err := os.Open(path); err == nil {
				report, err := testreport.ParseJUnit(f)
				f.Close()
				if err != nil {
					r.log.Warn("read verify_report", zap.String("path", path), zap.Error(err))
				} else if report.Recognized() {
					res = res.WithReport(report)
				}
			}
		}
	}
	if !res.Recognized() {
		return // the exit code decides; counts stay unknown
	}
	st.TestsFormat = string(res.Format)
	st.TestsPassed, st.TestsFailed, st.TestsSkipped = res.Passed, res.Failed, res.Skipped
	st.TestsFailedNames, st.TestsPassedNames = res.FailedNames, res.PassedNames
	if res.HasFailures() && st.Status == api.StepSucceeded {
		st.Status = api.StepFailed
		st.Error = "tests failed although the command exited 0: " + res.Summary()
	}
}

// stepEnv adds a step's LOOP_* variables to env (the daemon's environment
// and the run's env_file).
func (r *runner) stepEnv(env []string, st *storage.Step, promptFile string) []string {
	return append(env[:len(env):len(env)],
		"LOOP_RUN_ID="+r.id,
		"LOOP_PHASE="+string(st.Phase),
		"LOOP_ITERATION="+strconv.Itoa(st.Iteration),
		"LOOP_STEP="+strconv.Itoa(st.Seq),
		"LOOP_WORKSPACE="+r.workdir,
		"LOOP_PROMPT_FILE="+promptFile,
	)
}

// envWithFile is the daemon's environment plus the run's env_file, read
// afresh for each step so that its values are never stored.
func (r *runner) envWithFile() ([]string, error) {
	env := os.Environ()
	if r.cfg.EnvFile == "" {
		return env, nil
	}
	vars, err := r.loadEnvFile()
	if err != nil {
		return nil, fmt.Errorf("env_file: %w", err)
	}
	r.useSecrets(vars)
	return append(env, vars...), nil
}

// baseEnv is the environment of custom_script conditions.
func (r *runner) baseEnv() []string {
	env, err := r.envWithFile()
	if err != nil {
		return os.Environ()
	}
	return env
}

// readPlan reads the plan file path, which stays inside dir (the run's
// working directory) when it is in it: see workspace.OpenRegular.
func readPlan(dir, path string) (workspace.Plan, error) { return workspace.ReadPlan(dir, path) }

// tail returns up to the last n bytes of a file, starting at a character
// boundary.
func tail(path string, n int64) string {
	b, _, err := filetail.Read(path, n)
	if err != nil {
		return ""
	}
	return string(trimToRune(b))
}

// tailString returns up to the last n bytes of s, starting at a character
// boundary.
func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return string(trimToRune([]byte(s[len(s)-n:])))
}

func trimToRune(b []byte) []byte {
	for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}

// reconcile resolves a step that a previous daemon left RUNNING: still
// alive → adopted and watched to its real end; ended with a recorded exit
// status → recorded; outcome lost → INTERRUPTED, and its phase runs again.
func (r *runner) reconcile(st *storage.Step) (bool, error) {
	f := r.files(st.Seq, st.Phase)
	var id supervise.Identity
	if st.Pid != nil {
		id.Pid, id.BootID = *st.Pid, st.BootID
		if st.ProcStart != nil {
			id.StartTicks = *st.ProcStart
		}
	} else if found, ok := supervise.Find(f.tag); ok {
		id = found
	}
	if proc, err := supervise.Adopt(id, f.tag, f.status); err == nil {
		if r.run.StopRequest == storage.StopNow && (st.CancelCause == storage.CancelNone || st.CancelCause == storage.CancelUser) {
			// A stop --now that the previous daemon did not carry out, or
			// died carrying out.
			r.mu.Lock()
			r.pending = errStopNow
			r.mu.Unlock()
		}
		err := r.write(func(tx *storage.Tx) error {
			if st.Pid == nil {
				if err := tx.SetStepProcess(st.ID, id.Pid, id.Pid, id.StartTicks, id.BootID); err != nil {
					return err
				}
			}
			_, err := tx.Event(r.id, &st.ID, events.StepAdopted, map[string]any{"seq": st.Seq, "phase": st.Phase, "pid": id.Pid})
			return err
		})
		if err != nil {
			return false, err
		}
		r.log.Info("adopted running step", zap.Int("seq", st.Seq), zap.Int("pid", id.Pid))
		done, err := r.watch(st, proc)
		if err != nil {
			return false, err
		}
		return r.conclude(done, events.StepFinished)
	}
	// Its leader is gone: whatever it left running while no daemon
	// watched (a background job in a session of its own) goes now.
	supervise.Sweep(f.tag, time.UnixMilli(st.StartedAt))
	if code, ok := supervise.ReadStatus(f.status, f.tag); ok {
		// It ended while no daemon watched: the exits file was last
		// written then (by this step, the run's newest), so the daemon's
		// downtime is not counted as running time.
		if fi, err := os.Stat(f.status); err == nil {
			ended := max(fi.ModTime().UnixMilli(), st.StartedAt)
			st.EndedAt = &ended
		}
		r.outcome(st, supervise.Exit{Code: code, Recorded: true}, supervise.Exited)
		return r.conclude(st, events.StepFinished)
	}
	if st.CancelCause != storage.CancelNone {
		// The previous daemon was stopping it and died before recording
		// the end: it ended as that stop meant.
		r.outcome(st, supervise.Exit{Code: -1}, supervise.Canceled)
		if fi, err := os.Stat(st.LogPath); err == nil {
			ended := max(fi.ModTime().UnixMilli(), st.StartedAt)
			st.EndedAt = &ended
		}
		return r.conclude(st, events.StepFinished)
	}
	st.Status = api.StepInterrupted
	st.Error = "the daemon stopped while this step ran and its outcome was lost; the phase runs again"
	// It ran at least until its last output: count that much of it as
	// running time, not the daemon's downtime.
	if fi, err := os.Stat(st.LogPath); err == nil {
		ended := max(fi.ModTime().UnixMilli(), st.StartedAt)
		st.EndedAt = &ended
	} else {
		st.EndedAt = &st.StartedAt
	}
	if st.Phase != api.PhaseVerification {
		r.readAgentOutput(st) // the tokens it spent were spent
	}
	r.recordChanges(st) // and what it changed, changed
	return r.conclude(st, events.StepInterrupted)
}
