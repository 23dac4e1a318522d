package transcript

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestMemoryBoundedOn200MB streams 200 MB of agent output (plain text, Claude
// assistant and tool-result lines, and JSON lines longer than the line limit)
// through one Parser and checks that the heap stays far below the input size
// and that every line after the oversized ones was still parsed.
func TestMemoryBoundedOn200MB(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 200 MB")
	}
	const (
		total     = 200 << 20
		hugeEvery = 25 << 20
		sampleGap = 4 << 20
	)
	textLine := strings.Repeat("compiling package and running tests ", 28) + "\n" // ~1 KiB
	text := strings.Repeat(textLine, 32)
	toolResult := `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` +
		strings.Repeat("file contents ", 300) + `"}]},"parent_tool_use_id":null,"session_id":"s"}` + "\n"
	huge := `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"` +
		strings.Repeat("z", defaultMaxLine+(1<<20)) + `"}]}}` + "\n"

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	p := NewParser(withFixedNow())
	var (
		fed, nextHuge, nextSample int64 = 0, hugeEvery, sampleGap
		blocks, hugeLines         int
		peak                      uint64
		ms                        runtime.MemStats
	)
	feed := func(s string) {
		// Feed in 64 KiB pieces, as a log follower reading a file would.
		for len(s) > 0 {
			n := min(len(s), 64<<10)
			p.Write([]byte(s[:n]))
			s = s[n:]
			fed += int64(n)
		}
	}
	for fed < total {
		feed(text)
		feed(fmt.Sprintf(`{"type":"assistant","message":{"id":"msg_%08d","model":"claude-sonnet-4-5","content":[{"type":"text","text":"step %d"}],"usage":{"input_tokens":3,"output_tokens":7,"cache_read_input_tokens":11,"cache_creation_input_tokens":13}},"parent_tool_use_id":null,"session_id":"s"}`+"\n", blocks, blocks))
		feed(toolResult)
		blocks++
		if fed >= nextHuge {
			feed(huge)
			hugeLines++
			nextHuge += hugeEvery
		}
		if fed >= nextSample {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			nextSample += sampleGap
		}
	}
	got := p.Result()

	runtime.GC()
	runtime.ReadMemStats(&ms)
	retained := int64(ms.HeapAlloc) - int64(before.HeapAlloc)
	grown := int64(peak) - int64(before.HeapAlloc)
	t.Logf("fed %d MB in %d blocks, %d oversized lines; heap peak +%d MiB, retained +%d MiB",
		fed>>20, blocks, hugeLines, grown>>20, retained>>20)

	// One line buffer (8 MiB), one huge-line string of this test's own
	// (9 MiB), the text tail and the id window are live; the rest is
	// garbage awaiting collection. 200 MB of input must not show up.
	if grown > 96<<20 {
		t.Errorf("heap grew by %d MiB while streaming %d MiB", grown>>20, fed>>20)
	}
	if retained > 32<<20 {
		t.Errorf("heap retained %d MiB after streaming %d MiB", retained>>20, fed>>20)
	}
	if got.OversizedLines != hugeLines {
		t.Errorf("OversizedLines = %d, want %d", got.OversizedLines, hugeLines)
	}
	n := int64(blocks)
	want := Usage{InputTokens: 3 * n, OutputTokens: 7 * n, CacheReadTokens: 11 * n, CacheWriteTokens: 13 * n}
	if !usageEqual(got.Usage, want) {
		t.Errorf("Usage = %s, want %s", fmtUsage(got.Usage), fmtUsage(want))
	}
	if wantFinal := fmt.Sprintf("step %d", blocks-1); got.FinalMessage != wantFinal {
		t.Errorf("FinalMessage = %q, want %q", got.FinalMessage, wantFinal)
	}
	runtime.KeepAlive(p)
}
