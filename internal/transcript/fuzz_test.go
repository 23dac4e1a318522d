package transcript

import (
	"os"
	"testing"
)

// FuzzParser checks that no output makes the parser panic, report negative
// usage or depend on how the output was chunked. It is seeded with every
// fixture. Run it with: go test -run '^$' -fuzz FuzzParser ./internal/transcript/
func FuzzParser(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for i, e := range entries {
		if e.Type().IsRegular() && e.Name() != "README.md" {
			f.Add(readFixture(f, e.Name()), uint64(i))
		}
	}
	f.Add([]byte(`{"type":"usage","input_tokens":-5,"output_tokens":1e400,"cache_read_input_tokens":99999999999999999999,"cost_usd":-1}`+"\n"), uint64(1))
	f.Add([]byte(`{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":9e18,"cache_write_input_tokens":9e18}}`), uint64(2))
	f.Add([]byte("  \t{\"type\":\"result\",\"result\":\"\xe2\x82\"}\r\n\xff\xfe plain\n"), uint64(3))

	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		whole := parseChunks(data, []int{len(data)}, false)
		chunked := parseChunks(data, randomChunks(len(data), seed), seed%2 == 0)
		assertResult(t, chunked, whole)

		u := whole.Usage
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 {
			t.Fatalf("negative usage %s", fmtUsage(u))
		}
		if u.ReportedCostUSD != nil && !(*u.ReportedCostUSD >= 0) {
			t.Fatalf("reported cost %v", *u.ReportedCostUSD)
		}
		if len(whole.FinalMessage) > maxMessage || len(whole.ErrorText) > maxErrorText {
			t.Fatalf("caps exceeded: final %d bytes, error %d bytes", len(whole.FinalMessage), len(whole.ErrorText))
		}
		_, _ = ParseResetTime(string(data), fixedNow)
		_ = HasPromise(string(data), promise)
	})
}
