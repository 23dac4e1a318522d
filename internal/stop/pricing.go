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
	CacheWrite float64 // input written to the prompt cache for 5 minutes (Anthropic's default); 0 where the provider has no write price
	// CacheWrite1h is input written to the prompt cache for one hour
	// (Anthropic: 2× input, where 5-minute writes are 1.25×). 0 prices
	// them as CacheWrite, for providers that have a single write price.
	CacheWrite1h float64
}

// Prices maps a model name to its price. Look models up with Lookup, which normalises
// the names agents report and resolves aliases such as "sonnet".
type Prices map[string]Price

// DefaultPrices returns the built-in pricing table: standard (not batch, not priority)
// list prices in USD per million tokens, for prompts in the base context tier
// (Anthropic's Sonnet 4/4.5 and Google's Pro models charge more above 200k tokens of
// prompt, Haiku 5.5 above 100k; loopd sees a step's totals, not each request's
// prompt, so it prices every token at the base tier). Anthropic cache writes have two
// prices, 5 minutes (1.25× input) and 1 hour (2× input); cache reads are 0.1× input
// unless noted. OpenAI's cache read is its cached-input price and it has no write
// price. Gemini's cache read is its context-caching price; it has no per-token write
// price, only storage per hour, which loopd does not see. Override entries with
// Prices.Override (config key price.<model>).
//
// Sources, read on 2026-11-24:
//   - Anthropic: https://platform.claude.com/docs/en/about-claude/pricing ("Model
//     pricing": base input, 5m and 1h cache writes, cache hits, output) and the model
//     overview pages https://platform.claude.com/docs/about-claude/models/ (Opus 5,
//     Opus 5.5, Sonnet 5.5, Haiku 5.5). Sonnet 5.5's cache read was cut from $0.20
//     to $0.10 on 2026-10-07 (release notes of PromptFuel v1.0.23, which re-audited
//     the official page).
//   - OpenAI: https://developers.openai.com/api/docs/pricing and the model pages
//     (https://developers.openai.com/api/docs/models/gpt-5-codex: $1.25 / $0.125 /
//     $10), as summarised on 2026-11-06 by https://raw.githubusercontent.com/api-evangelist/posts/main/_posts/2026-11-06-openai-api-pricing-what-every-model-costs-per-million-tokens.md,
//     on 2026-06-04 by https://tokenmix.ai/blog/openai-api-cost-2026-gpt-5-5-5-4-nano-batch
//     (gpt-5.5, gpt-5.4, -mini, -nano) and on 2026-05-05 by
//     https://fernando-nog.netlify.app/gpt-coding-model-costs-2026/ (the codex models).
//   - Google: https://ai.google.dev/gemini-api/docs/pricing, as quoted on 2026-07-04 by
//     https://factquire.com/models/google/gemini-3-flash-preview.json and listed by
//     https://www.morphllm.com/gemini-api-pricing (input and output of every current
//     model). Where no source gave a context-caching price (marked "read 10%"), the
//     cache read is Google's usual 10% of input.
func DefaultPrices() Prices {
	return Prices{
		// Anthropic, current.
		"claude-fable-5-1":  {Input: 10, Output: 50, CacheRead: 0.25, CacheWrite: 12.50, CacheWrite1h: 20},
		"claude-mythos-5-1": {Input: 10, Output: 50, CacheRead: 0.25, CacheWrite: 12.50, CacheWrite1h: 20},
		"claude-fable-5":    {Input: 10, Output: 50, CacheRead: 1, CacheWrite: 12.50, CacheWrite1h: 20},
		"claude-mythos-5":   {Input: 10, Output: 50, CacheRead: 1, CacheWrite: 12.50, CacheWrite1h: 20},
		"claude-opus-5-5":   {Input: 4, Output: 20, CacheRead: 0.20, CacheWrite: 5, CacheWrite1h: 8},
		"claude-opus-5":     {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25, CacheWrite1h: 10},
		"claude-sonnet-5-5": {Input: 2, Output: 10, CacheRead: 0.10, CacheWrite: 2.50, CacheWrite1h: 4},
		"claude-sonnet-5":   {Input: 2, Output: 10, CacheRead: 0.20, CacheWrite: 2.50, CacheWrite1h: 4},
		// Haiku 5.5: prompts up to 100k tokens ($0.50 / $2.50 above).
		"claude-haiku-5-5": {Input: 0.10, Output: 0.50, CacheRead: 0.01, CacheWrite: 0.125, CacheWrite1h: 0.20},
		// Anthropic, 4.x and 3.x still served.
		"claude-opus-4-8":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25, CacheWrite1h: 10},
		"claude-opus-4-7":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25, CacheWrite1h: 10},
		"claude-opus-4-6":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25, CacheWrite1h: 10},
		"claude-opus-4-5":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25, CacheWrite1h: 10},
		"claude-opus-4-1":   {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75, CacheWrite1h: 30},
		"claude-opus-4":     {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75, CacheWrite1h: 30},
		"claude-sonnet-4-6": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75, CacheWrite1h: 6},
		"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75, CacheWrite1h: 6},
		"claude-sonnet-4":   {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75, CacheWrite1h: 6},
		"claude-3-7-sonnet": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75, CacheWrite1h: 6},
		"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25, CacheWrite1h: 2},
		"claude-3-5-haiku":  {Input: 0.80, Output: 4, CacheRead: 0.08, CacheWrite: 1, CacheWrite1h: 1.60},
		"claude-3-haiku":    {Input: 0.25, Output: 1.25, CacheRead: 0.03, CacheWrite: 0.30, CacheWrite1h: 0.50},
		"claude-3-opus":     {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75, CacheWrite1h: 30},

		// OpenAI: GPT-5 family and its codex models (cached input 0.1× input).
		"gpt-5.5":            {Input: 5, Output: 30, CacheRead: 0.50},
		"gpt-5.5-pro":        {Input: 30, Output: 180, CacheRead: 30}, // no cached-input price: cache reads cost input
		"gpt-5.4":            {Input: 2.50, Output: 15, CacheRead: 0.25},
		"gpt-5.4-mini":       {Input: 0.75, Output: 4.50, CacheRead: 0.075},
		"gpt-5.4-nano":       {Input: 0.20, Output: 1.25, CacheRead: 0.02},
		"gpt-5.4-pro":        {Input: 30, Output: 180, CacheRead: 30},
		"gpt-5.3-codex":      {Input: 1.75, Output: 14, CacheRead: 0.175},
		"gpt-5.2":            {Input: 1.75, Output: 14, CacheRead: 0.175},
		"gpt-5.2-codex":      {Input: 1.75, Output: 14, CacheRead: 0.175},
		"gpt-5.1":            {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gpt-5.1-codex":      {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gpt-5.1-codex-max":  {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gpt-5.1-codex-mini": {Input: 0.25, Output: 2, CacheRead: 0.025},
		"gpt-5":              {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gpt-5-codex":        {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gpt-5-mini":         {Input: 0.25, Output: 2, CacheRead: 0.025},
		"gpt-5-nano":         {Input: 0.05, Output: 0.40, CacheRead: 0.005},
		"codex-mini-latest":  {Input: 1.50, Output: 6, CacheRead: 0.375},
		// OpenAI: GPT-4.1 (cached 0.25×), GPT-4o and the o-series (cached 0.5×, o3 and
		// o4-mini 0.25×).
		"gpt-4.1":      {Input: 2, Output: 8, CacheRead: 0.50},
		"gpt-4.1-mini": {Input: 0.40, Output: 1.60, CacheRead: 0.10},
		"gpt-4.1-nano": {Input: 0.10, Output: 0.40, CacheRead: 0.025},
		"gpt-4o":       {Input: 2.50, Output: 10, CacheRead: 1.25},
		"gpt-4o-mini":  {Input: 0.15, Output: 0.60, CacheRead: 0.075},
		"o3":           {Input: 2, Output: 8, CacheRead: 0.50},
		"o4-mini":      {Input: 1.10, Output: 4.40, CacheRead: 0.275},
		"o3-mini":      {Input: 1.10, Output: 4.40, CacheRead: 0.55},
		"o1":           {Input: 15, Output: 60, CacheRead: 7.50},

		// Google (prompts up to 200k tokens where the price is tiered).
		"gemini-3.5-flash":      {Input: 1.50, Output: 9, CacheRead: 0.15},     // read 10%
		"gemini-3.1-pro":        {Input: 2, Output: 12, CacheRead: 0.20},       // read 10%
		"gemini-3.1-flash-lite": {Input: 0.25, Output: 1.50, CacheRead: 0.025}, // read 10%
		"gemini-3-flash":        {Input: 0.50, Output: 3, CacheRead: 0.05},
		"gemini-2.5-pro":        {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gemini-2.5-flash":      {Input: 0.30, Output: 2.50, CacheRead: 0.03},
		"gemini-2.5-flash-lite": {Input: 0.10, Output: 0.40, CacheRead: 0.01},
		"gemini-2.0-flash":      {Input: 0.10, Output: 0.40, CacheRead: 0.025},
	}
}

// modelAliases are the short names the agent CLIs accept for a model family
// (`claude --model sonnet`), resolved to the newest model of the family in the
// table. A CLI reports the full model id it used, and that id is what loopd
// prices whenever the transcript has it; an alias is priced only when it is all
// loopd knows (the config's model, a step without a model line).
var modelAliases = map[string]string{
	"opus":   "claude-opus-5-5",
	"sonnet": "claude-sonnet-5-5",
	"haiku":  "claude-haiku-5-5",
	"fable":  "claude-fable-5-1",
}

// Lookup returns the price of model. Names are matched exactly first, then after
// normalisation on both sides: case-insensitive, provider prefixes dropped
// ("anthropic/", "models/", Bedrock's "us.anthropic."), version, date and preview
// suffixes dropped ("-20250929", "@20250929", "-2024-08-06", "-v1:0", "-latest",
// "-preview", "[1m]"), and "." equal to "-" ("claude-sonnet-4.5"). The CLI aliases
// "opus", "sonnet", "haiku" resolve to the newest model of the family. Distinct models
// such as "gpt-4o" and "gpt-4o-mini" never match each other. When several entries
// normalise alike, the smallest name wins.
func (p Prices) Lookup(model string) (Price, bool) {
	if pr, ok := p[model]; ok {
		return pr, true
	}
	want := canonicalModel(model)
	if want == "" {
		return Price{}, false
	}
	if pr, ok := p.lookupCanonical(want); ok {
		return pr, true
	}
	if target, ok := modelAliases[want]; ok {
		return p.lookupCanonical(canonicalModel(target))
	}
	return Price{}, false
}

func (p Prices) lookupCanonical(want string) (Price, bool) {
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
	modelVersionSuffix = regexp.MustCompile(`(-v\d+(:\d+)?|-latest|-\d{8}|-\d{4}-\d{2}-\d{2}|-preview(-\d{2}-\d{2,4})?)$`)
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
// CacheWriteTokens of which CacheWrite1hTokens were 1-hour writes; the cost fields are
// ignored) with p.
func Cost(u Usage, p Price) float64 {
	long := min(max(u.CacheWrite1hTokens, 0), u.CacheWriteTokens)
	longPrice := p.CacheWrite1h
	if longPrice == 0 {
		longPrice = p.CacheWrite
	}
	return (float64(u.InputTokens)*p.Input +
		float64(u.OutputTokens)*p.Output +
		float64(u.CacheReadTokens)*p.CacheRead +
		float64(u.CacheWriteTokens-long)*p.CacheWrite +
		float64(long)*longPrice) / 1e6
}

// models returns the names in p, sorted.
func (p Prices) models() []string { return slices.Sorted(maps.Keys(p)) }

// CostLimitWithoutModel reports whether s has a max_cost condition (at any depth) that
// names no model of its own: its cost is priced with the model the steps report, else
// the run's configured model.
func (s Set) CostLimitWithoutModel() bool {
	return s.anyCondition(func(c Condition) bool {
		mc, ok := c.(MaxCost)
		return ok && mc.Model == ""
	})
}
