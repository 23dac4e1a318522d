package transcript

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateRender = flag.Bool("update-render", false, "rewrite testdata/render/*.txt from the renderer's output")

// The transcripts of real captured output, rendered, are compared with
// golden files a person has read (testdata/render); -update-render rewrites
// them after a deliberate change.
func TestRenderFixtures(t *testing.T) {
	fixtures, _ := filepath.Glob("testdata/*.jsonl")
	if len(fixtures) < 10 {
		t.Fatalf("only %d fixtures", len(fixtures))
	}
	for _, path := range fixtures {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			r := NewRenderer(&out)
			// Chunks of any size, as a follower reads them.
			for chunk := range pieces(raw, 7) {
				if _, err := r.Write(chunk); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "render", name+".txt")
			if *updateRender {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if os.IsNotExist(err) {
				// A fixture added since: render it (above, it must not
				// fail) and ask for its golden file.
				t.Skipf("no %s yet: read the output of -update-render and commit it", golden)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != string(want) {
				t.Errorf("rendered:\n%s\nwant:\n%s", got, want)
			}
			// Whole or in pieces, the same transcript.
			var whole bytes.Buffer
			r = NewRenderer(&whole)
			r.Write(raw)
			r.Flush()
			if whole.String() != out.String() {
				t.Errorf("rendering in one write differs from rendering in chunks:\n%s", whole.String())
			}
		})
	}
}

// pieces yields b in pieces of n bytes.
func pieces(b []byte, n int) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(b) > 0 {
			k := min(n, len(b))
			if !yield(b[:k]) {
				return
			}
			b = b[k:]
		}
	}
}

// Gemini CLI 0.61.0 stream-json, as captured from the real CLI against the
// project's fake model API (the first lines of
// gemini-0.61.0-tool-promise.jsonl): the assistant's deltas join into one
// text, the shell tool shows its command and result.
func TestRenderGemini(t *testing.T) {
	raw := `{"type":"init","timestamp":"2026-11-24T19:47:10.692Z","session_id":"34403f9e-63b1-4d6f-b2f9-7809309f8e22","model":"gemini-2.5-flash"}
{"type":"message","timestamp":"2026-11-24T19:47:10.693Z","role":"user","content":"Write hello into out.txt."}
{"type":"message","timestamp":"2026-11-24T19:47:10.724Z","role":"assistant","content":"Let me create th","delta":true}
{"type":"message","timestamp":"2026-11-24T19:47:10.725Z","role":"assistant","content":"e file.","delta":true}
{"type":"tool_use","timestamp":"2026-11-24T19:47:10.752Z","tool_name":"run_shell_command","tool_id":"run_shell_command__run_shell_command_1795549630726_0","parameters":{"command":"echo hello > out.txt && cat out.txt","description":"run a command"}}
{"type":"tool_result","timestamp":"2026-11-24T19:47:10.846Z","tool_id":"run_shell_command__run_shell_command_1795549630726_0","status":"success","output":"hello"}
{"type":"message","timestamp":"2026-11-24T19:47:10.854Z","role":"assistant","content":"The file is writ","delta":true}
{"type":"message","timestamp":"2026-11-24T19:47:10.855Z","role":"assistant","content":"ten.\n<promise>CO","delta":true}
{"type":"message","timestamp":"2026-11-24T19:47:10.856Z","role":"assistant","content":"MPLETE</promise>","delta":true}
{"type":"result","timestamp":"2026-11-24T19:47:10.857Z","status":"success","stats":{"total_tokens":3972,"input_tokens":3850,"output_tokens":110,"cached":1300,"input":2550,"duration_ms":166,"tool_calls":1,"models":{"gemini-2.5-flash":{"total_tokens":3972,"input_tokens":3850,"output_tokens":110,"cached":1300,"input":2550}}}}
`
	want := `── gemini-2.5-flash · session 34403f9e
» Write hello into out.txt.
Let me create the file.
$ echo hello > out.txt && cat out.txt
  hello
The file is written.
<promise>COMPLETE</promise>
■ success · 3850 in (1300 cached) · 110 out · 1 tool call
`
	var out bytes.Buffer
	r := NewRenderer(&out)
	for chunk := range pieces([]byte(raw), 13) {
		r.Write(chunk)
	}
	r.Flush()
	if out.String() != want {
		t.Errorf("rendered:\n%s\nwant:\n%s", out.String(), want)
	}
}

// A line longer than the bound is announced, not held; the lines after it
// render as usual.
func TestRenderSkipsHugeLines(t *testing.T) {
	var out bytes.Buffer
	r := NewRenderer(&out)
	huge := append([]byte(`{"type":"user","message":{"content":"`), bytes.Repeat([]byte("x"), renderMaxLine+10)...)
	for chunk := range pieces(huge, 1<<20) {
		r.Write(chunk)
	}
	r.Write([]byte("\"}}\nafter\n"))
	r.Flush()
	if got := out.String(); !strings.Contains(got, "not shown; loopctl logs --raw prints it") || !strings.HasSuffix(got, "after\n") {
		t.Errorf("rendered %q", got)
	}
	if cap(r.line) > 64<<10 {
		t.Errorf("the renderer holds %d bytes after the huge line", cap(r.line))
	}
}

// What the renderer learned of one step (Claude's partial messages, which
// move usage to message_delta) does not carry over to the next step that
// `loopctl logs` prints after its header.
func TestRenderResetsAtEachStep(t *testing.T) {
	partial, err := os.ReadFile("testdata/claude-2.1.328-background-job.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	basic, err := os.ReadFile("testdata/claude_basic.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := NewRenderer(&out)
	r.Write([]byte(`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m"}}}` + "\n"))
	r.Write(partial)
	r.Write([]byte("\n==> #2 implementation (iteration 2) <==\n"))
	r.Write(basic)
	r.Flush()
	_, second, _ := strings.Cut(out.String(), "==> #2")
	if !strings.Contains(second, "· usage 10 in · 5 out · 21570 cache write") {
		t.Errorf("the second step's message usage is missing:\n%s", out.String())
	}
}

// A replayed prompt (a user message whose content is a string) is shown as
// the prompt; tool results are shown under their call.
func TestRenderClaudeUserLines(t *testing.T) {
	var out bytes.Buffer
	r := NewRenderer(&out)
	r.Write([]byte(`{"type":"user","message":{"role":"user","content":"Fix the parser."},"session_id":"s"}
{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"boom","is_error":true}]},"session_id":"s"}
`))
	r.Flush()
	if got, want := out.String(), "» Fix the parser.\n  ! tool failed\n  boom\n"; got != want {
		t.Errorf("rendered %q, want %q", got, want)
	}
}
