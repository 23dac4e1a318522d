package stop

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
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

// ParsePrice parses the value of a price.<model> config key:
// "input,output[,cache_read[,cache_write]]" in USD per million tokens, for example
// "3,15,0.30,3.75". A missing cache price defaults to the input price — a model without
// a cache discount — so an incomplete override never prices cached tokens at $0 and
// never under-counts a budget; write 0 explicitly for a provider that does not charge.
func ParsePrice(s string) (Price, error) {
	parts := strings.Split(s, ",")
	if len(parts) < 2 || len(parts) > 4 {
		return Price{}, fmt.Errorf("price %q: want input,output[,cache_read[,cache_write]] in USD per million tokens", s)
	}
	names := []string{"input", "output", "cache_read", "cache_write"}
	vals := make([]float64, 4)
	for i, part := range parts {
		v, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return Price{}, fmt.Errorf("price %q: %s %q is not a non-negative number", s, names[i], strings.TrimSpace(part))
		}
		vals[i] = v
	}
	pr := Price{Input: vals[0], Output: vals[1], CacheRead: vals[0], CacheWrite: vals[0]}
	if len(parts) > 2 {
		pr.CacheRead = vals[2]
	}
	if len(parts) > 3 {
		pr.CacheWrite = vals[3]
	}
	return pr, nil
}

// models returns the names in p, sorted.
func (p Prices) models() []string { return slices.Sorted(maps.Keys(p)) }
