// Package agent is what loopd knows about each agent CLI it has a preset
// for, one file per agent: Claude Code (claude.go), Codex (codex.go),
// Gemini CLI (gemini.go) and the user's own command (command.go). Each
// file declares one [Agent]: the preset's command line, the dialect its
// output is read as, the session files that hold the usage its output
// misses, its quirks (a refusal to run as root, reconnect notices, models
// it cannot run) and the project files it reads from a workspace and
// obeys on its own, which loopd gates behind trust.
//
// The rest of loopd asks this package instead of naming an agent:
// internal/config for the command line, the binary and the model check,
// internal/trust for the project files, internal/scheduler for session
// usage, reconnect watching and the root refusal. The package sits low:
// it imports only internal/transcript (the parsing engine whose Result
// and Usage it reads) and internal/shquote, so every floor above may
// use it and loopctl links it without the daemon's storage.
//
// # Adding an agent
//
// A fourth CLI is one new file, foo.go, declaring
//
//	var Foo = &Agent{Name: "foo", Title: "Foo CLI", Binary: "foo",
//		Command: func(model string) string { return "foo --json --model " + shquote.Quote(model) },
//		Format: transcript.FormatGeneric, ...}
//
// plus its line in the registry list in agent.go (the order in which
// loopd names the agents in messages). The config key agent accepts it,
// loopd checks its binary before a run, gates its project files, watches
// its log for reconnect notices when it says it prints them, and reads
// its session files when it has a SessionUsage reader. Only an output
// dialect loopd does not read yet needs more: its line handler in
// internal/transcript (state.go's dispatch) and the Format constant. The
// user-facing pages (docs/agents.md, the agent key's description in
// internal/config/reference.go) name the agents in prose.
package agent
