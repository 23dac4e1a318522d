package scheduler

import (
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/agent"
	"github.com/loopd/loopd/internal/api"
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

// classifyEnd classifies a step's end and reads what its output says. A step
// the daemon stopped is classified by why it was stopped (recorded before
// the kill, so this holds after a restart too), not by the exit code the
// kill produced.
func (r *runner) classifyEnd(st *storage.Step, ex supervise.Exit, ending supervise.Ending) {
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
		// space (the run waits for it, see planNext).
		st.Status = api.StepInterrupted
		st.Error = errDiskFull.Error() + " while the step ran (" + st.Error + "); the phase runs again once space is freed"
		r.log.Warn("step failed while LOOPD_HOME was out of disk space; not counted as a failure", zap.Int("seq", st.Seq))
	}
	switch st.Phase {
	case api.PhaseImplementation, api.PhaseReview:
		r.readAgentOutput(st)
	case api.PhaseVerification, api.PhaseBaseline:
		if st.Status != api.StepCanceled && st.Status != api.StepInterrupted {
			res := r.readTests(st)
			if st.Phase == api.PhaseVerification {
				r.ignorePreExisting(st, res)
			}
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
		if q, ok := transcript.Question(res.FinalMessage, r.questionTag()); ok && ended && !st.Promise && st.Status == api.StepSucceeded {
			// Redacted like the goal: it is stored, shown and sent back
			// to the model with the answer.
			st.Question = r.secrets.String(tailString(q, finalMessageCap))
		}
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

// questionTag is the run's question tag; a config frozen before
// question_tag existed uses the default.
func (r *runner) questionTag() string {
	if r.cfg.QuestionTag == "" {
		return "question"
	}
	return r.cfg.QuestionTag
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
// Failing tests fail the step even when the command exited 0. It returns
// what was parsed.
func (r *runner) readTests(st *storage.Step) testreport.Result {
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
		return res // the exit code decides; counts stay unknown
	}
	st.TestsFormat = string(res.Format)
	st.TestsPassed, st.TestsFailed, st.TestsSkipped = res.Passed, res.Failed, res.Skipped
	st.TestsFailedNames, st.TestsPassedNames = res.FailedNames, res.PassedNames
	if res.HasFailures() && st.Status == api.StepSucceeded {
		st.Status = api.StepFailed
		st.Error = "tests failed although the command exited 0: " + res.Summary()
	}
	return res
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
