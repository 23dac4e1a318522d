package transcript

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// The wire shapes below declare only the fields loopd reads. Decoding is
// lenient on purpose: a field of an unexpected type is skipped (see decode),
// and the custom field types never fail, so one odd field does not turn a
// real event into "text".

// event is the union of every top-level line shape we read.
type event struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Model     string `json:"model"`

	// Claude assistant/user: an object; Codex error: a string.
	Message         msgField `json:"message"`
	ParentToolUseID *string  `json:"parent_tool_use_id"`
	// Claude assistant: a string such as "rate_limit"; Codex turn.failed:
	// {"message":…}.
	Error errField `json:"error"`

	// Claude result.
	IsError        bool          `json:"is_error"`
	Result         *string       `json:"result"`
	Errors         []string      `json:"errors"`
	APIErrorStatus count         `json:"api_error_status"`
	TotalCostUSD   money         `json:"total_cost_usd"`
	Usage          *usageFields  `json:"usage"`
	RateLimitInfo  *rateLimitRaw `json:"rate_limit_info"`

	// Claude result: "api_error" when the model API failed the turn.
	TerminalReason string `json:"terminal_reason"`
	// Claude stream_event (--include-partial-messages): the raw API event,
	// and the id of the message it belongs to.
	Event        *streamEvent `json:"event"`
	APIMessageID string       `json:"api_message_id"`

	// Gemini CLI stream-json: result status and stats, message role and
	// content (a string), error severity.
	Status   string       `json:"status"`
	Stats    *geminiStats `json:"stats"`
	Role     string       `json:"role"`
	Content  string       `json:"content"`
	Severity string       `json:"severity"`

	// Codex exec --json.
	ThreadID string     `json:"thread_id"`
	Item     *codexItem `json:"item"`
	// Legacy Codex envelope {"id":…,"msg":{…}}.
	Msg *legacyMsg `json:"msg"`

	// Generic {"type":"usage",…}: the token fields sit at the top level.
	usageFields
	CostUSD money `json:"cost_usd"`
}

// usageFields holds the token counters of Anthropic and OpenAI usage objects.
type usageFields struct {
	InputTokens   count `json:"input_tokens"`
	OutputTokens  count `json:"output_tokens"`
	CacheRead     count `json:"cache_read_input_tokens"`
	CacheCreation count `json:"cache_creation_input_tokens"`
	// OpenAI: both are included in input_tokens.
	CachedInput     count `json:"cached_input_tokens"`
	CacheWriteInput count `json:"cache_write_input_tokens"`
	// Anthropic: the split of cache_creation_input_tokens by duration,
	// priced differently (1-hour writes cost 2× input, 5-minute 1.25×).
	CacheCreationSplit *struct {
		Ephemeral1h count `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	// Reasoning tokens, included in output_tokens: Codex
	// reasoning_output_tokens, Claude output_tokens_details.thinking_tokens,
	// OpenAI output_tokens_details.reasoning_tokens.
	ReasoningOutput count          `json:"reasoning_output_tokens"`
	OutputDetails   *outputDetails `json:"output_tokens_details"`
}

type outputDetails struct {
	Thinking  count `json:"thinking_tokens"`
	Reasoning count `json:"reasoning_tokens"`
}

// reasoning returns the reasoning tokens the usage reports, whatever its
// dialect names them.
func (f *usageFields) reasoning() int64 {
	r := f.ReasoningOutput.v
	if d := f.OutputDetails; d != nil {
		r = max(r, d.Thinking.v, d.Reasoning.v)
	}
	return r
}

// streamEvent is the part of a raw Anthropic streaming event that carries
// usage: message_start's message, message_delta's usage.
type streamEvent struct {
	Type    string         `json:"type"`
	Message *claudeMessage `json:"message"`
	Usage   *usageFields   `json:"usage"`
}

// geminiStats is Gemini CLI's result.stats: the sums over the requests the
// CLI got an answer to. input_tokens include the cached ones (input is the
// rest); output_tokens exclude thoughts, which only total_tokens count.
type geminiStats struct {
	TotalTokens  count `json:"total_tokens"`
	InputTokens  count `json:"input_tokens"`
	OutputTokens count `json:"output_tokens"`
	Cached       count `json:"cached"`
	Input        count `json:"input"`
}

// usage converts Gemini stats to loopd's Usage: thoughts are billed as
// output, so they are added to OutputTokens and reported as reasoning.
func (g *geminiStats) usage() Usage {
	thoughts := max(0, g.TotalTokens.v-g.InputTokens.v-g.OutputTokens.v)
	fresh := g.Input.v
	if !g.Input.ok {
		fresh = max(0, g.InputTokens.v-g.Cached.v)
	}
	return Usage{
		InputTokens:     fresh,
		OutputTokens:    g.OutputTokens.v + thoughts,
		CacheReadTokens: g.Cached.v,
		ReasoningTokens: thoughts,
	}
}

// anthropic reads Anthropic-style counters: input excludes the cache.
func (f *usageFields) anthropic() Usage {
	return Usage{
		InputTokens:      f.InputTokens.v,
		OutputTokens:     f.OutputTokens.v,
		CacheReadTokens:  f.CacheRead.v,
		CacheWriteTokens: f.CacheCreation.v,
		// The split never exceeds the total it splits.
		CacheWrite1hTokens: min(f.cacheWrite1h(), f.CacheCreation.v),
		ReasoningTokens:    f.reasoning(),
	}
}

// cacheWrite1h is the 1-hour part of an Anthropic cache write, 0 when the
// usage does not split it.
func (f *usageFields) cacheWrite1h() int64 {
	if f.CacheCreationSplit == nil {
		return 0
	}
	return f.CacheCreationSplit.Ephemeral1h.v
}

// openAI reads OpenAI-style counters: input_tokens include cache reads and
// writes, which are subtracted so InputTokens means the same for every agent.
// Some Codex builds name the write counter cache_creation_input_tokens.
func (f *usageFields) openAI() Usage {
	write := max(f.CacheWriteInput.v, f.CacheCreation.v)
	read := max(f.CachedInput.v, f.CacheRead.v)
	return Usage{
		InputTokens:      max(0, f.InputTokens.v-read-write),
		OutputTokens:     f.OutputTokens.v,
		CacheReadTokens:  read,
		CacheWriteTokens: write,
		ReasoningTokens:  f.reasoning(),
	}
}

type claudeMessage struct {
	ID      string       `json:"id"`
	Model   string       `json:"model"`
	Content contentField `json:"content"`
	Usage   *usageFields `json:"usage"`
}

type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type rateLimitRaw struct {
	Status        string `json:"status"`
	ResetsAt      money  `json:"resetsAt"`
	RateLimitType string `json:"rateLimitType"`
}

type codexItem struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type legacyMsg struct {
	Type             string     `json:"type"`
	Message          string     `json:"message"`
	LastAgentMessage string     `json:"last_agent_message"`
	SessionID        string     `json:"session_id"`
	Model            string     `json:"model"`
	Info             *tokenInfo `json:"info"`
	usageFields
}

type tokenInfo struct {
	Total *usageFields `json:"total_token_usage"`
	Last  *usageFields `json:"last_token_usage"`
}

// decode unmarshals b into v, tolerating fields of unexpected types:
// encoding/json skips such a field, finishes the rest and reports an
// UnmarshalTypeError, which we ignore. Only a syntax error fails.
func decode(b []byte, v any) bool {
	err := json.Unmarshal(b, v)
	if err == nil {
		return true
	}
	_, typeErr := err.(*json.UnmarshalTypeError)
	return typeErr
}

// msgField is Claude's message object or Codex's message string. The object
// is kept raw and decoded only for assistant lines: user lines carry tool
// results, often the bulk of a transcript, and never need decoding.
type msgField struct {
	raw []byte
	str string
}

func (m *msgField) UnmarshalJSON(b []byte) error {
	switch firstByte(b) {
	case '{':
		m.raw = append(m.raw[:0], b...)
	case '"':
		_ = json.Unmarshal(b, &m.str)
	}
	return nil
}

// claude decodes the message object, or returns nil when there is none.
func (m *msgField) claude() *claudeMessage {
	if m.raw == nil {
		return nil
	}
	var cm claudeMessage
	if !decode(m.raw, &cm) {
		return nil
	}
	return &cm
}

// errField is a Claude error code string or a Codex {"message":…} object.
type errField struct {
	code    string
	message string
}

func (e *errField) UnmarshalJSON(b []byte) error {
	switch firstByte(b) {
	case '{':
		var o struct {
			Message string `json:"message"`
		}
		if decode(b, &o) {
			e.message = o.Message
		}
	case '"':
		_ = json.Unmarshal(b, &e.code)
	}
	return nil
}

// contentField is a list of content blocks or, in user messages, a string.
type contentField []contentBlock

func (c *contentField) UnmarshalJSON(b []byte) error {
	switch firstByte(b) {
	case '[':
		var blocks []contentBlock
		if decode(b, &blocks) {
			*c = blocks
		}
	case '"':
		var s string
		if json.Unmarshal(b, &s) == nil {
			*c = contentField{{Type: "text", Text: s}}
		}
	}
	return nil
}

// maxCount caps one token counter; far above any real step, far below
// overflow when thousands of them are added.
const maxCount = 1 << 50

// count is a token counter: any JSON number, clamped to [0, maxCount];
// anything else (string, null, object) leaves it unset.
type count struct {
	v  int64
	ok bool
}

func (n *count) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		*n = count{v: min(max(i, 0), maxCount), ok: true}
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return nil
	}
	if math.IsNaN(f) {
		return nil
	}
	*n = count{v: int64(min(max(f, 0), maxCount)), ok: true}
	return nil
}

// maxMoney caps one reported amount (USD, or a Unix time in resetsAt) so
// sums stay finite.
const maxMoney = 1e15

// money is a non-negative JSON number, capped at maxMoney; anything else
// leaves it unset.
type money struct {
	v  float64
	ok bool
}

func (m *money) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(b)), 64)
	if (err != nil && !isRangeErr(err)) || math.IsNaN(f) || f < 0 {
		return nil
	}
	*m = money{v: min(f, maxMoney), ok: true}
	return nil
}

func (m money) ptr() *float64 {
	if !m.ok {
		return nil
	}
	v := m.v
	return &v
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}
