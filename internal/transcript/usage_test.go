package transcript

import "testing"

// Claude Code reports how its cache writes split by duration
// (usage.cache_creation); the 1-hour part is carried apart so it can be
// priced at its own rate.
func TestCacheWriteOneHourSplit(t *testing.T) {
	res, err := ParseFile("testdata/claude_cache_1h.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	u := res.Usage
	if u.CacheWriteTokens != 25919 || u.CacheWrite1hTokens != 25919 || u.InputTokens != 10 || u.OutputTokens != 150 || u.CacheReadTokens != 13963 {
		t.Errorf("usage = %+v, want 10 in, 150 out, 13963 read, 25919 written of which 25919 for 1 hour", u)
	}
	// Fixtures whose writes are all 5-minute ones report no 1-hour part.
	res, err = ParseFile("testdata/claude_tool_use_success.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage.CacheWriteTokens == 0 || res.Usage.CacheWrite1hTokens != 0 {
		t.Errorf("5-minute writes: usage = %+v, want writes and no 1-hour part", res.Usage)
	}
	// Assistant lines carry the split too (a step killed before its
	// result), summed once per message; a split above its total is capped.
	p := NewParser()
	p.Write([]byte(`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":1,"output_tokens":1,"cache_creation_input_tokens":300,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200}}}}
{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":1,"output_tokens":1,"cache_creation_input_tokens":300,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200}}}}
{"type":"assistant","message":{"id":"m2","usage":{"input_tokens":1,"output_tokens":1,"cache_creation_input_tokens":50,"cache_creation":{"ephemeral_1h_input_tokens":80}}}}
`))
	if got := p.Result().Usage; got.CacheWriteTokens != 350 || got.CacheWrite1hTokens != 250 {
		t.Errorf("assistant lines: usage = %+v, want 350 written, 250 for 1 hour", got)
	}
}
