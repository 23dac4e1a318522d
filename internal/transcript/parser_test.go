package transcript

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fixedNow is the clock every fixture is parsed with, so human reset texts
// resolve the same way on every machine.
var fixedNow = time.Date(2025, time.November, 12, 11, 47, 4, 0, time.UTC)

func withFixedNow() Option { return WithNow(func() time.Time { return fixedNow }) }

func cost(v float64) *float64 { return &v }

// add sums at run time, as the parser does, rather than in exact constant
// arithmetic.
func add(a, b float64) float64 { return a + b }

const promise = "<promise>COMPLETE</promise>"

func TestParseFileFixtures(t *testing.T) {
	tests := []struct {
		name        string
		file        string
		want        Result
		wantPromise bool
	}{
		{
			name: "claude run with tool use and a success result",
			file: "claude_tool_use_success.jsonl",
			want: Result{
				Format:       FormatClaude,
				Usage:        Usage{InputTokens: 18, OutputTokens: 424, CacheReadTokens: 17254, CacheWriteTokens: 25067, ReportedCostUSD: cost(0.24722425)},
				UsageFound:   true,
				Model:        "claude-opus-4-5-20251101",
				FinalMessage: "Here are the files in the current directory.",
				ResultSeen:   true,
				SessionID:    "40e7b02d-c0f9-4876-9010-f514d4eb0603",
			},
		},
		{
			name: "claude result usage replaces the placeholder assistant output count",
			file: "claude_basic.jsonl",
			want: Result{
				Format:       FormatClaude,
				Usage:        Usage{InputTokens: 10, OutputTokens: 25, CacheWriteTokens: 21570, ReportedCostUSD: cost(0.1354875)},
				UsageFound:   true,
				Model:        "claude-opus-4-5-20251101",
				FinalMessage: "4",
				ResultSeen:   true,
				SessionID:    "1d1e46f9-35c7-4834-b529-846d5bb82288",
			},
		},
		{
			name: "claude parallel tool calls counted once per message id",
			file: "claude_parallel_tools.jsonl",
			want: Result{
				Format:       FormatClaude,
				Usage:        Usage{InputTokens: 12, OutputTokens: 412, CacheReadTokens: 15178, CacheWriteTokens: 16378, ReportedCostUSD: cost(0.0721869)},
				UsageFound:   true,
				Model:        "claude-sonnet-4-5-20250929",
				FinalMessage: "Both files set `port`; only dev enables `debug`.",
				ResultSeen:   true,
				SessionID:    "6f0b1c2e-8d4a-4c55-9a3e-1b2c3d4e5f60",
			},
		},
		{
			name: "claude run killed while writing its result line",
			file: "claude_killed.jsonl",
			want: Result{
				Format:     FormatClaude,
				Usage:      Usage{InputTokens: 10, OutputTokens: 4, CacheReadTokens: 17254, CacheWriteTokens: 3556},
				UsageFound: true,
				Model:      "claude-opus-4-5-20251101",
				SessionID:  "40e7b02d-c0f9-4876-9010-f514d4eb0603",
			},
		},
		{
			name: "claude error_during_execution result keeps its usage and cost",
			file: "claude_error_during_execution.jsonl",
			want: Result{
				Format:     FormatClaude,
				Usage:      Usage{InputTokens: 112, OutputTokens: 6814, CacheReadTokens: 1120129, CacheWriteTokens: 58211, ReportedCostUSD: cost(0.6571631500000001)},
				UsageFound: true,
				Model:      "claude-sonnet-4-20250514",
				ResultSeen: true,
				IsError:    true,
				ErrorText:  "error_during_execution",
				SessionID:  "xxxxxxxxx",
			},
		},
		{
			name: "claude rate_limit_event rejected then the limit result",
			file: "claude_rate_limit_rejected.jsonl",
			want: Result{
				Format:       FormatClaude,
				Usage:        Usage{ReportedCostUSD: cost(0)},
				UsageFound:   true,
				Model:        "claude-opus-4-6",
				FinalMessage: "You've hit your limit · resets 2pm (Asia/Shanghai)",
				ResultSeen:   true,
				IsError:      true,
				ErrorText:    "You've hit your limit · resets 2pm (Asia/Shanghai)",
				RateLimit: &RateLimit{
					ResetsAt: time.Unix(1778565600, 0),
					Kind:     "five_hour",
					Message:  "You've hit your limit · resets 2pm (Asia/Shanghai)",
				},
				SessionID: "3c9f2e71-5b8a-4d0e-a6c4-8f1e2d3b4a59",
			},
		},
		{
			name: "claude allowed and allowed_warning rate limit events are not a limit",
			file: "claude_rate_limit_allowed.jsonl",
			want: Result{
				Format:       FormatClaude,
				Usage:        Usage{InputTokens: 10, OutputTokens: 25, CacheWriteTokens: 21570, ReportedCostUSD: cost(0.1354875)},
				UsageFound:   true,
				Model:        "claude-opus-4-5-20251101",
				FinalMessage: "4",
				ResultSeen:   true,
				SessionID:    "1d1e46f9-35c7-4834-b529-846d5bb82288",
			},
		},
		{
			name: "claude legacy usage limit result with a unix reset",
			file: "claude_usage_limit_legacy.jsonl",
			want: Result{
				Format:       FormatClaude,
				Usage:        Usage{ReportedCostUSD: cost(0)},
				UsageFound:   true,
				FinalMessage: "Claude AI usage limit reached|1755806400",
				ResultSeen:   true,
				IsError:      true,
				ErrorText:    "Claude AI usage limit reached|1755806400",
				RateLimit: &RateLimit{
					ResetsAt: time.Unix(1755806400, 0),
					Message:  "Claude AI usage limit reached|1755806400",
				},
				SessionID: "71b47827-9527-47f3-8614-34249f877747",
			},
		},
		{
			name: "claude result ending with the promise",
			file: "claude_promise.jsonl",
			want: Result{
				Format:       FormatClaude,
				Usage:        Usage{InputTokens: 10, OutputTokens: 25, CacheWriteTokens: 21570, ReportedCostUSD: cost(0.1354875)},
				UsageFound:   true,
				Model:        "claude-opus-4-5-20251101",
				FinalMessage: "All 42 tests pass and the README is updated.\n\n" + promise,
				ResultSeen:   true,
				SessionID:    "1d1e46f9-35c7-4834-b529-846d5bb82288",
			},
			wantPromise: true,
		},
		{
			name: "codex exec turn.completed usage excludes cached input",
			file: "codex_exec.jsonl",
			want: Result{
				Format:       FormatCodex,
				Usage:        Usage{InputTokens: 70021 - 57088, OutputTokens: 2374, CacheReadTokens: 57088},
				UsageFound:   true,
				FinalMessage: "The binary only prints a greeting; nothing else to change.\n\n" + promise,
				ResultSeen:   true,
				SessionID:    "01a0249b-250c-7e13-a32d-82b9746dd022",
				CodexThreads: []string{"01a0249b-250c-7e13-a32d-82b9746dd022"},
			},
			wantPromise: true,
		},
		{
			name: "codex exec with cache_write_input_tokens",
			file: "codex_canary.jsonl",
			want: Result{
				Format:       FormatCodex,
				Usage:        Usage{InputTokens: 14996 - 11008, OutputTokens: 6, CacheReadTokens: 11008},
				UsageFound:   true,
				FinalMessage: "canary",
				ResultSeen:   true,
			},
		},
		{
			name: "codex usage limit error and turn.failed",
			file: "codex_usage_limit.jsonl",
			want: Result{
				Format:     FormatCodex,
				ResultSeen: true,
				IsError:    true,
				ErrorText:  "You've hit your usage limit. To get more access now, send a request to your admin or try again at 12:16 PM.",
				RateLimit: &RateLimit{
					// "try again at 12:16 PM": to the end of that minute.
					ResetsAt: time.Date(2025, time.November, 12, 12, 17, 0, 0, time.UTC),
					Message:  "You've hit your usage limit. To get more access now, send a request to your admin or try again at 12:16 PM.",
				},
				SessionID:    "019a77e4-0716-7152-8396-b642e26c3e20",
				CodexThreads: []string{"019a77e4-0716-7152-8396-b642e26c3e20"},
			},
		},
		{
			name: "codex legacy envelope with flat token_count",
			file: "codex_legacy.jsonl",
			want: Result{
				Format:       FormatCodex,
				Usage:        Usage{InputTokens: 1674 - 1627, OutputTokens: 384, CacheReadTokens: 1627, ReasoningTokens: 384},
				UsageFound:   true,
				FinalMessage: "I can see the directory structure of your project. This appears to be a Rust project with a frontend/backend architecture, using pnpm for package management. The project includes various configuration files, documentation, and development assets.",
				ResultSeen:   true,
			},
		},
		{
			name: "codex legacy session_configured reports model and session",
			file: "codex_legacy_session.jsonl",
			want: Result{
				Format:       FormatCodex,
				Usage:        Usage{InputTokens: 3804, OutputTokens: 95, ReasoningTokens: 64},
				UsageFound:   true,
				Model:        "codex-mini-latest",
				FinalMessage: "Hi there! I’m ChatGPT, powered by OpenAI’s GPT‑4 architecture. How can I help you today?",
				ResultSeen:   true,
				SessionID:    "f47e4fde-f03b-498c-9abb-be8247bbd7a9",
			},
		},
		{
			name: "codex legacy cumulative token_count totals are not summed",
			file: "codex_legacy_info.jsonl",
			want: Result{
				Format:       FormatCodex,
				Usage:        Usage{InputTokens: 26549 - 22272, OutputTokens: 1590, CacheReadTokens: 22272, ReasoningTokens: 1152},
				UsageFound:   true,
				FinalMessage: "Added the missing test and the suite passes.",
				ResultSeen:   true,
			},
		},
		{
			name: "generic usage lines add up",
			file: "generic_usage.txt",
			want: Result{
				Format:       FormatGeneric,
				Usage:        Usage{InputTokens: 2000, OutputTokens: 440, CacheReadTokens: 5000, CacheWriteTokens: 2100, ReportedCostUSD: cost(add(0.0142, 0.0061))},
				UsageFound:   true,
				FinalMessage: "aider v0.86.1 - main model: gpt-4o\nApplied edit to src/cart.py\nRunning pytest... 12 passed\nCart totals now round half-up; all tests pass.\n" + promise + "\n",
			},
			wantPromise: true,
		},
		{
			name: "plain text with the promise on the last line",
			file: "plain_text_promise.txt",
			want: Result{
				Format:       FormatText,
				FinalMessage: "Reading TODO.md\n- [x] parse the config file\n- [x] add the --dry-run flag\n\nAll items are checked and `go test ./...` passes.\n\n  " + promise + "  \n",
			},
			wantPromise: true,
		},
		{
			name: "plain text mentioning the promise in prose",
			file: "plain_text_prose_promise.txt",
			want: Result{
				Format:       FormatText,
				FinalMessage: "Reading TODO.md\r\nI will print " + promise + " once every item is checked.\r\nTwo items are still open:\r\n- [ ] add the --dry-run flag\r\n- [ ] document it\r\n",
			},
		},
		{
			name: "plain text usage limit notice",
			file: "plain_text_usage_limit.txt",
			want: Result{
				Format:       FormatText,
				FinalMessage: "Claude AI usage limit reached|1755615600\n",
				RateLimit: &RateLimit{
					ResetsAt: time.Unix(1755615600, 0),
					Message:  "Claude AI usage limit reached|1755615600",
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFile(filepath.Join("testdata", tt.file), withFixedNow())
			if err != nil {
				t.Fatal(err)
			}
			assertResult(t, got, tt.want)
			if p := HasPromise(got.FinalMessage, promise); p != tt.wantPromise {
				t.Errorf("HasPromise = %v, want %v", p, tt.wantPromise)
			}
		})
	}
}

func TestParseFileMissing(t *testing.T) {
	_, err := ParseFile(filepath.Join(t.TempDir(), "nope.log"))
	if !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("err = %v, want a not-exist error", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

// TestParseFileResolvesResetsAgainstModTime checks that, without WithNow, a
// human reset time is read relative to when the log was last written.
func TestParseFileResolvesResetsAgainstModTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.log")
	line := `{"type":"result","subtype":"success","is_error":true,"result":"You've hit your limit · resets 3pm (UTC)"}` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	written := time.Date(2026, time.March, 2, 13, 10, 0, 0, time.UTC)
	if err := os.Chtimes(path, written, written); err != nil {
		t.Fatal(err)
	}
	got, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// "3pm" is given to the minute: the wait lasts to the end of it.
	want := time.Date(2026, time.March, 2, 15, 1, 0, 0, time.UTC)
	if got.RateLimit == nil || !got.RateLimit.ResetsAt.Equal(want) {
		t.Fatalf("RateLimit = %+v, want reset at %v", got.RateLimit, want)
	}
}

// TestParallelToolCallsBeforeResult checks the de-duplicated assistant sum
// that stands in for the result while the step still runs.
func TestParallelToolCallsBeforeResult(t *testing.T) {
	data := readFixture(t, "claude_parallel_tools.jsonl")
	lines := bytes.SplitAfter(data, []byte("\n"))
	p := NewParser(withFixedNow())
	for _, l := range lines[:len(lines)-2] { // everything but the result line
		p.Write(l)
	}
	got := p.Result()
	want := Usage{InputTokens: 4 + 8, OutputTokens: 1 + 180, CacheReadTokens: 15178, CacheWriteTokens: 15178 + 1200}
	if !reflect.DeepEqual(got.Usage, want) {
		t.Fatalf("Usage = %+v, want %+v (three lines of one message counted once)", got.Usage, want)
	}
	if got.ResultSeen {
		t.Error("ResultSeen = true before the result line")
	}
}

func TestClaudeAccounting(t *testing.T) {
	const (
		init1  = `{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-4-5"}`
		a1     = `{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"one"}],"usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":100,"cache_creation_input_tokens":5}},"session_id":"s1"}`
		a1full = `{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}],"usage":{"input_tokens":10,"output_tokens":40,"cache_read_input_tokens":100,"cache_creation_input_tokens":5}},"session_id":"s1"}`
		r1     = `{"type":"result","subtype":"success","is_error":false,"result":"first","session_id":"s1","total_cost_usd":0.5,"usage":{"input_tokens":11,"output_tokens":50,"cache_read_input_tokens":100,"cache_creation_input_tokens":5}}`
		r1b    = `{"type":"result","subtype":"success","is_error":false,"result":"first again","session_id":"s1","total_cost_usd":0.75,"usage":{"input_tokens":20,"output_tokens":80,"cache_read_input_tokens":300,"cache_creation_input_tokens":5}}`
		a2     = `{"type":"assistant","message":{"id":"m2","model":"claude-sonnet-4-5","content":[{"type":"text","text":"second"}],"usage":{"input_tokens":7,"output_tokens":3}},"session_id":"s2"}`
		r2     = `{"type":"result","subtype":"success","is_error":false,"result":"second done","session_id":"s2","total_cost_usd":0.25,"usage":{"input_tokens":8,"output_tokens":9}}`
		r2none = `{"type":"result","subtype":"success","is_error":false,"result":"second done","session_id":"s2"}`
		sub    = `{"type":"assistant","message":{"id":"m3","model":"claude-haiku-4-5","content":[{"type":"text","text":"sub-agent words"}],"usage":{"input_tokens":2,"output_tokens":2}},"parent_tool_use_id":"toolu_1","session_id":"s1"}`
		synth  = `{"type":"assistant","message":{"id":"x","model":"<synthetic>","content":[{"type":"text","text":"API Error: 500"}],"usage":{"input_tokens":0,"output_tokens":0}},"session_id":"s1"}`
	)
	tests := []struct {
		name      string
		lines     []string
		wantUsage Usage
		wantFinal string
		wantModel string
	}{
		{
			name:      "streamed copy with a partial count keeps the largest",
			lines:     []string{init1, a1, a1full},
			wantUsage: Usage{InputTokens: 10, OutputTokens: 40, CacheReadTokens: 100, CacheWriteTokens: 5},
			wantFinal: "one",
			wantModel: "claude-sonnet-4-5",
		},
		{
			name:      "a repeated id after its result is already covered",
			lines:     []string{a1, r1, a1full},
			wantUsage: Usage{InputTokens: 11, OutputTokens: 50, CacheReadTokens: 100, CacheWriteTokens: 5, ReportedCostUSD: cost(0.5)},
			wantFinal: "first",
			wantModel: "claude-sonnet-4-5",
		},
		{
			name:      "results of two sessions add up",
			lines:     []string{a1, r1, a2, r2},
			wantUsage: Usage{InputTokens: 19, OutputTokens: 59, CacheReadTokens: 100, CacheWriteTokens: 5, ReportedCostUSD: cost(0.75)},
			wantFinal: "second done",
			wantModel: "claude-sonnet-4-5",
		},
		{
			name:      "a later result of the same session restates its total",
			lines:     []string{a1, r1, r1b},
			wantUsage: Usage{InputTokens: 20, OutputTokens: 80, CacheReadTokens: 300, CacheWriteTokens: 5, ReportedCostUSD: cost(0.75)},
			wantFinal: "first again",
			wantModel: "claude-sonnet-4-5",
		},
		{
			name:      "a result without usage keeps the assistant sum",
			lines:     []string{a2, r2none},
			wantUsage: Usage{InputTokens: 7, OutputTokens: 3},
			wantFinal: "second done",
			wantModel: "claude-sonnet-4-5",
		},
		{
			name:      "assistant usage after the last result is added without cost",
			lines:     []string{a1, r1, a2},
			wantUsage: Usage{InputTokens: 18, OutputTokens: 53, CacheReadTokens: 100, CacheWriteTokens: 5, ReportedCostUSD: cost(0.5)},
			wantFinal: "second",
			wantModel: "claude-sonnet-4-5",
		},
		{
			name:      "sub-agent text is not the final message but its usage counts",
			lines:     []string{a1, sub},
			wantUsage: Usage{InputTokens: 12, OutputTokens: 3, CacheReadTokens: 100, CacheWriteTokens: 5},
			wantFinal: "one",
			wantModel: "claude-sonnet-4-5",
		},
		{
			name:      "synthetic messages name no model",
			lines:     []string{synth},
			wantFinal: "API Error: 500",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseString(strings.Join(tt.lines, "\n") + "\n")
			if !usageEqual(got.Usage, tt.wantUsage) {
				t.Errorf("Usage = %s, want %s", fmtUsage(got.Usage), fmtUsage(tt.wantUsage))
			}
			if got.FinalMessage != tt.wantFinal {
				t.Errorf("FinalMessage = %q, want %q", got.FinalMessage, tt.wantFinal)
			}
			if got.Model != tt.wantModel {
				t.Errorf("Model = %q, want %q", got.Model, tt.wantModel)
			}
		})
	}
}

func TestCodexAccounting(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  Usage
	}{
		{
			name: "cache writes are subtracted from input too",
			lines: []string{
				`{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"cache_write_input_tokens":30,"output_tokens":10,"reasoning_output_tokens":5}}`,
			},
			want: Usage{InputTokens: 30, OutputTokens: 10, CacheReadTokens: 40, CacheWriteTokens: 30, ReasoningTokens: 5},
		},
		{
			name: "turn.completed totals of one thread are not summed",
			lines: []string{
				`{"type":"thread.started","thread_id":"t1"}`,
				`{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":10}}`,
				`{"type":"turn.completed","usage":{"input_tokens":250,"cached_input_tokens":90,"output_tokens":30}}`,
			},
			want: Usage{InputTokens: 160, OutputTokens: 30, CacheReadTokens: 90},
		},
		{
			name: "threads add up",
			lines: []string{
				`{"type":"thread.started","thread_id":"t1"}`,
				`{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":10}}`,
				`{"type":"thread.started","thread_id":"t2"}`,
				`{"type":"turn.completed","usage":{"input_tokens":50,"cached_input_tokens":0,"output_tokens":5}}`,
			},
			want: Usage{InputTokens: 110, OutputTokens: 15, CacheReadTokens: 40},
		},
		{
			name: "more cached than input floors at zero",
			lines: []string{
				`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":40,"output_tokens":1}}`,
			},
			want: Usage{OutputTokens: 1, CacheReadTokens: 40},
		},
		{
			name: "legacy last_token_usage without a total adds up",
			lines: []string{
				`{"id":"0","msg":{"type":"token_count","info":{"last_token_usage":{"input_tokens":100,"cached_input_tokens":60,"output_tokens":7}}}}`,
				`{"id":"0","msg":{"type":"token_count","info":{"last_token_usage":{"input_tokens":120,"cached_input_tokens":100,"output_tokens":3}}}}`,
				`{"id":"0","msg":{"type":"token_count","info":null}}`,
			},
			want: Usage{InputTokens: 60, OutputTokens: 10, CacheReadTokens: 160},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseString(strings.Join(tt.lines, "\n") + "\n")
			if !usageEqual(got.Usage, tt.want) {
				t.Errorf("Usage = %s, want %s", fmtUsage(got.Usage), fmtUsage(tt.want))
			}
			if !got.UsageFound || got.Format != FormatCodex {
				t.Errorf("UsageFound = %v, Format = %q", got.UsageFound, got.Format)
			}
		})
	}
}

func TestDetectionAndErrors(t *testing.T) {
	tests := []struct {
		name       string
		input      string
		wantFormat Format
		wantFinal  string
		wantErr    bool
		wantErrTxt string
		wantLimit  bool
	}{
		{
			name:       "unknown JSON objects are text",
			input:      `{"level":"info","msg":"hello"}` + "\n" + `{"type":"progress","pct":50}` + "\n",
			wantFormat: FormatText,
			wantFinal:  `{"level":"info","msg":"hello"}` + "\n" + `{"type":"progress","pct":50}` + "\n",
		},
		{
			name:       "malformed JSON is text",
			input:      `{"type":"result","result":"x"` + "\n" + `{"type":"usage",}` + "\n",
			wantFormat: FormatText,
			wantFinal:  `{"type":"result","result":"x"` + "\n" + `{"type":"usage",}` + "\n",
		},
		{
			name:       "a field of an unexpected type does not hide the event",
			input:      `{"type":"result","subtype":"success","is_error":"no","result":"done","usage":"n/a","total_cost_usd":"free"}` + "\n",
			wantFormat: FormatClaude,
			wantFinal:  "done",
		},
		{
			name:       "error_max_turns with is_error false is an error",
			input:      `{"type":"result","subtype":"error_max_turns","is_error":false,"num_turns":30,"errors":["Reached maximum number of turns (30)"]}` + "\n",
			wantFormat: FormatClaude,
			wantErr:    true,
			wantErrTxt: "Reached maximum number of turns (30)",
		},
		{
			name:       "a usage limit mentioned by a successful result is not a limit",
			input:      `{"type":"result","subtype":"success","is_error":false,"result":"I added handling for 'Claude AI usage limit reached' messages."}` + "\n",
			wantFormat: FormatClaude,
			wantFinal:  "I added handling for 'Claude AI usage limit reached' messages.",
		},
		{
			// A plain 429 (an API key's rate limit) is the API's trouble,
			// not a usage limit with a reset: see TestAPITrouble.
			name:       "a 429 error result without a rejected limit event is not a usage limit",
			input:      `{"type":"result","subtype":"error_during_execution","is_error":true,"result":"","api_error_status":429,"terminal_reason":"api_error"}` + "\n",
			wantFormat: FormatClaude,
			wantErr:    true,
			wantErrTxt: "error_during_execution",
		},
		{
			name:       "a transient codex error does not fail the turn",
			input:      `{"type":"error","message":"Reconnecting... 1/5"}` + "\n" + `{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"ok"}}` + "\n" + `{"type":"turn.completed","usage":{"input_tokens":5,"cached_input_tokens":0,"output_tokens":1}}` + "\n",
			wantFormat: FormatCodex,
			wantFinal:  "ok",
		},
		{
			name:       "a limit notice quoted in prose is not a limit",
			input:      "The CLI prints 'Claude AI usage limit reached|1755615600' when blocked.\n",
			wantFormat: FormatText,
			wantFinal:  "The CLI prints 'Claude AI usage limit reached|1755615600' when blocked.\n",
		},
		{
			name:       "codex TUI limit notice as the last line",
			input:      "working\n■ You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at 3:28 PM.\n",
			wantFormat: FormatText,
			wantFinal:  "working\n■ You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at 3:28 PM.\n",
			wantLimit:  true,
		},
		{
			name:       "claude types win over generic lines",
			input:      `{"type":"usage","input_tokens":1}` + "\n" + `{"type":"system","subtype":"init","session_id":"s"}` + "\n",
			wantFormat: FormatClaude,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseString(tt.input)
			if got.Format != tt.wantFormat {
				t.Errorf("Format = %q, want %q", got.Format, tt.wantFormat)
			}
			if got.FinalMessage != tt.wantFinal {
				t.Errorf("FinalMessage = %q, want %q", got.FinalMessage, tt.wantFinal)
			}
			if got.IsError != tt.wantErr || got.ErrorText != tt.wantErrTxt {
				t.Errorf("IsError, ErrorText = %v, %q; want %v, %q", got.IsError, got.ErrorText, tt.wantErr, tt.wantErrTxt)
			}
			if (got.RateLimit != nil) != tt.wantLimit {
				t.Errorf("RateLimit = %+v, want present %v", got.RateLimit, tt.wantLimit)
			}
		})
	}
}

func TestRateLimitSequences(t *testing.T) {
	const (
		rejected = `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1790920800,"rateLimitType":"seven_day"}}`
		allowed  = `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1790920800,"rateLimitType":"five_hour"}}`
		synth    = `{"type":"assistant","message":{"id":"e1","model":"<synthetic>","content":[{"type":"text","text":"You've hit your weekly limit · resets Sep 15 at 7pm"}],"usage":{"input_tokens":0,"output_tokens":0}},"error":"rate_limit"}`
		success  = `{"type":"result","subtype":"success","is_error":false,"result":"done","usage":{"input_tokens":1,"output_tokens":1}}`
		failed   = `{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"sess-1","result":"","api_error_status":429}`
	)
	reset := time.Unix(1790920800, 0)
	tests := []struct {
		name  string
		lines []string
		want  *RateLimit
	}{
		{
			name:  "a rejected event alone (killed before any result)",
			lines: []string{rejected},
			want:  &RateLimit{ResetsAt: reset, Kind: "seven_day"},
		},
		{
			name:  "the synthetic message adds the agent's words to the event",
			lines: []string{rejected, synth},
			want:  &RateLimit{ResetsAt: reset, Kind: "seven_day", Message: "You've hit your weekly limit · resets Sep 15 at 7pm"},
		},
		{
			name:  "a synthetic message alone gives the reset from its text",
			lines: []string{synth},
			want:  &RateLimit{ResetsAt: time.Date(2026, time.September, 15, 19, 1, 0, 0, time.UTC), Message: "You've hit your weekly limit · resets Sep 15 at 7pm"},
		},
		{
			name:  "a 429 result keeps the event's reset",
			lines: []string{rejected, failed},
			want:  &RateLimit{ResetsAt: reset, Kind: "seven_day", Message: "error_during_execution"},
		},
		{
			name:  "an allowed event after a rejection lifts it",
			lines: []string{rejected, allowed},
		},
		{
			name:  "a successful result after a rejection lifts it",
			lines: []string{rejected, success},
		},
	}
	now := time.Date(2026, time.September, 10, 9, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewParser(WithNow(func() time.Time { return now }))
			p.Write([]byte(strings.Join(tt.lines, "\n") + "\n"))
			assertRateLimit(t, p.Result().RateLimit, tt.want)
		})
	}
}

// TestChunkedEqualsWhole feeds every fixture whole, one byte at a time and
// in random chunk sizes, asking for snapshots on the way, and expects the
// same Result every time.
func TestChunkedEqualsWhole(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "README.md" {
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			data := readFixture(t, e.Name())
			whole := parseChunks(data, []int{len(data)}, false)
			ones := make([]int, len(data))
			for i := range ones {
				ones[i] = 1
			}
			assertResult(t, parseChunks(data, ones, true), whole)
			for seed := range uint64(20) {
				assertResult(t, parseChunks(data, randomChunks(len(data), seed), seed%2 == 0), whole)
			}
		})
	}
}

// TestUnterminatedLastLine checks that a complete JSON object without a
// trailing newline counts in a snapshot, and only once after it is ended.
func TestUnterminatedLastLine(t *testing.T) {
	p := NewParser(withFixedNow())
	p.Write([]byte(`{"type":"usage","input_tokens":5,"cost_usd":0.5}`))
	first := p.Result()
	if first.Usage.InputTokens != 5 || first.Format != FormatGeneric {
		t.Fatalf("snapshot before newline: %+v", first)
	}
	p.Result() // snapshots must not apply the line for good
	p.Write([]byte("\n"))
	if got := p.Result(); got.Usage.InputTokens != 5 || *got.Usage.ReportedCostUSD != 0.5 {
		t.Fatalf("after newline: %s, want the line counted once", fmtUsage(got.Usage))
	}

	p = NewParser()
	p.Write([]byte(`{"type":"usage","input_tokens":5`))
	if got := p.Result(); got.UsageFound || got.Format != FormatText || got.FinalMessage != "" {
		t.Fatalf("half a JSON line: %+v, want nothing yet", got)
	}
}

func TestHugeLines(t *testing.T) {
	huge := strings.Repeat("x", defaultMaxLine+1<<20)
	var in strings.Builder
	in.WriteString(`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"before"}],"usage":{"input_tokens":3,"output_tokens":4}}}` + "\n")
	in.WriteString(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"` + huge + `"}]}}` + "\n")
	in.WriteString(`{"type":"result","subtype":"success","is_error":false,"result":"after","usage":{"input_tokens":30,"output_tokens":40}}` + "\n")
	in.WriteString("plain " + huge + " end\n")
	in.WriteString(`{"type":"usage","output_tokens":2}` + "\n")

	for _, chunk := range []int{len(in.String()), 4096, 1 << 20} {
		t.Run(fmt.Sprintf("chunk %d", chunk), func(t *testing.T) {
			p := NewParser()
			data := []byte(in.String())
			for len(data) > 0 {
				n := min(chunk, len(data))
				p.Write(data[:n])
				data = data[n:]
			}
			got := p.Result()
			if got.OversizedLines != 1 {
				t.Errorf("OversizedLines = %d, want 1 (the huge JSON line; the huge text line streams)", got.OversizedLines)
			}
			want := Usage{InputTokens: 30, OutputTokens: 42}
			if !usageEqual(got.Usage, want) {
				t.Errorf("Usage = %s, want %s: lines after the huge one must still parse", fmtUsage(got.Usage), fmtUsage(want))
			}
			if got.FinalMessage != "after" {
				t.Errorf("FinalMessage = %.40q, want %q", got.FinalMessage, "after")
			}
		})
	}
}

func TestTextTailKeepsLast64KiBAtRuneBoundary(t *testing.T) {
	// "é" is two bytes; an odd-length prefix forces the 64 KiB cut into the
	// middle of one.
	body := "x" + strings.Repeat("é", maxMessage) + "\nthe end\n"
	for _, chunk := range []int{len(body), 1, 3, 7} {
		p := NewParser()
		for s := body; len(s) > 0; {
			n := min(chunk, len(s))
			p.Write([]byte(s[:n]))
			s = s[n:]
		}
		got := p.Result().FinalMessage
		if len(got) > maxMessage || !strings.HasSuffix(got, "é\nthe end\n") || !strings.HasPrefix(got, "é") {
			t.Fatalf("chunk %d: tail of %d bytes starting %q", chunk, len(got), got[:min(4, len(got))])
		}
	}

	long := strings.Repeat("ü", maxMessage)
	line := `{"type":"result","subtype":"success","is_error":false,"result":"` + long + `"}` + "\n"
	got := parseString(line).FinalMessage
	if len(got) != maxMessage || got != long[len(long)-maxMessage:] {
		t.Fatalf("result text kept %d bytes, want the last %d at a rune boundary", len(got), maxMessage)
	}
}

func TestConcurrentWriteAndResult(t *testing.T) {
	data := readFixture(t, "claude_parallel_tools.jsonl")
	p := NewParser()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, b := range data {
			p.Write([]byte{b})
		}
	}()
	for {
		select {
		case <-done:
			if got := p.Result(); got.Usage.OutputTokens != 412 {
				t.Fatalf("Usage = %s after all writes", fmtUsage(got.Usage))
			}
			return
		default:
			_ = p.Result()
		}
	}
}

func parseString(s string) Result {
	p := NewParser(withFixedNow())
	p.Write([]byte(s))
	return p.Result()
}

func parseChunks(data []byte, sizes []int, snapshots bool) Result {
	p := NewParser(withFixedNow())
	for _, n := range sizes {
		p.Write(data[:n])
		data = data[n:]
		if snapshots {
			_ = p.Result()
		}
	}
	return p.Result()
}

func randomChunks(total int, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 42))
	var sizes []int
	for total > 0 {
		n := min(total, 1+r.IntN(97))
		sizes = append(sizes, n)
		total -= n
	}
	return sizes
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func assertResult(t *testing.T, got, want Result) {
	t.Helper()
	if !usageEqual(got.Usage, want.Usage) {
		t.Errorf("Usage = %s, want %s", fmtUsage(got.Usage), fmtUsage(want.Usage))
	}
	assertRateLimit(t, got.RateLimit, want.RateLimit)
	got.Usage, want.Usage = Usage{}, Usage{}
	got.RateLimit, want.RateLimit = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Result =\n%+v\nwant\n%+v", got, want)
	}
}

func assertRateLimit(t *testing.T, got, want *RateLimit) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("RateLimit = %+v, want %+v", got, want)
	case !got.ResetsAt.Equal(want.ResetsAt) || got.Kind != want.Kind || got.Message != want.Message:
		t.Errorf("RateLimit = {%v %q %q}, want {%v %q %q}", got.ResetsAt, got.Kind, got.Message, want.ResetsAt, want.Kind, want.Message)
	}
}

func usageEqual(a, b Usage) bool {
	if (a.ReportedCostUSD == nil) != (b.ReportedCostUSD == nil) {
		return false
	}
	if a.ReportedCostUSD != nil && *a.ReportedCostUSD != *b.ReportedCostUSD {
		return false
	}
	a.ReportedCostUSD, b.ReportedCostUSD = nil, nil
	return a == b
}

func fmtUsage(u Usage) string {
	c := "nil"
	if u.ReportedCostUSD != nil {
		c = fmt.Sprint(*u.ReportedCostUSD)
	}
	return fmt.Sprintf("{in %d out %d cacheRead %d cacheWrite %d reasoning %d cost %s}", u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens, c)
}
