package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/transcript"
)

// install copies a captured session file to where the CLI keeps it.
func install(t *testing.T, fixture, dst string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "sessions", fixture))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCodexSessionUsage reads the per-request usage of the captured Codex
// session files: what the fake API billed for a turn that failed (529) or
// was killed, which `codex exec --json` never printed.
func TestCodexSessionUsage(t *testing.T) {
	billed := transcript.Usage{InputTokens: 1200, OutputTokens: 82, CacheReadTokens: 500, ReasoningTokens: 12}
	tests := []struct {
		fixture, thread string
		since           time.Time
		want            transcript.Usage
		ok              bool
	}{
		{"codex-0.169.0-overloaded-after-tool.session.jsonl", "t1", time.Time{}, billed, true},
		{"codex-0.169.0-killed-in-tool.session.jsonl", "t1", time.Time{}, billed, true},
		// A resumed thread's requests of an earlier step are not counted
		// again: only records from the step's start on.
		{"codex-0.169.0-killed-in-tool.session.jsonl", "t1", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), transcript.Usage{}, true},
		// Another thread's file is not read.
		{"codex-0.169.0-killed-in-tool.session.jsonl", "t2", time.Time{}, transcript.Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			home := t.TempDir()
			install(t, tt.fixture, filepath.Join(home, "sessions", "2026", "11", "24", "rollout-2026-11-24T19-56-25-t1.jsonl"))
			got, ok, err := CodexSessionUsage(home, []string{tt.thread}, tt.since)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.ok || got != tt.want {
				t.Errorf("CodexSessionUsage = %s, %v; want %s, %v", fmtUsage(got), ok, fmtUsage(tt.want), tt.ok)
			}
		})
	}
	if _, ok, _ := CodexSessionUsage(t.TempDir(), []string{"../../etc"}, time.Time{}); ok {
		t.Error("a thread id that is a path was read")
	}
}

// TestGeminiSessionUsage reads the captured Gemini session files: a killed
// CLI printed no result line, its session file has the tokens.
func TestGeminiSessionUsage(t *testing.T) {
	billed := transcript.Usage{InputTokens: 1200, OutputTokens: 82, CacheReadTokens: 500, ReasoningTokens: 12}
	tests := []struct {
		fixture, session string
		want             transcript.Usage
		ok               bool
	}{
		{"gemini-0.61.0-killed-in-tool.session.jsonl", "2e8b21fc-1de5-49d0-92bb-9174672756e2", billed, true},
		// The response recorded twice (before and after its tool call) counts once.
		{"gemini-0.61.0-overloaded-after-tool.session.jsonl", "48e73a3a-2eeb-40e7-b5b2-a0d57f7c983d", billed, true},
		{"gemini-0.61.0-killed-in-tool.session.jsonl", "another-session", transcript.Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			dir := t.TempDir()
			install(t, tt.fixture, filepath.Join(dir, "tmp", "project", "chats", "session-2026-11-24T19-56-x.jsonl"))
			got, ok, err := GeminiSessionUsage(dir, tt.session, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.ok || got != tt.want {
				t.Errorf("GeminiSessionUsage = %s, %v; want %s, %v", fmtUsage(got), ok, fmtUsage(tt.want), tt.ok)
			}
		})
	}
}

func fmtUsage(u transcript.Usage) string {
	c := "nil"
	if u.ReportedCostUSD != nil {
		c = fmt.Sprint(*u.ReportedCostUSD)
	}
	return fmt.Sprintf("{in %d out %d cacheRead %d cacheWrite %d reasoning %d cost %s}", u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens, c)
}
