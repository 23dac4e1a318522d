package transcript

import (
	"path/filepath"
	"testing"
	"time"
)

// TestRealCLIFixtures reads the transcripts captured from the real CLIs
// against the fake model API (testdata/README.md) and checks that the
// usage read from them is what the fake billed, to the token.
func TestRealCLIFixtures(t *testing.T) {
	// What the fake billed in each scenario (e2e/capture_test.go).
	var (
		happy   = Usage{InputTokens: 2550, OutputTokens: 122, CacheReadTokens: 1300, CacheWriteTokens: 300}
		first   = Usage{InputTokens: 1200, OutputTokens: 82, CacheReadTokens: 500, CacheWriteTokens: 300}
		noWrite = func(u Usage) Usage { u.CacheWriteTokens = 0; return u }
		reason  = func(u Usage, r int64) Usage { u.ReasoningTokens = r; return u }
		reset   = time.Date(2031, 3, 4, 5, 6, 0, 0, time.UTC)
	)
	tests := []struct {
		file      string
		usage     Usage
		cost      bool // the agent reported a cost
		final     string
		isError   bool
		apiError  bool
		limit     bool
		resetsAt  time.Time
		errorText string
		killed    bool // no result line: the CLI was killed mid-turn
	}{
		{file: "claude-2.1.328-tool-promise.jsonl", usage: happy, cost: true, final: "The file is written.\n<promise>COMPLETE</promise>"},
		{file: "claude-2.1.328-overloaded-after-tool.jsonl", usage: first, cost: true, isError: true, apiError: true,
			errorText: "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:43303)."},
		{file: "claude-2.1.328-server-error.jsonl", cost: true, isError: true, apiError: true},
		{file: "claude-2.1.328-rate-limit-429.jsonl", cost: true, isError: true, apiError: true, errorText: "API Error: Request rejected (429) · Rate limited"},
		{file: "claude-2.1.328-usage-limit.jsonl", cost: true, isError: true, limit: true, resetsAt: time.Unix(1930367160, 0)},
		// The message_delta partial-message event has the billed output (82);
		// the assistant lines only message_start's placeholder (1).
		{file: "claude-2.1.328-killed-in-tool.jsonl", usage: first, killed: true, final: "Running the slow step."},
		{file: "claude-2.1.328-cut-stream.jsonl", usage: first, cost: true, isError: true, apiError: true},
		// A response ended properly but early (a proxy): Claude Code
		// retries without streaming and reports the API's trouble.
		{file: "claude-2.1.328-cut-end.jsonl", cost: true, isError: true, apiError: true},
		{file: "claude-2.1.328-cut-mid-event.jsonl", cost: true, isError: true, apiError: true},

		{file: "codex-0.169.0-tool-promise.jsonl", usage: reason(noWrite(happy), 12), final: "The file is written.\n<promise>COMPLETE</promise>"},
		// turn.failed carries no usage: the session file has it (see
		// TestCodexSessionUsage in internal/agent).
		{file: "codex-0.169.0-overloaded-after-tool.jsonl", isError: true, apiError: true, final: "Let me create the file."},
		{file: "codex-0.169.0-server-error.jsonl", isError: true, apiError: true},
		{file: "codex-0.169.0-rate-limit-429.jsonl", isError: true, apiError: true, errorText: "exceeded retry limit, last status: 429 Too Many Requests"},
		{file: "codex-0.169.0-usage-limit.jsonl", isError: true, limit: true, resetsAt: reset.Add(time.Minute)},
		// Killed mid-turn, Codex printed no usage at all: the session file
		// has it.
		{file: "codex-0.169.0-killed-in-tool.jsonl", killed: true, final: "Running the slow step."},
		{file: "codex-0.169.0-cut-stream.jsonl", isError: true, apiError: true, final: "Let me create the file."},
		{file: "codex-0.169.0-cut-end.jsonl", isError: true, apiError: true,
			errorText: "stream disconnected before completion: stream closed before response.completed"},
		{file: "codex-0.169.0-cut-mid-event.jsonl", isError: true, apiError: true,
			errorText: "stream disconnected before completion: stream closed before response.completed"},

		{file: "gemini-0.61.0-tool-promise.jsonl", usage: reason(noWrite(happy), 12), final: "The file is written.\n<promise>COMPLETE</promise>"},
		{file: "gemini-0.61.0-overloaded-after-tool.jsonl", usage: reason(noWrite(first), 12), isError: true, apiError: true, final: "Let me create the file."},
		{file: "gemini-0.61.0-server-error.jsonl", isError: true, apiError: true},
		{file: "gemini-0.61.0-rate-limit-429.jsonl", isError: true, apiError: true},
		{file: "gemini-0.61.0-usage-limit.jsonl", isError: true, limit: true},
		// The text streamed before the cut is the agent's last word.
		{file: "gemini-0.61.0-killed-in-tool.jsonl", killed: true, final: "Running the slow step."},
		{file: "gemini-0.61.0-cut-stream.jsonl", usage: reason(noWrite(first), 12), isError: true, apiError: true, final: "I will now"},
		// A response ended properly but early: its result line gives no
		// reason, the error line before it does.
		{file: "gemini-0.61.0-cut-end.jsonl", isError: true, apiError: true, errorText: "Model stream ended without a finish reason."},
		{file: "gemini-0.61.0-cut-mid-event.jsonl", isError: true, apiError: true, errorText: "[API Error: Incomplete JSON segment at the end]"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseFile(filepath.Join("testdata", tt.file), withFixedNow())
			if err != nil {
				t.Fatal(err)
			}
			u := got.Usage
			if (u.ReportedCostUSD != nil) != tt.cost {
				t.Errorf("reported cost %v, want one: %v", u.ReportedCostUSD, tt.cost)
			}
			u.ReportedCostUSD = nil
			// Claude Code's result line restates thinking tokens only when
			// the API reported them apart; the fake reports them inside
			// output_tokens.
			if u != tt.usage {
				t.Errorf("Usage = %s, want %s", fmtUsage(u), fmtUsage(tt.usage))
			}
			if got.ResultSeen == tt.killed {
				t.Errorf("ResultSeen = %v for a killed CLI: %v", got.ResultSeen, tt.killed)
			}
			if got.IsError != tt.isError || got.APIError != tt.apiError {
				t.Errorf("IsError, APIError = %v, %v; want %v, %v (error %q)", got.IsError, got.APIError, tt.isError, tt.apiError, got.ErrorText)
			}
			if tt.errorText != "" && got.ErrorText != tt.errorText {
				t.Errorf("ErrorText = %q, want %q", got.ErrorText, tt.errorText)
			}
			if tt.isError && got.ErrorText == "" {
				t.Errorf("an error without the agent's words")
			}
			if (got.RateLimit != nil) != tt.limit {
				t.Fatalf("RateLimit = %+v, want one: %v", got.RateLimit, tt.limit)
			}
			if tt.limit && !tt.resetsAt.IsZero() && !got.RateLimit.ResetsAt.Equal(tt.resetsAt) {
				t.Errorf("ResetsAt = %v, want %v", got.RateLimit.ResetsAt, tt.resetsAt)
			}
			if tt.final != "" && got.FinalMessage != tt.final {
				t.Errorf("FinalMessage = %q, want %q", got.FinalMessage, tt.final)
			}
		})
	}
}

// TestAPITrouble separates the model API's trouble from the agent's own
// errors and from usage limits.
func TestAPITrouble(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  bool
	}{
		{"codex still reconnecting when killed", []string{
			`{"type":"thread.started","thread_id":"t"}`,
			`{"type":"error","message":"Reconnecting... 3/50 (stream disconnected before completion: error sending request)"}`,
		}, true},
		{"codex reconnected and went on working", []string{
			`{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion)"}`,
			`{"type":"item.started","item":{"id":"i","type":"command_execution","command":"ls"}}`,
		}, false},
		{"codex refusing an untrusted directory", []string{
			`{"type":"turn.failed","error":{"message":"Not inside a trusted directory and --skip-git-repo-check was not specified."}}`,
		}, false},
		{"claude 401 is not the API being unavailable", []string{
			`{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"terminal_reason":"api_error","result":"API Error: 401 invalid x-api-key"}`,
		}, false},
		{"claude connection lost", []string{
			`{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"terminal_reason":"api_error","result":"API Error: Connection to the API was lost (ECONNRESET)."}`,
		}, true},
		{"a successful turn after trouble", []string{
			`{"type":"error","message":"unexpected status 503 Service Unavailable"}`,
			`{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}`,
		}, false},
		{"gemini usage limit is a limit, not trouble", []string{
			`{"type":"init","session_id":"s","model":"gemini-2.5-flash"}`,
			`{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: You exceeded your current quota. Please retry in 20.5s.]"},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0}}`,
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseString(joinLines(tt.lines))
			if got.APIError != tt.want {
				t.Errorf("APIError = %v, want %v (error %q, limit %+v)", got.APIError, tt.want, got.ErrorText, got.RateLimit)
			}
		})
	}
	// Gemini's retry delay becomes the reset, rounded up.
	got := parseString(joinLines(tests[len(tests)-1].lines))
	if got.RateLimit == nil || !got.RateLimit.ResetsAt.Equal(fixedNow.Add(21*time.Second)) {
		t.Errorf("RateLimit = %+v, want a reset 21s after %v", got.RateLimit, fixedNow)
	}
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}
