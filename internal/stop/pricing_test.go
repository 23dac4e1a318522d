package stop

import (
	"strings"
	"testing"
)

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
	}
	for name, p := range prices {
		// Cache reads are cheaper than input (or equal where there is no
		// cache discount); writes cost more or nothing, and 1-hour writes
		// more than 5-minute ones.
		if p.Input <= 0 || p.Output <= 0 || p.CacheRead > p.Input || (p.CacheWrite != 0 && p.CacheWrite <= p.Input) ||
			(p.CacheWrite1h != 0 && p.CacheWrite1h <= p.CacheWrite) {
			t.Errorf("%s: implausible prices %+v", name, p)
		}
		// Claude 3 Haiku is the one published exception ($0.30 and $0.50 on $0.25).
		if strings.HasPrefix(name, "claude-") && name != "claude-3-haiku" && (p.CacheWrite != p.Input*1.25 || p.CacheWrite1h != p.Input*2) {
			t.Errorf("%s: Anthropic cache writes are 1.25× (5 minutes) and 2× (1 hour) input: %+v", name, p)
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
		{"gemini-2.5-flash-lite", "gemini-2.5-flash-lite"},
		{"gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"},
		{"gemini-3-flash-preview", "gemini-3-flash"},
		{"gemini-3.1-pro-preview", "gemini-3.1-pro"},
		{"gpt-4", ""},
		{"claude-sonnet-4-20250514", "claude-sonnet-4"},
		{"claude-opus-4-1-20250805", "claude-opus-4-1"},
		{"claude-3-5-haiku-20241022", "claude-3-5-haiku"},
		{"gpt-4o-mini-tts", ""},
		{"gpt-5-codex", "gpt-5-codex"},
		{"gpt-5.1-codex-mini", "gpt-5.1-codex-mini"},
		{"openai/gpt-5.4-mini-2026-03-17", "gpt-5.4-mini"},
		{"gpt-5-2025-08-07", "gpt-5"},
		{"gpt-5.5", "gpt-5.5"},
		{"o4-mini-2025-04-16", "o4-mini"},
		{"gpt-4.1-2025-04-14", "gpt-4.1"},
		// The CLI aliases resolve to the newest model of the family.
		{"sonnet", "claude-sonnet-5-5"},
		{"Opus", "claude-opus-5-5"},
		{"haiku", "claude-haiku-5-5"},
		{"sonnet[1m]", "claude-sonnet-5-5"},
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

// Anthropic bills 1-hour cache writes at 2× input and 5-minute writes at 1.25×:
// on Sonnet 4.5, $6 and $3.75 per million.
func TestCostPricesOneHourCacheWritesApart(t *testing.T) {
	p, _ := DefaultPrices().Lookup("claude-sonnet-4-5-20250929")
	cases := []struct {
		name string
		u    Usage
		want float64
	}{
		{"5-minute writes", Usage{CacheWriteTokens: 1_000_000}, 3.75},
		{"1-hour writes", Usage{CacheWriteTokens: 1_000_000, CacheWrite1hTokens: 1_000_000}, 6},
		{"both", Usage{CacheWriteTokens: 3_000_000, CacheWrite1hTokens: 1_000_000}, 2*3.75 + 6},
		{"a 1-hour count above the total is capped", Usage{CacheWriteTokens: 1_000_000, CacheWrite1hTokens: 5_000_000}, 6},
		{"everything", Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000, CacheReadTokens: 1_000_000,
			CacheWriteTokens: 2_000_000, CacheWrite1hTokens: 1_000_000}, 3 + 15 + 0.30 + 3.75 + 6},
	}
	for _, tc := range cases {
		if got := Cost(tc.u, p); !near(got, tc.want) {
			t.Errorf("%s: Cost = %.6f, want %.6f", tc.name, got, tc.want)
		}
	}
	// A provider with one write price (an override without a 1-hour price)
	// prices 1-hour writes at it.
	one := Price{Input: 1, Output: 1, CacheWrite: 2}
	if got := Cost(Usage{CacheWriteTokens: 1_000_000, CacheWrite1hTokens: 1_000_000}, one); !near(got, 2) {
		t.Errorf("single write price: Cost = %v, want 2", got)
	}
}

// Every preset's current models are priced: a max_cost with Codex or Gemini must
// not silently count nothing.
func TestDefaultPricesCoverThePresets(t *testing.T) {
	prices := DefaultPrices()
	for _, model := range []string{
		"claude-opus-4-5-20251101", "claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001", "claude-opus-4-6",
		"claude-sonnet-4-6", "claude-opus-5", "claude-sonnet-5-5", "claude-haiku-5-5", "claude-3-7-sonnet-20250219",
		"gpt-5", "gpt-5-mini", "gpt-5-nano", "gpt-5-codex", "gpt-5.1-codex", "gpt-5.1-codex-max", "gpt-5.2-codex",
		"gpt-5.3-codex", "gpt-5.4", "gpt-5.5", "codex-mini-latest", "gpt-4.1", "gpt-4o", "gpt-4o-mini", "o3", "o4-mini",
		"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-3-flash-preview", "gemini-3.1-pro-preview",
	} {
		if _, ok := prices.Lookup(model); !ok {
			t.Errorf("%s is not priced", model)
		}
	}
}
