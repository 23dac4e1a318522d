// Package agent is what loopd knows about each agent CLI it has a preset
// for, one file per agent: Claude Code (claude.go), Codex (codex.go),
// Gemini CLI (gemini.go) and the user's own command (command.go). Each
// file declares one [Agent]: the preset's command line and binary, how to
// install it, the dialect its output is read as and which of its lines
// start and end a turn, the session files that hold the usage its output
// misses, its quirks (a refusal to run as root, reconnect notices, models
// it cannot run) and the project files it reads from a workspace and
// obeys on its own, which loopd gates behind trust.
//
// The rest of loopd asks this package instead of naming an agent:
// internal/config for the command line, the binary and the model check,
// internal/trust for the project files, internal/scheduler for session
// usage, turn ends, reconnect watching, the root refusal, the install hint
// and the cost warning. The package sits low: it imports only
// internal/transcript (the parsing engine whose Result, Usage and
// TurnMark it reads) and internal/shquote, so every floor above may
// use it and loopctl links it without the daemon's storage.
//
// # Adding an agent
//
// A fourth CLI is one new file, foo.go, declaring
//
//	var Foo = &Agent{Name: "foo", Title: "Foo CLI", Binary: "foo",
//		Install: "install Foo CLI (npm install -g foo-cli) and log in",
//		Command: func(model string) string { return "foo --model " + shquote.Quote(model) },
//		Paid:    true, ProjectFiles: []ProjectFile{{Path: ".foo/settings.json"}}}
//
// plus its line in the registry list in agent.go (the order in which
// loopd names the agents in messages). The config key agent then accepts
// it, loopd checks its binary before a run and says how to install it,
// warns about a missing cost cap when it is Paid, gates its project
// files, folds its turn lines, watches its log for reconnect notices when
// it prints them, and reads its session files when it has a SessionUsage
// reader. Only an output dialect loopd does not read yet needs more, in
// internal/transcript: a file with its line handlers (like claude.go
// there), its Format constant, and in state.go a flag, a case in dispatch
// and its rank in result. The user-facing pages (docs/agents.md, the
// agent key's description in internal/config/reference.go) name the
// agents in prose.
package agent
