package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/transcript"
)

func TestRegistry(t *testing.T) {
	if got, want := Names(), []string{"claude", "codex", "gemini", "command"}; !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v (the order messages name them in)", got, want)
	}
	formats := map[transcript.Format]string{}
	for _, a := range All() {
		if got, ok := Lookup(a.Name); !ok || got != a {
			t.Errorf("Lookup(%q) = %v, %v", a.Name, got, ok)
		}
		if a.Title == "" {
			t.Errorf("%s: no title", a.Name)
		}
		// A preset either runs its own binary with its own command line
		// or leaves both to the user.
		if (a.Binary == "") != (a.Command == nil) {
			t.Errorf("%s: binary %q but command line set = %v", a.Name, a.Binary, a.Command != nil)
		}
		if a.Binary != "" && (a.Install == "" || InstallHint(a.Binary) != a.Install) {
			t.Errorf("%s: no install hint for %q", a.Name, a.Binary)
		}
		if a.Format != "" {
			if other, dup := formats[a.Format]; dup {
				t.Errorf("%s and %s both read as format %q", other, a.Name, a.Format)
			}
			formats[a.Format] = a.Name
			if ForFormat(a.Format) != a {
				t.Errorf("ForFormat(%q) is not %s", a.Format, a.Name)
			}
		}
	}
	if h := InstallHint(""); h != "" {
		t.Errorf("InstallHint(\"\") = %q", h)
	}
	if h := InstallHint("sh"); h != "" {
		t.Errorf("InstallHint(\"sh\") = %q", h)
	}
	if _, ok := Lookup("aider"); ok {
		t.Error("an unknown agent was found")
	}
	for _, f := range []transcript.Format{transcript.FormatText, transcript.FormatGeneric, ""} {
		if a := ForFormat(f); a != nil {
			t.Errorf("ForFormat(%q) = %s, want none", f, a.Name)
		}
	}
}

// The presets' command lines quote the model for sh -c.
func TestCommandLines(t *testing.T) {
	for _, tc := range []struct {
		a    *Agent
		want string
	}{
		{Claude, `claude -p --output-format stream-json --verbose --include-partial-messages --model 'it'\''s' --dangerously-skip-permissions`},
		{Codex, `codex exec --json --model 'it'\''s' --sandbox workspace-write -`},
		{Gemini, `gemini -p "" --skip-trust --yolo --output-format stream-json -m 'it'\''s'`},
	} {
		if got := tc.a.Command("it's"); got != tc.want {
			t.Errorf("%s: %s\nwant %s", tc.a.Name, got, tc.want)
		}
	}
	if Command.Command != nil {
		t.Error("the command preset has a command line of its own")
	}
}

func TestQuirks(t *testing.T) {
	for name, want := range map[string]bool{"claude": false, "gemini": false, "codex": true, "command": true, "aider": true} {
		if got := WatchesReconnects(name); got != want {
			t.Errorf("WatchesReconnects(%q) = %v, want %v", name, got, want)
		}
	}
	for _, tc := range []struct {
		name, command string
		want          *RootRefusal
	}{
		{"claude", "", Claude.RootRefusal},
		{"codex", "", nil},
		{"command", "", nil},
		{"aider", "", nil},
		// The user's command line is what runs, whatever the preset.
		{"claude", "my-agent --fast", nil},
		{"codex", "claude -p --dangerously-skip-permissions", Claude.RootRefusal},
	} {
		if got := RootRefusalFor(tc.name, tc.command); got != tc.want {
			t.Errorf("RootRefusalFor(%q, %q) = %v, want %v", tc.name, tc.command, got, tc.want)
		}
	}
	if r := Claude.RootRefusal; r.Flag != "--dangerously-skip-permissions" || r.SandboxEnv != "IS_SANDBOX" {
		t.Errorf("Claude's root refusal = %+v", r)
	}
	for _, tc := range []struct {
		a     *Agent
		model string
		want  string
	}{
		{Codex, "Claude-Sonnet-4-5", "a Claude model"},
		{Gemini, "claude-opus", "a Claude model"},
		{Codex, "gpt-5", ""},
	} {
		if got := tc.a.CannotRun(tc.model); got != tc.want {
			t.Errorf("%s.CannotRun(%q) = %q, want %q", tc.a.Name, tc.model, got, tc.want)
		}
	}
	if Claude.CannotRun != nil || Command.CannotRun != nil {
		t.Error("claude or command refuses a model")
	}
}

// The project files to gate, in the order trust lists them: the files
// every run obeys, agent by agent, then Codex's, which Codex ignores until
// the project is trusted in Codex.
func TestProjectFiles(t *testing.T) {
	var got []string
	for _, f := range ProjectFiles() {
		p := f.Agent + ":" + f.Path
		if f.Dir {
			p += "/"
		}
		got = append(got, p)
	}
	want := []string{
		"claude:.claude/settings.json", "claude:.claude/settings.local.json", "claude:.mcp.json",
		"claude:.claude/agents/", "claude:.claude/commands/", "claude:.claude/skills/",
		"gemini:.gemini/settings.json", "gemini:.gemini/.env", "gemini:.env",
		"gemini:.gemini/commands/", "gemini:.gemini/skills/", "gemini:.gemini/agents/",
		"codex:.codex/config.toml",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ProjectFiles() =\n%v\nwant\n%v", got, want)
	}
}

// StepUsage reads the session files of the CLI whose output it was,
// where the agent's environment says they are, and keeps the output's
// usage when there are none.
func TestStepUsage(t *testing.T) {
	billed := transcript.Usage{InputTokens: 1200, OutputTokens: 82, CacheReadTokens: 500, ReasoningTokens: 12}
	printed := transcript.Usage{InputTokens: 1, OutputTokens: 2}
	home := t.TempDir()
	install(t, "codex-0.169.0-killed-in-tool.session.jsonl", filepath.Join(home, ".codex", "sessions", "2026", "11", "24", "rollout-2026-11-24T19-56-25-t1.jsonl"))
	install(t, "gemini-0.61.0-killed-in-tool.session.jsonl", filepath.Join(home, ".gemini", "tmp", "p", "chats", "session-2026-11-24T19-56-x.jsonl"))
	codexHome := t.TempDir()
	install(t, "codex-0.169.0-overloaded-after-tool.session.jsonl", filepath.Join(codexHome, "sessions", "2026", "11", "24", "rollout-2026-11-24T19-56-25-t1.jsonl"))
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	cost := 0.5
	withCost := printed
	withCost.ReportedCostUSD = &cost
	const geminiSession = "2e8b21fc-1de5-49d0-92bb-9174672756e2"
	for _, tc := range []struct {
		name string
		res  transcript.Result
		env  map[string]string
		want transcript.Usage
		// found: usage was found, in the output or the session files;
		// none of these outputs reported any (UsageFound is false), so
		// only the session files can say so.
		found bool
	}{
		{"codex under HOME", transcript.Result{Format: transcript.FormatCodex, Usage: printed, CodexThreads: []string{"t1"}}, map[string]string{"HOME": home}, billed, true},
		{"codex under CODEX_HOME, its cost kept", transcript.Result{Format: transcript.FormatCodex, Usage: withCost, CodexThreads: []string{"t1"}}, map[string]string{"HOME": home, "CODEX_HOME": codexHome}, func() transcript.Usage { u := billed; u.ReportedCostUSD = &cost; return u }(), true},
		{"codex without threads", transcript.Result{Format: transcript.FormatCodex, Usage: printed}, map[string]string{"HOME": home}, printed, false},
		{"codex without a home", transcript.Result{Format: transcript.FormatCodex, Usage: printed, CodexThreads: []string{"t1"}}, nil, printed, false},
		{"codex, another thread", transcript.Result{Format: transcript.FormatCodex, Usage: printed, CodexThreads: []string{"t2"}}, map[string]string{"HOME": home}, printed, false},
		{"gemini killed", transcript.Result{Format: transcript.FormatGemini, Usage: printed, SessionID: geminiSession}, map[string]string{"HOME": home}, billed, true},
		{"gemini with its result", transcript.Result{Format: transcript.FormatGemini, Usage: printed, SessionID: geminiSession, ResultSeen: true}, map[string]string{"HOME": home}, printed, false},
		{"claude", transcript.Result{Format: transcript.FormatClaude, Usage: printed, SessionID: geminiSession}, map[string]string{"HOME": home}, printed, false},
		{"claude, usage found in its output", transcript.Result{Format: transcript.FormatClaude, Usage: printed, UsageFound: true}, map[string]string{"HOME": home}, printed, true},
		{"plain text", transcript.Result{Format: transcript.FormatText, Usage: printed}, map[string]string{"HOME": home}, printed, false},
	} {
		got, found, err := StepUsage(tc.res, env(tc.env), time.Time{})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if found != tc.found {
			t.Errorf("%s: found = %v, want %v", tc.name, found, tc.found)
		}
		if fmtUsage(got) != fmtUsage(tc.want) {
			t.Errorf("%s: StepUsage = %s, want %s", tc.name, fmtUsage(got), fmtUsage(tc.want))
		}
	}

	// An unreadable session file is reported; the output's usage stands.
	bad := t.TempDir()
	dir := filepath.Join(bad, ".codex", "sessions", "2026", "11", "24", "rollout-x-t1.jsonl")
	if err := os.MkdirAll(dir, 0o755); err != nil { // a directory where the file should be
		t.Fatal(err)
	}
	got, _, err := StepUsage(transcript.Result{Format: transcript.FormatCodex, Usage: printed, CodexThreads: []string{"t1"}}, env(map[string]string{"HOME": bad}), time.Time{})
	if err == nil || got != printed {
		t.Errorf("unreadable session file: %s, %v; want the printed usage and an error", fmtUsage(got), err)
	}
}
