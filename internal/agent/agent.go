package agent

import (
	"slices"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/transcript"
)

// Agent describes one agent preset: everything loopd knows about the CLI
// it runs. The zero value of a field means the agent has no such trait.
type Agent struct {
	// Name is the preset's name, the value of the config key agent.
	Name string
	// Title is the CLI's name for people ("Claude Code"), in messages.
	Title string
	// Binary is the program the preset runs, checked before a run starts;
	// "" when the command line is the user's own.
	Binary string
	// Install says how to install the CLI (and log in), for a run that
	// did not find Binary.
	Install string
	// Command returns the preset's shell command line (for sh -c) for a
	// model, which it shell-quotes; nil when the user gives the command
	// (agent_command). The prompt arrives on stdin.
	Command func(model string) string
	// Format is the dialect the CLI's output is recognised as; "" when it
	// has none of its own (plain text and loopd's generic usage lines are
	// everyone's; the user's command may print any dialect).
	Format transcript.Format
	// Turn says what an output line of type typ (and subtype) tells of
	// the agent's turn (see [ClassifyTurnLine]); nil when its output has
	// no turns. A line type no other agent uses the other way.
	Turn func(typ, subtype string) transcript.TurnMark
	// Credentials is where the CLI keeps its login, so that runs sharing
	// an account share its usage limit; nil when loopd cannot tell two
	// logins apart (the user's own command).
	Credentials *Credentials
	// Paid reports that the CLI spends money per token, so a run without
	// a cost cap is warned about.
	Paid bool
	// PrintsReconnects reports that the CLI may print "Reconnecting…"
	// notices while its API connection fails, which keep idle_timeout from
	// firing: its step's log is read for them. Only Codex is known to; the
	// user's command may be anything, Codex included.
	PrintsReconnects bool
	// RootRefusal, when set, is how the CLI refuses to run as root.
	RootRefusal *RootRefusal
	// CannotRun, when set, returns why the preset cannot run a model
	// ("a Claude model"), or "" when it can.
	CannotRun func(model string) string
	// SessionUsage, when set, reads the usage the CLI recorded in its own
	// session files for the step whose output gave res, from the step's
	// start (since) on; env looks a variable up in the agent's environment.
	// ok is false when it found none (the output's usage stands).
	SessionUsage func(res transcript.Result, env func(string) string, since time.Time) (u transcript.Usage, ok bool, err error)
	// ProjectFiles are the workspace files the CLI reads and obeys on its
	// own, before the model says a word: they are gated behind trust.
	ProjectFiles []ProjectFile
	// FilesDormant reports that the CLI ignores its project files until
	// the project is trusted in the CLI itself; they are listed after the
	// files that every run obeys.
	FilesDormant bool
}

// RootRefusal is a CLI's refusal to run as root with a flag the preset
// passes, unless its environment says it runs in a sandbox.
type RootRefusal struct {
	// Flag is the refused flag; an agent_command that passes it is refused
	// the same way.
	Flag string
	// SandboxEnv is the variable that lifts the refusal when it is "1".
	SandboxEnv string
	// Description says what happens and what to do, for the run's abort.
	Description string
}

// Syntax is how a project file is read to show what it sets.
type Syntax int

const (
	// SyntaxJSON is a JSON settings file (comments allowed): its commands
	// wherever nested, its environment, its MCP servers.
	SyntaxJSON Syntax = iota
	// SyntaxEnv is a dotenv file: the variables it sets.
	SyntaxEnv
	// SyntaxTOML is a TOML config file: its tables and commands.
	SyntaxTOML
)

// ProjectFile is one workspace-relative path an agent CLI reads.
type ProjectFile struct {
	// Path is relative to the workspace, with slashes.
	Path string
	// Dir reports a directory, whose files are reviewed as one set
	// (custom commands, subagents, skills).
	Dir bool
	// Syntax is how a file (not a directory) is read.
	Syntax Syntax
	// Parents says whether the CLI also reads the path from the
	// workspace's parent directories, and how.
	Parents Parents
	// Agent is the Name of the agent that reads it.
	Agent string
}

// Parents is how a CLI reads a project file from the parent directories
// of its working directory.
type Parents int

const (
	// NoParents: only the working directory's.
	NoParents Parents = iota
	// EveryParent: the path in every directory up to /, each one read.
	EveryParent
	// FirstFound: walking up from the working directory, the first
	// directory holding one of the agent's FirstFound paths (in list
	// order) gives the only one read; the search stops there.
	FirstFound
)

// all lists the agents in the order loopd names them in messages.
var all = []*Agent{Claude, Codex, Gemini, Command}

// All returns every agent preset, in the order loopd names them.
func All() []*Agent { return slices.Clone(all) }

// Names returns the presets' names, in the order of [All].
func Names() []string {
	names := make([]string, len(all))
	for i, a := range all {
		names[i] = a.Name
	}
	return names
}

// Lookup returns the preset named name.
func Lookup(name string) (*Agent, bool) {
	i := slices.IndexFunc(all, func(a *Agent) bool { return a.Name == name })
	if i < 0 {
		return nil, false
	}
	return all[i], true
}

// ForFormat returns the agent whose output dialect is f, nil when none is
// (plain text, generic usage lines).
func ForFormat(f transcript.Format) *Agent {
	for _, a := range all {
		if a.Format != "" && a.Format == f {
			return a
		}
	}
	return nil
}

// InstallHint says how to install the CLI whose program is bin, "" when
// no preset runs bin.
func InstallHint(bin string) string {
	for _, a := range all {
		if a.Binary != "" && a.Binary == bin {
			return a.Install
		}
	}
	return ""
}

// StepUsage is a step's usage: what its output says (res), or, when the
// output came from a CLI that keeps session files, what it recorded there
// per response when it has it (exact for failed turns, killed CLIs and
// resumed threads). The agent is told by its output, not by the preset,
// so a wrapper script running a CLI is read the same. A session file
// that could not be read is reported in err, and the output's usage kept.
//
// found reports whether any usage was found, in the output or in the
// session files: a killed Gemini CLI or a failed Codex turn prints none,
// and its tokens must still be priced, not counted as free.
func StepUsage(res transcript.Result, env func(string) string, since time.Time) (u transcript.Usage, found bool, err error) {
	a := ForFormat(res.Format)
	if a == nil || a.SessionUsage == nil {
		return res.Usage, res.UsageFound, nil
	}
	u, ok, err := a.SessionUsage(res, env, since)
	if !ok {
		return res.Usage, res.UsageFound, err
	}
	return u, true, err
}

// RootRefusalFor returns the root refusal that the command line of the
// preset name (or agentCommand, the user's own command line, when set)
// runs into, nil when none does: a preset's own refusal, or the refusal
// of any CLI whose refused flag agentCommand passes.
func RootRefusalFor(name, agentCommand string) *RootRefusal {
	if agentCommand == "" {
		if a, ok := Lookup(name); ok {
			return a.RootRefusal
		}
		return nil
	}
	for _, a := range all {
		if r := a.RootRefusal; r != nil && strings.Contains(agentCommand, r.Flag) {
			return r
		}
	}
	return nil
}

// WatchesReconnects reports whether a step of the preset name is watched
// for reconnect notices: the presets known never to print them are not;
// the user's command and an unknown name are.
func WatchesReconnects(name string) bool {
	a, ok := Lookup(name)
	return !ok || a.PrintsReconnects
}

// ProjectFiles returns the project files of every agent, whichever runs
// (a custom agent_command may run any CLI, and a run can be resumed with
// another agent): the agents' in the order of [All], the dormant ones
// (see [Agent.FilesDormant]) last.
func ProjectFiles() []ProjectFile {
	var out, dormant []ProjectFile
	for _, a := range all {
		for _, f := range a.ProjectFiles {
			f.Agent = a.Name
			if a.FilesDormant {
				dormant = append(dormant, f)
			} else {
				out = append(out, f)
			}
		}
	}
	return append(out, dormant...)
}

// Credentials is where an agent CLI keeps its login: its config home (the
// variable that moves it, and its default under HOME) and the variables
// that carry an API key or token.
type Credentials struct {
	HomeVar, HomeDefault string
	Keys                 []string
}
