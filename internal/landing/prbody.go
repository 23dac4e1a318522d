package landing

import (
	"context"
	"fmt"
	"strings"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// PRBody is what the markdown body a push hands to pr_command
// (LOOP_BODY_FILE) says about a run: its goal, how many iterations it
// took, its tests, what it cost, and, for a backlog, its tasks.
type PRBody struct {
	RunID      string
	Goal       string // the run's goal; its first line is the title
	Name       string // the run's name, when it has one
	Branch     string
	BaseBranch string
	Iterations int
	// Tests are the last verification's results; nil when no
	// verification reported any.
	Tests *PRTests
	// Verified says whether what was pushed passed verify_command, and
	// on which commit; Note says why not.
	Verified     bool
	TestedCommit string
	Note         string
	CostUSD      float64
	CostUnknown  bool // a step's usage was found but could not be priced
	Tokens       int64
	Tasks        []PRTask // a backlog's tasks, in its order; none for a single run
}

// PRTests are a verification's test counts; nil counts are unknown.
type PRTests struct {
	Passed, Failed, Skipped *int
}

// PRTask is one task of a backlog, as a pull request's body lists it.
type PRTask struct {
	ID     string
	Title  string
	State  string // pending, running, done, blocked, skipped…
	Why    string // why it is blocked or skipped
	RunID  string // the task run, "" when none ran
	Commit string // where it landed in the integration branch
	// CostUSD is what the task's runs cost; Iterations how many
	// iterations they took.
	CostUSD    float64
	Iterations int
	Tests      *PRTests
}

// Title is the pull request's title: the goal's first line (the run's
// name when the goal has none), at most 200 characters.
func (b PRBody) Title() string {
	title := ""
	for line := range strings.SplitSeq(b.Goal, "\n") {
		if line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#")); line != "" {
			title = line
			break
		}
	}
	if title == "" {
		title = b.Name
	}
	if title == "" {
		title = "loop run " + shortID(b.RunID)
	}
	if r := []rune(title); len(r) > 200 {
		title = strings.TrimSpace(string(r[:197])) + "..."
	}
	return title
}

// Markdown is the body itself.
func (b PRBody) Markdown() string {
	var s strings.Builder
	s.WriteString(strings.TrimSpace(b.Goal))
	s.WriteString("\n\n## What the loop did\n\n")
	fmt.Fprintf(&s, "| | |\n|---|---|\n")
	fmt.Fprintf(&s, "| branch | `%s` from `%s` |\n", b.Branch, b.BaseBranch)
	fmt.Fprintf(&s, "| iterations | %d |\n", b.Iterations)
	fmt.Fprintf(&s, "| tests | %s |\n", b.Tests.text())
	switch {
	case b.Verified:
		fmt.Fprintf(&s, "| verified | yes, `verify_command` passed on `%s` |\n", shortCommit(b.TestedCommit))
	case b.Note != "":
		fmt.Fprintf(&s, "| verified | no (%s) |\n", strings.TrimPrefix(b.Note, "not verified: "))
	default:
		s.WriteString("| verified | no |\n")
	}
	fmt.Fprintf(&s, "| cost | %s |\n", costText(b.CostUSD, b.CostUnknown, b.Tokens))
	if len(b.Tasks) > 0 {
		s.WriteString("\n## Tasks\n\n")
		for _, t := range b.Tasks {
			box := " "
			if t.State == "done" {
				box = "x"
			}
			fmt.Fprintf(&s, "- [%s] **%s** %s — %s", box, t.ID, t.Title, t.State)
			if t.Why != "" {
				fmt.Fprintf(&s, " (%s)", t.Why)
			}
			var facts []string
			if t.Commit != "" {
				facts = append(facts, "landed as `"+shortCommit(t.Commit)+"`")
			}
			if t.Iterations > 0 {
				facts = append(facts, fmt.Sprintf("%d iteration(s)", t.Iterations))
			}
			if t.Tests != nil {
				facts = append(facts, "tests: "+t.Tests.text())
			}
			if t.RunID != "" {
				facts = append(facts, fmt.Sprintf("$%.2f", t.CostUSD), "run `"+shortID(t.RunID)+"`")
			}
			if len(facts) > 0 {
				s.WriteString(": " + strings.Join(facts, ", "))
			}
			s.WriteString("\n")
		}
	}
	fmt.Fprintf(&s, "\n---\nMade by loopd (run `%s`).\n", b.RunID)
	return s.String()
}

func (t *PRTests) text() string {
	if t == nil {
		return "none reported"
	}
	n := func(p *int) string {
		if p == nil {
			return "?"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("%s passed, %s failed, %s skipped (last verification)", n(t.Passed), n(t.Failed), n(t.Skipped))
}

func costText(usd float64, unknown bool, tokens int64) string {
	s := fmt.Sprintf("$%.2f, %d tokens", usd, tokens)
	if unknown {
		s += " (some usage could not be priced)"
	}
	return s
}

// PRBody gathers what the pull request body says about run from its
// steps (iterations, the last verification's tests, tokens and cost) and
// the land's result; a backlog's tasks come from Options.PRTasks.
func (l *Lander) PRBody(ctx context.Context, run storage.Run, res *api.LandResult) (PRBody, error) {
	steps, err := l.store.StepsLight(ctx, run.ID)
	if err != nil {
		return PRBody{}, err
	}
	b := PRBody{RunID: run.ID, Goal: run.Goal, Name: run.Name, Branch: run.Branch, BaseBranch: run.BaseBranch}
	if res != nil {
		b.Verified, b.TestedCommit, b.Note = res.Verified, res.TestedCommit, res.Note
	}
	b.Iterations, b.Tests, b.CostUSD, b.CostUnknown, b.Tokens = summarizeSteps(steps)
	if l.prTasks != nil {
		if b.Tasks, err = l.prTasks(ctx, run); err != nil {
			return PRBody{}, err
		}
	}
	return b, nil
}

// summarizeSteps is a run's iterations, last reported tests, cost and
// tokens, from its steps.
func summarizeSteps(steps []storage.Step) (iterations int, tests *PRTests, usd float64, unknown bool, tokens int64) {
	for i := range steps {
		st := &steps[i]
		iterations = max(iterations, st.Iteration)
		tokens += st.InputTokens + st.CacheReadTokens + st.CacheWriteTokens + st.OutputTokens
		switch {
		case st.PricedCostUSD != nil:
			usd += *st.PricedCostUSD
		case st.ReportedCostUSD != nil:
			usd += *st.ReportedCostUSD
		case st.UsageFound:
			unknown = true
		}
		if st.Phase == api.PhaseVerification && st.TestsFormat != "" {
			tests = &PRTests{Passed: st.TestsPassed, Failed: st.TestsFailed, Skipped: st.TestsSkipped}
		}
	}
	return iterations, tests, usd, unknown, tokens
}
