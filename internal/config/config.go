package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/loopd/loopd/internal/agent"
	"github.com/loopd/loopd/internal/humantime"
)

// Agent names the agent preset that runs the implementation phase.
type Agent string

// Isolation is how a run uses its workspace (key isolation).
type Isolation string

const (
	// IsolationInPlace runs the steps in the workspace itself; at most one
	// run per workspace is active at a time.
	IsolationInPlace Isolation = "in_place"
	// IsolationWorktree gives the run its own git worktree and branch
	// (LOOPD_HOME/worktrees/<run-id>, loop/<short-id>), so runs on one
	// repository run side by side and the user's checkout is never touched.
	IsolationWorktree Isolation = "worktree"
)

var isolations = []Isolation{IsolationInPlace, IsolationWorktree}

const (
	// AgentClaude runs Claude Code in print mode with stream-json output; see
	// [Config.AgentCommandLine] for the exact command and its permissions.
	AgentClaude Agent = "claude"
	// AgentCodex runs the Codex CLI's non-interactive "exec" mode with JSON
	// output; see [Config.AgentCommandLine].
	AgentCodex Agent = "codex"
	// AgentGemini runs Gemini CLI headless with stream-json output; see
	// [Config.AgentCommandLine].
	AgentGemini Agent = "gemini"
	// AgentCommand runs agent_command as it is: any program that reads the
	// prompt on stdin (or from $LOOP_PROMPT_FILE).
	AgentCommand Agent = "command"
)

// agents lists the valid agents in the order error messages name them:
// every preset internal/agent describes.
var agents = func() []Agent {
	var out []Agent
	for _, name := range agent.Names() {
		out = append(out, Agent(name))
	}
	return out
}()

// Gate names one condition of the completion gate (docs/stop-conditions.md). A run
// completes only when every configured gate holds after the same iteration.
type Gate string

const (
	// GatePromise holds when the agent's final message ends with the
	// completion promise on a line of its own.
	GatePromise Gate = "promise"
	// GateVerify holds when the iteration's verification passed; it holds
	// vacuously when no verify_command is configured.
	GateVerify Gate = "verify"
	// GateReview holds when the reviewer approved; it holds vacuously when no
	// review_command is configured.
	GateReview Gate = "review"
	// GatePlan holds when the plan file has no unchecked "- [ ]" item. It
	// requires plan_file.
	GatePlan Gate = "plan"
	// GateChanges holds when the run changed something against its base,
	// as the change ledger records it: "done" with no change is not done.
	// It requires a git repository.
	GateChanges Gate = "changes"
)

// gates lists the valid gates in the order error messages name them.
var gates = []Gate{GatePromise, GateVerify, GateReview, GatePlan, GateChanges}

// Duration is a time.Duration that reads and writes humantime strings in JSON
// and text ("60m" reads as an hour and writes as "1h"), so the frozen
// configuration stays readable. See package humantime for the syntax.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String returns the canonical humantime form of d, such as "1h 30m".
func (d Duration) String() string { return humantime.Format(time.Duration(d)) }

// MarshalText implements encoding.TextMarshaler (and so JSON) with the
// canonical humantime form.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (and so JSON); it accepts
// humantime strings and Go durations.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := humantime.Parse(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Price is the price of a model in USD per million tokens.
type Price struct {
	// Input is the price of uncached input tokens.
	Input float64 `json:"input"`
	// Output is the price of output tokens.
	Output float64 `json:"output"`
	// CacheRead is the price of input tokens read from the prompt cache.
	CacheRead float64 `json:"cache_read"`
	// CacheWrite is the price of input tokens written to the prompt cache
	// (for 5 minutes, Anthropic's default).
	CacheWrite float64 `json:"cache_write"`
	// CacheWrite1h is the price of input tokens written to the prompt cache
	// for one hour (Anthropic); 0 means the CacheWrite price.
	CacheWrite1h float64 `json:"cache_write_1h,omitempty"`
}

// Config is the configuration of one run, resolved from the layers described
// in the package documentation and frozen when the run is created: its JSON
// form (field names equal to the config keys) is what the database stores.
// Every field documents its key and its default; [Default] returns the
// defaults and [Config.Validate] checks every field at once.
//
// Paths are absolute after [Load] and [Config.With]: relative values are
// resolved against the workspace when they are read, so a frozen config does
// not depend on the daemon's working directory.
//
// Decoding JSON into a Config starts from [Default], so a key missing from an
// older frozen config gets its default rather than a zero value.
type Config struct {
	// Agent (key agent, default "claude") is the agent preset.
	Agent Agent `json:"agent"`
	// AgentCommand (key agent_command, default none) is a shell command that
	// replaces the preset's command line; required when Agent is
	// AgentCommand. Use [Config.AgentCommandLine] to get the command to run.
	AgentCommand string `json:"agent_command"`
	// Model (key model, default "claude-sonnet-4-5"; none for agent=command)
	// is passed to the presets and selects the price used for max_cost. A
	// run without one counts the cost its agent reports.
	Model string `json:"model"`

	// Prompt (key prompt, default none) is the goal as text. Prompt and
	// PromptFile are one setting: at most one of them is set.
	Prompt string `json:"prompt"`
	// PromptFile (key prompt_file, default PROMPT.md when the workspace has
	// one and no prompt is set) is the file holding the goal. It must exist.
	PromptFile string `json:"prompt_file"`
	// SpecFile (key spec_file, default none) is referenced in the prompt. It
	// must exist when set.
	SpecFile string `json:"spec_file"`
	// PlanFile (key plan_file, default none) is referenced in the prompt and
	// read by the plan gate and stuck-task detection. It must exist when set.
	PlanFile string `json:"plan_file"`

	// ReviewCommand (key review_command, default none) enables the review
	// phase: a shell command that approves when it exits 0 and its output
	// matches ReviewApprovePattern.
	ReviewCommand string `json:"review_command"`
	// ReviewApprovePattern (key review_approve_pattern, default "APPROVED")
	// is a Go regular expression matched against the review output. An empty
	// pattern matches any output, so the exit status alone decides.
	ReviewApprovePattern string `json:"review_approve_pattern"`

	// VerifyCommands (key verify_command, repeatable, default none) are the
	// project's checks, run in order; all must pass.
	VerifyCommands []string `json:"verify_command"`
	// VerifyReport (key verify_report, default none) is a JUnit XML file the
	// verify commands write, read for test results. It need not exist when
	// the run is created.
	VerifyReport string `json:"verify_report"`
	// VerifyBaseline (key verify_baseline, default false) runs the
	// verification once on the untouched workspace before iteration 1 (a
	// step of phase baseline, at iteration 0: no iteration, never a
	// failure) and records its failing tests; the verify gate then ignores
	// those failures, by parsed test name. Without a verify_command it does
	// nothing.
	VerifyBaseline bool `json:"verify_baseline"`

	// Completion (key completion, default promise,verify,review) lists the
	// gates that must all hold for the run to complete.
	Completion []Gate `json:"completion"`
	// CompletionPromise (key completion_promise, default
	// "<promise>COMPLETE</promise>") is the line the agent's final message
	// ends with when it believes the work is done.
	CompletionPromise string `json:"completion_promise"`
	// QuestionTag (key question_tag, default "question") names the tag of
	// a question: a final message ending with <question>…</question> on
	// its own lines makes the run WAIT (needs_answer) for `loopctl answer`.
	QuestionTag string `json:"question_tag"`

	// StepTimeout (key step_timeout, default 60m, at least 1s) fails a step
	// that runs longer.
	StepTimeout Duration `json:"step_timeout"`
	// IdleTimeout (key idle_timeout, default 15m) fails a step that writes
	// no output for this long. 0 disables idle detection; otherwise at least
	// 1s. A value above StepTimeout is allowed and never fires.
	IdleTimeout Duration `json:"idle_timeout"`

	// MaxIterations (key max_iterations, default 50) aborts the run after
	// this many iterations; 0 is unlimited.
	MaxIterations int `json:"max_iterations"`
	// MaxDuration (key max_duration, default 0 = off) aborts the run after
	// this much wall time spent RUNNING.
	MaxDuration Duration `json:"max_duration"`
	// MaxTokens (key max_tokens, default 0 = off) limits all tokens.
	MaxTokens int64 `json:"max_tokens"`
	// MaxInputTokens (key max_input_tokens, default 0 = off) limits input
	// tokens.
	MaxInputTokens int64 `json:"max_input_tokens"`
	// MaxOutputTokens (key max_output_tokens, default 0 = off) limits output
	// tokens.
	MaxOutputTokens int64 `json:"max_output_tokens"`
	// MaxCost (key max_cost, default 0 = off) limits the cost in USD.
	MaxCost float64 `json:"max_cost"`

	// MaxConsecutiveImplementationFailures (key
	// max_consecutive_implementation_failures, default 3, 0 disables) fails
	// the run after this many implementation failures in a row.
	MaxConsecutiveImplementationFailures int `json:"max_consecutive_implementation_failures"`
	// MaxConsecutiveReviewFailures (key max_consecutive_review_failures,
	// default 0 = disabled) fails the run after this many review failures in
	// a row.
	MaxConsecutiveReviewFailures int `json:"max_consecutive_review_failures"`
	// MaxConsecutiveVerificationFailures (key
	// max_consecutive_verification_failures, default 3, 0 disables) fails the
	// run after this many verification failures in a row.
	MaxConsecutiveVerificationFailures int `json:"max_consecutive_verification_failures"`
	// ProgressResetsStreak (key progress_resets_streak, default true) makes
	// a failed verification with fewer failing tests than the previous
	// failed verification restart the verification failure streak at 1
	// instead of extending it: a loop fixing one test per iteration is
	// making progress, not stuck. false counts every failure.
	ProgressResetsStreak bool `json:"progress_resets_streak"`
	// MaxTaskFailures (key max_task_failures, default 3, 0 disables) fails the
	// run when the same plan task failed verification this many times in a
	// row.
	MaxTaskFailures int `json:"max_task_failures"`
	// NoProgressIterations (key no_progress_iterations, default 0 = off)
	// fails the run after this many iterations without progress.
	NoProgressIterations int `json:"no_progress_iterations"`

	// StopFile (key stop_file, default .loop/stop.json when present) holds
	// composite stop conditions. It must exist when set.
	StopFile string `json:"stop_file"`
	// EnvFile (key env_file, default .env when present) is loaded with
	// [LoadEnvFile] into the environment of the agent, review and verify
	// commands only. It must exist and parse when set.
	EnvFile string `json:"env_file"`

	// PostmortemCommand (key postmortem_command, default none) is run after
	// the run ends, to analyse it.
	PostmortemCommand string `json:"postmortem_command"`
	// PostmortemTimeout (key postmortem_timeout, default 10m, at least 1s)
	// bounds PostmortemCommand.
	PostmortemTimeout Duration `json:"postmortem_timeout"`

	// NotifyCommand (key notify_command, default none) is a shell command
	// run for each notification (see NotifyOn), with the event's JSON on
	// stdin and LOOP_* variables describing it.
	NotifyCommand string `json:"notify_command"`
	// NotifyWebhook (key notify_webhook, default none) is an http(s) URL
	// that receives a POST of JSON for each notification, shaped for Slack,
	// Discord and ntfy incoming webhooks alike.
	NotifyWebhook string `json:"notify_webhook"`
	// NotifyDesktop (key notify_desktop, default false) shows each
	// notification with notify-send when a desktop session exists.
	NotifyDesktop bool `json:"notify_desktop"`
	// NotifyOn (key notify_on, default ended,waiting) lists the run changes
	// that notify: ended, waiting, completed, failed, aborted, paused, and
	// a backlog's task_done and task_blocked.
	NotifyOn []string `json:"notify_on"`
	// MaxAPIWait (key max_api_wait, default 6h, at least 1s) is how long the
	// model API may stay unavailable (overloaded, 5xx, 429 without a
	// usage-limit reset, cut streams, no network) before the run ends
	// ABORTED fatal:api_unavailable. Until then the run WAITs with a capped
	// exponential back-off, counting no iteration and no failure.
	MaxAPIWait Duration `json:"max_api_wait"`
	// RedactSecrets (key redact_secrets, default true) replaces the values
	// of the step environment's secrets (every env file value, and daemon
	// variables named like *KEY*, *TOKEN*, *SECRET*, *PASSWORD*, at least
	// 8 characters long) with [REDACTED:NAME] in what loopd stores and
	// feeds back: the next prompt's feedback, a step's final message and
	// error, the run's description, the postmortem. Step logs are the
	// agent's own output and are not rewritten.
	RedactSecrets bool `json:"redact_secrets"`

	// Isolation (key isolation, default "in_place") is how a run uses its
	// workspace: in place (at most one active run per workspace), or in a
	// git worktree and branch of its own ("worktree", which needs a git
	// repository with a commit).
	Isolation Isolation `json:"isolation"`
	// SetupCommand (key setup_command, default none) runs once in a new
	// worktree before the first iteration, as a step of phase setup, with
	// LOOP_CHECKOUT set to the user's checkout (so that
	// `cp "$LOOP_CHECKOUT/.env" .` brings files git ignores along). It
	// applies to isolation=worktree only; its failure fails the run
	// (reason setup_failed).
	SetupCommand string `json:"setup_command"`

	// TasksFile (key tasks_file) makes a run a backlog run working through
	// the task list in this file (docs/backlogs.md); "" for none.
	TasksFile string `json:"tasks_file"`
	// TasksCommand (key tasks_command) is a command whose standard output
	// is the task list (gh issue list --json number,title,body,labels, say);
	// read once, at start. "" for none.
	TasksCommand string `json:"tasks_command"`
	// MaxParallelTasks (key max_parallel_tasks, default 1, at least 1) is
	// how many task runs of a backlog run at once.
	MaxParallelTasks int `json:"max_parallel_tasks"`
	// LandRetries (key land_retries, default 2) is how many times a task
	// run whose land into the integration branch was refused (a conflict,
	// the combination failing verification) goes back to its agent with
	// the failure before the task is blocked.
	LandRetries int `json:"land_retries"`
	// MaxTaskCost (key max_task_cost, default 0 = off) limits each task
	// run's cost in USD.
	MaxTaskCost float64 `json:"max_task_cost"`
	// MaxTaskIterations (key max_task_iterations, default 0 = the task
	// run's max_iterations) limits each task run's iterations.
	MaxTaskIterations int `json:"max_task_iterations"`

	// Prices (keys price.<model>) override the built-in pricing table per
	// model; models not listed here keep their built-in price. A value is
	// "input,output[,cache_read[,cache_write[,cache_write_1h]]]" in USD per million tokens; an
	// omitted cache price equals the input price, so cache tokens are never
	// counted as free by accident.
	Prices map[string]Price `json:"prices,omitempty"`
}

// Default returns the built-in defaults: the first configuration layer. It
// has no goal, so it does not validate on its own.
func Default() Config {
	return Config{
		Agent:                                AgentClaude,
		Model:                                "claude-sonnet-4-5",
		ReviewApprovePattern:                 "APPROVED",
		Completion:                           []Gate{GatePromise, GateVerify, GateReview},
		CompletionPromise:                    "<promise>COMPLETE</promise>",
		QuestionTag:                          "question",
		StepTimeout:                          Duration(60 * time.Minute),
		IdleTimeout:                          Duration(15 * time.Minute),
		MaxIterations:                        50,
		MaxConsecutiveImplementationFailures: 3,
		MaxConsecutiveReviewFailures:         0,
		MaxConsecutiveVerificationFailures:   3,
		ProgressResetsStreak:                 true,
		MaxTaskFailures:                      3,
		PostmortemTimeout:                    Duration(10 * time.Minute),
		NotifyOn:                             []string{NotifyEnded, NotifyWaiting},
		MaxAPIWait:                           Duration(6 * time.Hour),
		RedactSecrets:                        true,
		Isolation:                            IsolationInPlace,
		MaxParallelTasks:                     1,
		LandRetries:                          2,
	}
}

// UnmarshalJSON decodes a frozen config on top of [Default], so keys that an
// older version did not write keep their defaults.
func (c *Config) UnmarshalJSON(b []byte) error {
	type plain Config // no methods: avoids recursion
	p := plain(Default())
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*c = Config(p)
	return nil
}

// HasGate reports whether g is one of the configured completion gates.
func (c Config) HasGate(g Gate) bool { return slices.Contains(c.Completion, g) }

// AgentCommandLine returns the shell command (for sh -c) that runs the
// implementation phase. The prompt arrives on stdin (and in
// $LOOP_PROMPT_FILE). agent_command, when set, is returned as it is, whatever
// the agent; otherwise the preset's command line, with the model shell-quoted
// (each preset's line, and why it runs without permission prompts, is in
// internal/agent: claude.go, codex.go, gemini.go):
//
//	claude:  claude -p --output-format stream-json --verbose --include-partial-messages --model <model> --dangerously-skip-permissions
//	codex:   codex exec --json --model <model> --sandbox workspace-write -
//	gemini:  gemini -p "" --skip-trust --yolo --output-format stream-json -m <model>
//
// Security: an autonomous loop cannot answer permission prompts, so the
// presets run without them. Run loops on code you trust, ideally in a
// container or VM; set agent_command for a stricter or looser invocation.
// The result is "" for AgentCommand without agent_command (which Validate
// rejects).
func (c Config) AgentCommandLine() string {
	if c.AgentCommand != "" {
		return c.AgentCommand
	}
	if a, ok := agent.Lookup(string(c.Agent)); ok && a.Command != nil {
		return a.Command(c.Model)
	}
	return ""
}

// AgentBinary returns the program a preset runs ("claude", "codex" or "gemini"), so the
// caller can check that it is installed before a run starts. It is "" when
// the command line is the user's own (agent "command", or agent_command set):
// a missing program then shows as the shell's exit status 127.
func (c Config) AgentBinary() string {
	if c.AgentCommand != "" {
		return ""
	}
	if a, ok := agent.Lookup(string(c.Agent)); ok {
		return a.Binary
	}
	return ""
}

// SkipsPermissions reports whether the agent's command line runs Claude Code
// with --dangerously-skip-permissions, which Claude Code refuses as root
// unless IS_SANDBOX=1: the claude preset does, and so does an agent_command
// that passes the flag itself (see agent.RootRefusalFor).
func (c Config) SkipsPermissions() bool {
	return agent.RootRefusalFor(string(c.Agent), c.AgentCommand) != nil
}

// clone returns a deep copy of c, so that changing the copy's slices or maps
// never changes c.
func (c Config) clone() Config {
	c.VerifyCommands = slices.Clone(c.VerifyCommands)
	c.Completion = slices.Clone(c.Completion)
	c.Prices = maps.Clone(c.Prices)
	c.NotifyOn = slices.Clone(c.NotifyOn)
	return c
}
