package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
)

// answerOptions are the options of loopctl answer.
type answerOptions struct {
	*globalOptions
}

func newAnswerCmd(g *globalOptions) *cobra.Command {
	o := &answerOptions{globalOptions: g}
	return &cobra.Command{
		Use:   "answer RUN TEXT",
		Short: "Answer the question a run's agent asked, and resume the run",
		Long: `Answer the question a run's agent asked: a run whose agent ended its final
message with <question>…</question> is WAITING with reason needs_answer, and
loopctl status shows the question. The answer is stored with the question
(secrets redacted like the goal), the run resumes, and the next prompt
carries both. Several words are joined with spaces. A run that is not
waiting for an answer is refused with exit 64.`,
		Example: `  loopctl answer 3f2a "Use SQLite; no new dependency."`,
		Args:    cobra.MinimumNArgs(2),
		RunE:    o.run,
	}
}

func (o *answerOptions) run(cmd *cobra.Command, args []string) error {
	text := strings.TrimSpace(strings.Join(args[1:], " "))
	if text == "" {
		return usageErrorf("the answer is empty; give the text to send the agent")
	}
	return control(cmd, o.globalOptions, args[0], func(ctx context.Context, c *api.Client, ref api.RunRef) (api.Run, error) {
		return c.Answer(ctx, ref, text)
	}, func(r api.Run) string {
		return fmt.Sprintf("run %s: answered; it resumes with the question and your answer in its next prompt", shortID(r.ID))
	})
}
