package agent

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/loopd/loopd/internal/shquote"
	"github.com/loopd/loopd/internal/transcript"
)

// Gemini is Gemini CLI headless with stream-json output:
//
//	gemini -p "" --skip-trust --yolo --output-format stream-json -m <model>
//
// Gemini CLI reads a non-TTY stdin as the prompt (-p "" adds nothing to
// it); --skip-trust because a loop cannot answer its trust question (it
// exits 55 untrusted), --yolo approves its tool calls, -m avoids the
// extra routing request it makes to pick a model.
//
// Quirks: its stream-json output reports usage only in its final result
// line, which a killed CLI never prints, while its session file has each
// response's tokens (see [GeminiSessionUsage]); a terminated CLI's child
// may exit 0 without finishing.
var Gemini = &Agent{
	Name:    "gemini",
	Title:   "Gemini CLI",
	Binary:  "gemini",
	Install: "install Gemini CLI (npm install -g @google/gemini-cli) and set GEMINI_API_KEY",
	Command: func(model string) string {
		return `gemini -p "" --skip-trust --yolo --output-format stream-json -m ` + shquote.Quote(model)
	},
	Format:       transcript.FormatGemini,
	Turn:         geminiTurn,
	Paid:         true,
	CannotRun:    claudeModel,
	SessionUsage: geminiStepUsage,
	// What Gemini CLI's own folder trust guards, which the preset's
	// --skip-trust turns off: .gemini/settings.json (hooks, mcpServers,
	// tools.discoveryCommand), .gemini/.env and .env (loaded into its
	// environment: a base URL there receives the API key, BASH_ENV runs
	// in every shell command), .gemini/commands, .gemini/skills,
	// .gemini/agents. GEMINI.md is instructions the model reads, not
	// gated.
	//
	// Its env file is found as its findEnvFile does: walking up to /, the
	// first directory holding .gemini/.env or .env gives the only one
	// loaded (tried: a parent's BASH_ENV runs). It does not walk up for
	// its settings or commands.
	Credentials: &Credentials{HomeVar: "GEMINI_CLI_HOME", HomeDefault: ".gemini", Keys: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}},
	ProjectFiles: []ProjectFile{
		{Path: ".gemini/settings.json"},
		{Path: ".gemini/.env", Syntax: SyntaxEnv, Parents: FirstFound},
		// Gemini CLI loads the workspace's .env itself, every variable
		// once the folder counts as trusted (--skip-trust): gated as its
		// file when it is not the run's env file (which is gated, or
		// named by the user).
		{Path: ".env", Syntax: SyntaxEnv, Parents: FirstFound},
		{Path: ".gemini/commands", Dir: true},
		{Path: ".gemini/skills", Dir: true},
		{Path: ".gemini/agents", Dir: true},
	},
}

// geminiTurn: the result line ends the turn; init, messages and tool
// calls are work.
func geminiTurn(typ, _ string) transcript.TurnMark {
	switch typ {
	case "result":
		return transcript.TurnEnded
	case "init", "message", "tool_use", "tool_result":
		return transcript.TurnActive
	}
	return transcript.TurnNone
}

// geminiStepUsage reads the session file of a step killed before its
// result line (under ~/.gemini): it has every response that ended.
func geminiStepUsage(res transcript.Result, env func(string) string, since time.Time) (transcript.Usage, bool, error) {
	if res.ResultSeen || res.SessionID == "" {
		return transcript.Usage{}, false, nil
	}
	h := env("HOME")
	if h == "" {
		return transcript.Usage{}, false, nil
	}
	return GeminiSessionUsage(filepath.Join(h, ".gemini"), res.SessionID, since)
}

// GeminiSessionUsage reads the usage Gemini CLI recorded in its session
// file ($HOME/.gemini/tmp/<project>/chats/session-*.jsonl) for the session
// sessionID, counting the responses recorded at or after since.
//
// Gemini CLI writes each response's tokens there as soon as the response
// ends, while its stream-json output reports usage only in its final result
// line, which a killed CLI never prints: this is how a killed Gemini step
// keeps its tokens. Thoughts are billed as output and counted so.
//
// ok is false when no file of that session, or no response in it, was found.
func GeminiSessionUsage(geminiDir, sessionID string, since time.Time) (transcript.Usage, bool, error) {
	if sessionID == "" || filepath.Base(sessionID) != sessionID {
		return transcript.Usage{}, false, nil
	}
	files, _ := filepath.Glob(filepath.Join(geminiDir, "tmp", "*", "chats", "session-*.jsonl"))
	return sumSessionFiles(files, func(f string) (transcript.Usage, bool, error) {
		return geminiSessionFile(f, sessionID, since)
	})
}

// geminiRecord declares what is read of a session file line.
type geminiRecord struct {
	SessionID string    `json:"sessionId"`
	ID        string    `json:"id"`
	Timestamp time.Time `json:"timestamp"`
	Type      string    `json:"type"`
	Tokens    *struct {
		Input    transcript.Count `json:"input"`
		Output   transcript.Count `json:"output"`
		Cached   transcript.Count `json:"cached"`
		Thoughts transcript.Count `json:"thoughts"`
	} `json:"tokens"`
}

func geminiSessionFile(path, sessionID string, since time.Time) (transcript.Usage, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return transcript.Usage{}, false, fmt.Errorf("open gemini session: %w", err)
	}
	defer f.Close()
	var (
		u     transcript.Usage
		found bool
		first = true
		seen  = map[string]bool{}
	)
	for whole, err := range sessionLines(f) {
		if err != nil {
			return transcript.Usage{}, false, fmt.Errorf("read gemini session: %w", err)
		}
		if len(bytes.TrimSpace(whole)) == 0 {
			continue
		}
		var rec geminiRecord
		ok := transcript.Decode(whole, &rec)
		if first {
			// The header names the session; another session's file is
			// not ours.
			if !ok || rec.SessionID != sessionID {
				return transcript.Usage{}, false, nil
			}
			first = false
		} else if ok && rec.Type == "gemini" && rec.Tokens != nil && !rec.Timestamp.Before(since) && !seen[rec.ID] {
			seen[rec.ID] = rec.ID != ""
			t := rec.Tokens
			in, out, cached, thoughts := t.Input.Value(), t.Output.Value(), t.Cached.Value(), t.Thoughts.Value()
			u.Add(transcript.Usage{
				InputTokens:     max(0, in-cached),
				OutputTokens:    out + thoughts,
				CacheReadTokens: cached,
				ReasoningTokens: thoughts,
			})
			found = true
		}
	}
	return u, found, nil
}
