package agent

import (
	"bufio"
	"os"
	"testing"

	"github.com/loopd/loopd/internal/transcript"
)

// turnState folds a file's lines as the daemon does while a step runs:
// ended when a turn end came after the last sign of work.
func turnState(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ended := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		switch ClassifyTurnLine(sc.Bytes()) {
		case transcript.TurnEnded:
			ended = true
		case transcript.TurnActive:
			ended = false
		}
	}
	return ended
}

func TestClassifyTurnLine(t *testing.T) {
	for _, tc := range []struct {
		file  string
		ended bool
	}{
		{"claude_tool_use_success.jsonl", true},
		{"claude_basic.jsonl", true},
		{"claude_promise.jsonl", true},
		{"claude_killed.jsonl", false}, // killed before its result line was complete
		{"claude_cache_1h.jsonl", true},
		{"codex_exec.jsonl", true},
		{"codex_usage_limit.jsonl", true}, // turn.failed ends the turn too
		// System notices after the result (the background task stopped)
		// start no new turn.
		{"claude-2.1.328-background-job.jsonl", true},
		{"plain_text_promise.txt", false},
		{"generic_usage.txt", false},
	} {
		if got := turnState(t, "../transcript/testdata/"+tc.file); got != tc.ended {
			t.Errorf("%s: turn ended = %v, want %v", tc.file, got, tc.ended)
		}
	}
	for line, want := range map[string]transcript.TurnMark{
		`{"type":"system","subtype":"init","session_id":"s"}`: transcript.TurnActive,
		`{"type":"system","subtype":"compact_boundary"}`:      transcript.TurnNone,
		`{"type":"rate_limit_event","rate_limit_info":{}}`:    transcript.TurnNone,
		`{"type":"result","subtype":"success"}`:               transcript.TurnEnded,
		`not json {"type":"result"}`:                          transcript.TurnNone,
		`{"type":"result"`:                                    transcript.TurnNone, // cut short
		// Gemini CLI 0.61.0, captured (gemini-0.61.0-tool-promise.jsonl).
		`{"type":"init","timestamp":"2026-11-24T19:47:10.692Z","session_id":"34403f9e-63b1-4d6f-b2f9-7809309f8e22","model":"gemini-2.5-flash"}`:                                                                         transcript.TurnActive,
		`{"type":"tool_result","timestamp":"2026-11-24T19:47:10.846Z","tool_id":"run_shell_command__run_shell_command_1795549630726_0","status":"success","output":"hello"}`:                                            transcript.TurnActive,
		`{"type":"result","timestamp":"2026-11-24T19:47:10.857Z","status":"success","stats":{"total_tokens":3972,"input_tokens":3850,"output_tokens":110,"cached":1300,"input":2550,"duration_ms":166,"tool_calls":1}}`: transcript.TurnEnded,
	} {
		if got := ClassifyTurnLine([]byte(line)); got != want {
			t.Errorf("%s: %v, want %v", line, got, want)
		}
	}
}
