// Package transcript reads what a coding agent printed during one step and
// reports what it says about that step: token usage and cost, the agent's final
// message, whether it ended in an error, and whether a usage/rate limit stopped
// it.
//
// It understands four structured dialects, detected line by line so that a
// wrapper script printing one of them is read the same as the real CLI:
//
//   - Claude Code `claude -p --output-format stream-json --verbose`
//     (system, assistant, user, result, rate_limit_event, stream_event, …).
//   - Codex `codex exec --json` (thread.started, turn.started, item.*,
//     turn.completed, turn.failed, error) and the older `{"id":…,"msg":{…}}`
//     event envelope (token_count, agent_message, task_complete, …).
//   - Gemini CLI `gemini -p … --output-format stream-json` (init, message,
//     tool_use, tool_result, error, result with stats).
//   - The generic loopd line any other agent may print:
//     {"type":"usage","input_tokens":…,"output_tokens":…,
//     "cache_read_input_tokens":…,"cache_creation_input_tokens":…,"cost_usd":…}
//
// Everything else is plain text. Each structured dialect's handlers are in
// a file of its own (claude.go, codex.go, gemini.go) over the shared
// accounting state (state.go); what else loopd knows about each CLI (its
// command line, session files, turn lines, project files) is in
// internal/agent. A [Parser] is fed the step's log as it grows,
// in chunks of any size, with bounded memory; [ParseFile] reads a finished log.
package transcript

import "time"

// Format is the dialect an agent's output was recognised as.
type Format string

const (
	// FormatText means no structured line was recognised: the output is plain
	// text and the final message is the tail of that text.
	FormatText Format = "text"
	// FormatGeneric means only loopd's generic {"type":"usage",…} lines were
	// recognised (besides plain text).
	FormatGeneric Format = "generic"
	// FormatCodex means Codex `exec --json` events (new or legacy envelope)
	// were recognised and no Claude event was.
	FormatCodex Format = "codex"
	// FormatClaude means Claude Code stream-json events were recognised. It
	// wins over the other formats when several appear in one output.
	FormatClaude Format = "claude"
	// FormatGemini means Gemini CLI `--output-format stream-json` events
	// were recognised (its "init" line first).
	FormatGemini Format = "gemini"
)

// Usage is the token usage and cost of one agent step, normalised across
// agents. Token counts are never negative.
type Usage struct {
	// InputTokens are input tokens NOT served from or written to the cache.
	// Anthropic reports them that way; for OpenAI this is input_tokens minus
	// cached_input_tokens minus cache_write_input_tokens (floored at zero),
	// because OpenAI's input_tokens include both.
	InputTokens int64
	// OutputTokens are generated tokens, reasoning tokens included (Gemini
	// reports its thoughts apart from its output; they are added here,
	// because Google bills them as output).
	OutputTokens int64
	// CacheReadTokens are Anthropic cache_read_input_tokens or OpenAI
	// cached_input_tokens.
	CacheReadTokens int64
	// CacheWriteTokens are Anthropic cache_creation_input_tokens or OpenAI
	// cache_write_input_tokens (newer Codex versions report them).
	CacheWriteTokens int64
	// CacheWrite1hTokens are the part of CacheWriteTokens that Anthropic
	// wrote to the cache for one hour (usage.cache_creation.
	// ephemeral_1h_input_tokens), priced higher than 5-minute writes.
	CacheWrite1hTokens int64
	// ReasoningTokens are the part of OutputTokens the agent reported as
	// reasoning or thinking (Codex reasoning_output_tokens, Gemini thoughts,
	// Claude thinking_tokens); 0 when it reported none.
	ReasoningTokens int64
	// ReportedCostUSD is what the agent itself reported (Claude
	// total_cost_usd, generic cost_usd); nil when it reported none. Codex
	// reports no cost.
	ReportedCostUSD *float64
}

// Result is what an agent's output says about one step.
type Result struct {
	// Format is the detected dialect.
	Format Format
	// Usage is the step's token usage; see [Parser] for how it is summed.
	Usage Usage
	// UsageFound reports whether any usage was seen at all (a step with no
	// usage must not be silently counted as free).
	UsageFound bool
	// Model is the model the agent reported: Claude's init (else first
	// assistant) message model, Codex's session model when it prints one, or
	// "" when none was reported.
	Model string
	// FinalMessage is the agent's final message: the latest of Claude's result
	// text, Claude's last top-level assistant text and Codex's last agent
	// message; for plain-text agents the tail of the non-JSON output. Only
	// the last 64 KiB are kept, cut at a character boundary.
	FinalMessage string
	// ResultSeen reports that the step announced its own end: a Claude
	// `result`, or a Codex turn.completed / turn.failed / task_complete.
	ResultSeen bool
	// IsError reports that the last such end was an error: Claude is_error or
	// an error_* subtype, Codex turn.failed.
	IsError bool
	// ErrorText is a short description of the error, if any (at most 1 KiB).
	ErrorText string
	// RateLimit is non-nil when the agent reports that a usage or rate limit
	// rejected its request. Callers put the run in WAITING until ResetsAt.
	// Check it before IsError: a limit also ends the step in an error.
	RateLimit *RateLimit
	// APIError reports that the step's error is the model API's trouble
	// (overloaded, a 5xx, a 429 without a usage-limit reset, a lost or cut
	// connection) rather than the agent's: the caller waits and retries
	// instead of counting a failure. RateLimit, when set, wins.
	APIError bool
	// Reconnects counts Codex's "Reconnecting…" notices: its connection to
	// the API kept failing.
	Reconnects int
	// SessionID is the last Claude session_id, Codex thread_id or Gemini
	// session_id seen.
	SessionID string
	// CodexThreads lists the Codex thread ids seen (at most 16), whose
	// session files hold the per-request usage (agent.CodexSessionUsage).
	CodexThreads []string
	// OversizedLines counts lines longer than the line limit (8 MiB) that were
	// skipped; parsing continued at the next newline.
	OversizedLines int
}

// RateLimit describes a usage or rate limit that rejected the agent.
type RateLimit struct {
	// ResetsAt is when the limit lifts; zero when the agent did not say (the
	// caller then picks a back-off).
	ResetsAt time.Time
	// Kind is the limit's window as the agent named it (Claude rateLimitType,
	// e.g. "five_hour", "seven_day"); "" when not given.
	Kind string
	// Message is the agent's own words about the limit, when it gave any.
	Message string
}

// Option configures a [Parser] or [ParseFile].
type Option func(*config)

type config struct {
	now func() time.Time
}

// WithNow sets the clock used to resolve human reset texts such as
// "resets 3pm (America/New_York)". It should return the time the output was
// written; [NewParser] defaults to [time.Now] and [ParseFile] to the log
// file's modification time.
func WithNow(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

const (
	// defaultMaxLine bounds one buffered JSON line. Claude lines that carry
	// tool results or file contents can be megabytes long; longer lines are
	// skipped rather than grown without bound.
	defaultMaxLine = 8 << 20
	// maxMessage bounds FinalMessage and the plain-text tail.
	maxMessage = 64 << 10
	// maxErrorText bounds ErrorText and RateLimit.Message.
	maxErrorText = 1 << 10
)
