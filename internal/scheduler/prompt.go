package scheduler

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/termtext"
	"github.com/loopd/loopd/internal/workspace"
)

const (
	feedbackTail  = 4 << 10 // bytes of a failed step's output fed into the next prompt
	feedbackNames = 20      // failing test names listed in the feedback
)

// MaxPromptFileBytes bounds a prompt file, like the API's request limit
// bounds a goal given as text: a prompt is copied into every step's
// prompt file, the run record, `status --json` and the postmortem, so an
// unbounded one grows all of them and the daemon's memory.
const MaxPromptFileBytes = 1 << 20

// readPromptFile reads a prompt file of at most MaxPromptFileBytes,
// opened by workspace.OpenRegular: a path inside dir stays inside it, and
// a FIFO or a device is refused instead of blocking or never ending (the
// file is re-read each iteration, after the agent could replace it). dir
// "" opens any path (at creation: the configuration checked where a
// workspace's own choice leads, and the user's may lead anywhere).
func readPromptFile(dir, path string) (string, error) {
	f, err := workspace.OpenRegular(dir, path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxPromptFileBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxPromptFileBytes {
		return "", fmt.Errorf("prompt_file %s is larger than %d KiB; keep the goal short and point to longer documents from it (spec_file, plan_file)",
			path, MaxPromptFileBytes>>10)
	}
	return strings.TrimSpace(string(b)), nil
}

// goal is the run's goal: the prompt text, or the prompt file read afresh
// each iteration (Ralph loops are steered by editing it while they run),
// falling back to the text frozen at creation if the file is gone or has
// grown past its limit.
func (r *runner) goal() string {
	if r.cfg.Prompt == "" && r.cfg.PromptFile != "" {
		text, err := readPromptFile(r.run.Workspace, r.cfg.PromptFile)
		if err == nil && text != "" {
			// Redacted as at creation: the prompt is stored too, and the
			// file may have changed since.
			return r.secrets.String(text)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("prompt file unusable; using the goal frozen at creation", zap.Error(err))
		}
	}
	return r.run.Goal
}

// prompt is what the agent receives: the goal, pointers to the spec and
// plan, the completion instruction, and, after a failure, feedback from
// the previous iteration.
func (r *runner) prompt(next Next, task string) string {
	var b strings.Builder
	b.WriteString(r.goal())
	b.WriteString("\n")
	if r.cfg.SpecFile != "" {
		fmt.Fprintf(&b, "\nThe specification is in %s.\n", r.cfg.SpecFile)
	}
	if r.cfg.PlanFile != "" {
		fmt.Fprintf(&b, "\nThe plan is in %s. ", r.cfg.PlanFile)
		if task != "" {
			fmt.Fprintf(&b, "Work on its first unchecked item: %q. ", task)
		}
		b.WriteString("Check items off (- [x]) as you finish them.\n")
	}
	if r.cfg.HasGate(config.GatePromise) {
		fmt.Fprintf(&b, "\nWhen the goal is fully achieved, end your final message with this line, on its own:\n%s\n", r.cfg.CompletionPromise)
		b.WriteString("Do not write that line otherwise.\n")
	}
	if qa := r.questionAndAnswer(next.Iteration - 1); qa != "" {
		// The iteration that asked ended on its question: the answer is
		// its feedback (nothing was verified).
		b.WriteString("\n")
		b.WriteString(qa)
	} else if fb := r.feedback(next.Iteration - 1); fb != "" {
		b.WriteString("\n")
		b.WriteString(fb)
	}
	if note := r.ontoBaseNote(); note != "" {
		b.WriteString("\n")
		b.WriteString(note)
	}
	return b.String()
}

// questionAndAnswer is the question the agent asked at the end of
// iteration it and the user's answer, "" when it asked none.
func (r *runner) questionAndAnswer(it int) string {
	if it < 1 {
		return ""
	}
	impl := r.hist.LastIn(it, api.PhaseImplementation)
	if impl == nil || impl.Question == "" {
		return ""
	}
	answer := impl.Answer
	if answer == "" {
		answer = "(the run was resumed without an answer: decide for yourself and say what you chose)"
	}
	return fmt.Sprintf("## Your question from iteration %d\n\n%s\n\n## The answer\n\n%s\n", it, impl.Question, answer)
}

// feedback describes how iteration it went, when it did not complete.
func (r *runner) feedback(it int) string {
	if it < 1 {
		return ""
	}
	var b strings.Builder
	fail := r.hist.LastFailure(it)
	if fail == nil {
		// Every phase passed, yet the run did not complete: the promise
		// was missing.
		if r.cfg.HasGate(config.GatePromise) {
			fmt.Fprintf(&b, "## Feedback from iteration %d\n\nEvery check passed, but your final message did not end with the completion line. "+
				"If the goal is fully achieved, end your final message with:\n%s\n", it, r.cfg.CompletionPromise)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "## Feedback from iteration %d\n\n", it)
	switch fail.Phase {
	case api.PhaseVerification:
		fmt.Fprintf(&b, "Verification failed: %s.\n", fail.Error)
		if names := fail.TestsFailedNames; len(names) > 0 {
			shown := names[:min(len(names), feedbackNames)]
			fmt.Fprintf(&b, "Failing tests: %s", strings.Join(shown, ", "))
			if more := len(names) - len(shown); more > 0 {
				fmt.Fprintf(&b, " (+%d more)", more)
			}
			b.WriteString("\n")
		}
		if pre := fail.TestsIgnoredNames; len(pre) > 0 {
			// The agent need not chase what it did not break: the new
			// failures are what fails the check.
			shown := pre[:min(len(pre), feedbackNames)]
			verb := "were"
			if len(pre) == 1 {
				verb = "was"
			}
			fmt.Fprintf(&b, "Of these, %d %s already failing before the run and ignored: %s", len(pre), verb, strings.Join(shown, ", "))
			if more := len(pre) - len(shown); more > 0 {
				fmt.Fprintf(&b, " (+%d more)", more)
			}
			b.WriteString(". The others are the ones to fix.\n")
		}
	case api.PhaseReview:
		fmt.Fprintf(&b, "The review did not approve: %s.\n", fail.Error)
	case api.PhaseImplementation:
		fmt.Fprintf(&b, "The previous attempt failed: %s.\n", fail.Error)
	}
	if out := r.secrets.String(feedbackOutput(fail)); out != "" {
		fmt.Fprintf(&b, "\nLast lines of its output:\n```\n%s\n```\n", out)
	}
	return b.String()
}

// feedbackOutput is the capped tail of a failed step's output, without
// terminal escapes, starting at a line boundary when one is near.
func feedbackOutput(st *storage.Step) string {
	if st.Phase == api.PhaseReview && st.FinalMessage != "" {
		return tailString(st.FinalMessage, feedbackTail)
	}
	out := termtext.StripString(tail(st.LogPath, feedbackTail)) // escape sequences are noise in a prompt
	if i := strings.IndexByte(out, '\n'); len(out) >= feedbackTail-1 && i >= 0 && i < 512 {
		out = out[i+1:]
	}
	return strings.TrimRight(out, "\n")
}
