package stop

import "testing"

// Seed 002: calculateCost handles cache tokens, for every model of the table.
func TestCostForEachModelWithCacheTokens(t *testing.T) {
	u := Usage{InputTokens: 200_000, OutputTokens: 50_000, CacheReadTokens: 1_000_000, CacheWriteTokens: 100_000}
	cases := []struct {
		model string
		want  float64 // hand-computed: in×0.2 + out×0.05 + read×1 + write×0.1 (millions)
	}{
		{"claude-opus-4-5", 1.0 + 1.25 + 0.5 + 0.625},
		{"claude-sonnet-4-5", 0.6 + 0.75 + 0.3 + 0.375},
		{"claude-haiku-4-5", 0.2 + 0.25 + 0.1 + 0.125},
		{"gpt-4o", 0.5 + 0.5 + 1.25 + 0},
		{"gpt-4o-mini", 0.03 + 0.03 + 0.075 + 0},
		{"gemini-2.5-pro", 0.25 + 0.5 + 0.125 + 0},
		{"gemini-2.5-flash", 0.06 + 0.125 + 0.03 + 0},
	}
	prices := DefaultPrices()
	if len(prices) < len(cases) {
		t.Errorf("table has %d models, want at least %d", len(prices), len(cases))
	}
	for _, tc := range cases {
		p, ok := prices.Lookup(tc.model)
		if !ok {
			t.Errorf("%s missing from the table", tc.model)
			continue
		}
		if got := Cost(u, p); !near(got, tc.want) {
			t.Errorf("Cost(%s) = %.6f, want %.6f", tc.model, got, tc.want)
		}
		// Cache reads are cheaper than input everywhere; writes cost more or nothing.
		if p.CacheRead >= p.Input || (p.CacheWrite != 0 && p.CacheWrite <= p.Input) {
			t.Errorf("%s: implausible cache prices %+v", tc.model, p)
		}
	}
	if got := Cost(Usage{}, prices["claude-sonnet-4-5"]); got != 0 {
		t.Errorf("no tokens cost %v", got)
	}
}

func TestLookupNormalisesModelNames(t *testing.T) {
	prices := DefaultPrices()
	cases := []struct {
		name, want string // want "" for not found
	}{
		{"claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"Claude-Sonnet-4-5", "claude-sonnet-4-5"},
		{"anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"},
		{"claude-sonnet-4-5@20250929", "claude-sonnet-4-5"},
		{"claude-opus-4-5[1m]", "claude-opus-4-5"},
		{"claude-haiku-4-5-20251001", "claude-haiku-4-5"},
		{"openai/gpt-4o-2024-08-06", "gpt-4o"},
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
		{"gpt-4o-latest", "gpt-4o"},
		{"models/gemini-2.5-flash", "gemini-2.5-flash"},
		{"google/gemini-2.5-pro", "gemini-2.5-pro"},
		{"gemini-2.5-flash-lite", ""},
		{"gpt-4", ""},
		{"claude-sonnet-4", ""},
		{"gpt-4o-mini-tts", ""},
		{"", ""},
	}
	for _, tc := range cases {
		p, ok := prices.Lookup(tc.name)
		switch {
		case tc.want == "" && ok:
			t.Errorf("Lookup(%q) found %+v, want not found", tc.name, p)
		case tc.want != "" && (!ok || p != prices[tc.want]):
			t.Errorf("Lookup(%q) = %+v, %v; want %s", tc.name, p, ok, tc.want)
		}
	}
}

func TestOverrideReplacesTheSameModel(t *testing.T) {
	p := DefaultPrices()
	custom := Price{Input: 1, Output: 2, CacheRead: 0.1, CacheWrite: 1.5}
	p.Override("Claude-Sonnet-4.5", custom)
	if got, _ := p.Lookup("claude-sonnet-4-5-20250929"); got != custom {
		t.Errorf("after override: %+v", got)
	}
	if _, ok := p["claude-sonnet-4-5"]; ok {
		t.Error("the built-in entry survived the override")
	}
	p.Override("my-local-model", Price{Input: 0.5, Output: 0.5})
	if _, ok := p.Lookup("My-Local-Model"); !ok {
		t.Error("new model not found")
	}
}
