package agent

import (
	"strings"

	"github.com/loopd/loopd/internal/shquote"
	"github.com/loopd/loopd/internal/transcript"
)

// Claude is Claude Code in print mode:
//
//	claude -p --output-format stream-json --verbose --include-partial-messages --model <model> --dangerously-skip-permissions
//
// --verbose is required by Claude Code for stream-json output in print
// mode. --include-partial-messages makes it print each API response's
// final usage (message_delta) as it arrives: a step killed before its
// result line still counts every token it was billed, so Claude needs no
// session file.
//
// Security: an autonomous loop cannot answer permission prompts, so the
// preset passes --dangerously-skip-permissions: Claude Code then edits
// files, runs any shell command and fetches URLs without asking, with the
// user's own privileges. Set agent_command for a stricter invocation (for
// example with --allowedTools). Claude Code refuses the flag when run as
// root unless IS_SANDBOX=1.
var Claude = &Agent{
	Name:    "claude",
	Title:   "Claude Code",
	Binary:  "claude",
	Install: "install Claude Code (npm install -g @anthropic-ai/claude-code) and log in",
	Command: func(model string) string {
		return "claude -p --output-format stream-json --verbose --include-partial-messages --model " + shquote.Quote(model) +
			" --dangerously-skip-permissions"
	},
	Format: transcript.FormatClaude,
	Turn:   claudeTurn,
	Paid:   true,
	RootRefusal: &RootRefusal{
		Flag:       "--dangerously-skip-permissions",
		SandboxEnv: "IS_SANDBOX",
		Description: "Claude Code refuses --dangerously-skip-permissions (which the claude preset passes) when run as root, " +
			"and loopd runs as root: if this is a container or sandbox, set IS_SANDBOX=1 in the run's env_file " +
			"(.env in the workspace) or in the daemon's environment; otherwise run loopd as a normal user. " +
			"Then `loopctl resume` the run",
	},
	// What Claude Code reads from a workspace and obeys without the model
	// choosing to, found in its binary and tried: .claude/settings.json
	// and .claude/settings.local.json (hooks, env, apiKeyHelper,
	// statusLine, plugins), .mcp.json (MCP servers, started at startup in
	// print mode), and .claude/agents, .claude/commands, .claude/skills
	// (their front matter can declare hooks and MCP servers, their bodies
	// `!` shell lines). CLAUDE.md is instructions the model reads, not
	// gated: the repository's text can always steer the model.
	//
	// It also reads .mcp.json and .claude/{agents,commands,skills} from
	// every parent directory up to / (tried: a parent's MCP server
	// starts; a PROMPT.md of `/name` runs a parent command's `!` lines
	// before any model call), not .claude/settings.json.
	Credentials: &Credentials{HomeVar: "CLAUDE_CONFIG_DIR", HomeDefault: ".claude", Keys: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}},
	ProjectFiles: []ProjectFile{
		{Path: ".claude/settings.json"},
		{Path: ".claude/settings.local.json"},
		{Path: ".mcp.json", Parents: EveryParent},
		{Path: ".claude/agents", Dir: true, Parents: EveryParent},
		{Path: ".claude/commands", Dir: true, Parents: EveryParent},
		{Path: ".claude/skills", Dir: true, Parents: EveryParent},
	},
}

// claudeModel is CannotRun for the presets that cannot run Anthropic's
// models. The default model is a Claude model: a user who sets another
// agent and forgets model would otherwise fail on every iteration.
func claudeModel(model string) string {
	if strings.HasPrefix(strings.ToLower(model), "claude") {
		return "a Claude model"
	}
	return ""
}

// claudeTurn: the result line ends the turn; init, the model's and the
// tools' lines are work. Its other system lines (hooks, compaction,
// notices, a background task's end) may come after the result and start
// no turn.
func claudeTurn(typ, subtype string) transcript.TurnMark {
	switch typ {
	case "result":
		return transcript.TurnEnded
	case "system":
		if subtype == "init" {
			return transcript.TurnActive
		}
	case "assistant", "user", "stream_event":
		return transcript.TurnActive
	}
	return transcript.TurnNone
}
