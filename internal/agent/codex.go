package agent

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/shquote"
	"github.com/loopd/loopd/internal/transcript"
)

// Codex is the Codex CLI's non-interactive exec mode with JSON output:
//
//	codex exec --json --model <model> --sandbox workspace-write -
//
// It runs in Codex's workspace-write sandbox: edits inside the workspace,
// no network by default, no interactive approval in exec mode (--sandbox
// workspace-write replaces the deprecated --full-auto). Codex refuses a
// workspace that is not a git repository; set agent_command for another
// invocation (for example with --skip-git-repo-check).
//
// Quirks: without a working API it prints "Reconnecting… n/m" notices for
// as long as it retries, each one output that keeps idle_timeout from
// firing; `codex exec --json` prints usage only with turn.completed, so
// the exact usage of a failed, killed or resumed turn is in its session
// files (see [CodexSessionUsage]).
var Codex = &Agent{
	Name:    "codex",
	Title:   "Codex",
	Binary:  "codex",
	Install: "install the Codex CLI (npm install -g @openai/codex) and log in",
	Command: func(model string) string {
		return "codex exec --json --model " + shquote.Quote(model) + " --sandbox workspace-write -"
	},
	Format:           transcript.FormatCodex,
	Turn:             codexTurn,
	Paid:             true,
	PrintsReconnects: true,
	CannotRun:        claudeModel,
	SessionUsage:     codexStepUsage,
	// .codex/config.toml (MCP servers, hooks, profiles). Codex itself
	// ignores it until the project is trusted in Codex, which loopd never
	// does; it is gated all the same, so a project trusted in Codex once
	// cannot change what it runs unseen. AGENTS.md is instructions the
	// model reads, not gated.
	Credentials:  &Credentials{HomeVar: "CODEX_HOME", HomeDefault: ".codex", Keys: []string{"OPENAI_API_KEY", "CODEX_API_KEY"}},
	ProjectFiles: []ProjectFile{{Path: ".codex/config.toml", Syntax: SyntaxTOML}},
	FilesDormant: true,
}

// codexTurn: turn.completed and turn.failed end the turn; a thread, a
// turn and every item (a message, a command, a plan) are work.
func codexTurn(typ, _ string) transcript.TurnMark {
	switch typ {
	case "turn.completed", "turn.failed":
		return transcript.TurnEnded
	case "thread.started", "turn.started":
		return transcript.TurnActive
	}
	if strings.HasPrefix(typ, "item.") {
		return transcript.TurnActive
	}
	return transcript.TurnNone
}

// codexStepUsage reads the session files of the threads the step's
// output named, under $CODEX_HOME (default ~/.codex). The agent reports
// no cost; what the output reported, if anything, is kept.
func codexStepUsage(res transcript.Result, env func(string) string, since time.Time) (transcript.Usage, bool, error) {
	if len(res.CodexThreads) == 0 {
		return transcript.Usage{}, false, nil
	}
	home := env("CODEX_HOME")
	if home == "" {
		if h := env("HOME"); h != "" {
			home = filepath.Join(h, ".codex")
		}
	}
	if home == "" {
		return transcript.Usage{}, false, nil
	}
	u, ok, err := CodexSessionUsage(home, res.CodexThreads, since)
	if ok {
		u.ReportedCostUSD = res.Usage.ReportedCostUSD
	}
	return u, ok, err
}

// CodexSessionUsage reads the usage of the model requests that Codex
// recorded in its session files ($CODEX_HOME/sessions/YYYY/MM/DD/
// rollout-*-<thread_id>.jsonl) for the given threads, counting only the
// requests recorded at or after since (the step's start).
//
// It is the exact source for a Codex step: `codex exec --json` prints usage
// only with turn.completed, so a turn that failed after billed requests (a
// 429, a 5xx, a cut stream) or a step killed mid-turn prints none, and
// `codex exec resume` prints the whole thread's running total, which counts
// earlier steps' turns again. The session file has one token_usage_record
// per response (Codex 0.169); older versions write token_count events with
// the thread's cumulative total, whose growth since the step's start is
// used instead.
//
// ok is false when no session file or no usage record was found (the
// caller keeps what the output said).
func CodexSessionUsage(codexHome string, threads []string, since time.Time) (transcript.Usage, bool, error) {
	var files []string
	for _, th := range threads {
		if th == "" || filepath.Base(th) != th {
			continue // not a thread id: never a path
		}
		matches, _ := filepath.Glob(filepath.Join(codexHome, "sessions", "*", "*", "*", "rollout-*-"+th+".jsonl"))
		files = append(files, matches...)
	}
	return sumSessionFiles(files, func(f string) (transcript.Usage, bool, error) {
		return codexSessionFile(f, since)
	})
}

// rolloutLine declares what is read of a session file line.
type rolloutLine struct {
	Timestamp time.Time `json:"timestamp"`
	Type      string    `json:"type"`
	Payload   struct {
		Type       string                  `json:"type"`
		ResponseID string                  `json:"response_id"`
		Usage      *transcript.OpenAIUsage `json:"usage"`
		Info       *struct {
			Total *transcript.OpenAIUsage `json:"total_token_usage"`
		} `json:"info"`
	} `json:"payload"`
}

func codexSessionFile(path string, since time.Time) (transcript.Usage, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return transcript.Usage{}, false, fmt.Errorf("open codex session: %w", err)
	}
	defer f.Close()
	var (
		records     transcript.Usage
		haveRecords bool
		seen        = map[string]bool{}
		before      *transcript.OpenAIUsage // the last cumulative total before since
		last        *transcript.OpenAIUsage // the last cumulative total
	)
	for whole, err := range sessionLines(f) {
		if err != nil {
			return transcript.Usage{}, false, fmt.Errorf("read codex session: %w", err)
		}
		if whole[0] != '{' ||
			!bytes.Contains(whole, []byte(`"token_usage_record"`)) && !bytes.Contains(whole, []byte(`"token_count"`)) {
			continue
		}
		var rl rolloutLine
		if !transcript.Decode(whole, &rl) {
			continue
		}
		after := !rl.Timestamp.Before(since)
		switch {
		case rl.Type == "token_usage_record" && rl.Payload.Usage != nil:
			haveRecords = true
			id := rl.Payload.ResponseID
			if after && (id == "" || !seen[id]) {
				seen[id] = id != ""
				records.Add(rl.Payload.Usage.Usage())
			}
		case rl.Payload.Type == "token_count" && rl.Payload.Info != nil && rl.Payload.Info.Total != nil:
			t := rl.Payload.Info.Total
			if !after {
				before = t
			}
			last = t
		}
	}
	switch {
	case haveRecords:
		return records, true, nil
	case last != nil:
		u := last.Usage()
		if before != nil {
			u = u.Since(before.Usage()) // a restated total never goes negative
		}
		return u, true, nil
	}
	return transcript.Usage{}, false, nil
}
