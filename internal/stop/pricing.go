package stop

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Input      float64 // uncached input
	Output     float64
	CacheRead  float64 // input read from the prompt cache
	CacheWrite float64 // input written to the prompt cache; 0 where the provider has no write price
}

// Prices maps a model name to its price. Look models up with Lookup, which normalises
// the names agents report.
type Prices map[string]Price

// DefaultPrices returns the built-in pricing table (list prices, USD per million tokens;
// Anthropic cache writes are the 5-minute price, 1.25× input, and cache reads 0.1× input;
// OpenAI's cache read is its cached-input price and it has no write price; Gemini's cache
// read is the context-caching price of the ≤200k-token tier and it has no per-token write
// price, only storage per hour, which loopd does not see). Override entries with
// Prices.Override (config key price.<model>).
func DefaultPrices() Prices {
	return Prices{
		"claude-opus-4-5":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
		"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
		"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25},
		"gpt-4o":            {Input: 2.50, Output: 10, CacheRead: 1.25},
		"gpt-4o-mini":       {Input: 0.15, Output: 0.60, CacheRead: 0.075},
		"gemini-2.5-pro":    {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gemini-2.5-flash":  {Input: 0.30, Output: 2.50, CacheRead: 0.03},
	}
}

// Lookup returns the price of model. Names are matched exactly first, then after
// normalisation on both sides: case-insensitive, provider prefixes dropped
// ("anthropic/", "models/", Bedrock's "us.anthropic."), version and date suffixes
// dropped ("-20250929", "@20250929", "-2024-08-06", "-v1:0", "-latest", "[1m]"), and "."
// equal to "-" ("claude-sonnet-4.5"). Distinct models such as "gpt-4o" and "gpt-4o-mini"
// never match each other. When several entries normalise alike, the smallest name wins.
func (p Prices) Lookup(model string) (Price, bool) {
	if pr, ok := p[model]; ok {
		return pr, true
	}
	want := canonicalModel(model)
	if want == "" {
		return Price{}, false
	}
	found := ""
	for name := range p {
		if canonicalModel(name) == want && (found == "" || name < found) {
			found = name
		}
	}
	if found == "" {
		return Price{}, false
	}
	return p[found], true
}

// Override sets the price of model, replacing every entry that names the same model
// (after the normalisation of Lookup), so "price.Claude-Sonnet-4.5" replaces the built-in
// claude-sonnet-4-5.
func (p Prices) Override(model string, pr Price) {
	c := canonicalModel(model)
	maps.DeleteFunc(p, func(name string, _ Price) bool { return canonicalModel(name) == c })
	p[model] = pr
}

var (
	modelVersionSuffix = regexp.MustCompile(`(-v\d+(:\d+)?|-latest|-\d{8}|-\d{4}-\d{2}-\d{2})$`)
	bedrockPrefix      = regexp.MustCompile(`^([a-z]{2,6}\.)?(anthropic|openai|google)\.`)
	modelSeparators    = strings.NewReplacer(".", "-", "_", "-")
)

func canonicalModel(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	s = bedrockPrefix.ReplaceAllString(s, "")
	if i := strings.IndexAny(s, "[@"); i >= 0 {
		s = s[:i]
	}
	for {
		t := modelVersionSuffix.ReplaceAllString(s, "")
		if t == s {
			break
		}
		s = t
	}
	return modelSeparators.Replace(s)
}

// Cost prices the tokens of u (InputTokens, OutputTokens, CacheReadTokens,
// CacheWriteTokens; the cost fields are ignored) with p.
func Cost(u Usage, p Price) float64 {
	return (float64(u.InputTokens)*p.Input +
		float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*p.CacheRead +
		float64(u.CacheWriteTokens)*p.CacheWrite) / 1e6
}

// models returns the names in p, sorted.
func (p Prices) models() []string { return slices.Sorted(maps.Keys(p)) }
