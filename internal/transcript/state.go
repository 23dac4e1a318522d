package transcript

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

const (
	// maxIDs bounds the remembered Claude message ids. The lines of one
	// message are printed back to back, so a window of a few thousand
	// distinct ids is far more than de-duplication needs.
	maxIDs = 4096
	// maxSessions bounds the per-session_id result totals; older ones are
	// folded into one sum (a later result of a folded session then adds
	// instead of replacing, which only pathological output can cause).
	maxSessions = 256
)

// maxThreads bounds the Codex thread ids remembered for reading their
// session files.
const maxThreads = 16

// sessionTotal is the usage a Claude result reported for one session_id.
type sessionTotal struct {
	id    string
	usage Usage
	cost  *float64
}

// idEntry remembers what one Claude message.id already contributed, and in
// which generation (results seen so far) it did.
type idEntry struct {
	usage Usage
	gen   uint64
}

// state is everything learned from complete lines. It is separate from the
// line buffer so Result can apply a pending line to a clone.
type state struct {
	now func() time.Time

	claude, codex, generic, gemini bool
	usageFound                     bool

	// Claude accounting.
	sessions []sessionTotal // in order of first result, for a stable sum
	folded   sessionTotal   // sessions pushed out of the bounded list
	pending  Usage          // assistant usage since the last result
	ids      map[string]idEntry
	idRing   []string // insertion order, for eviction
	idNext   int
	gen      uint64

	// streamIDs is the message id of the latest message_start per
	// parent_tool_use_id ("" for the main agent), for the message_delta
	// lines of older versions that carry no api_message_id.
	streamIDs map[string]string

	// Codex accounting.
	codexDone  Usage  // closed threads and per-request legacy counts
	codexCur   *Usage // running total of the current thread
	threads    []string
	reconnects int

	// Gemini accounting: results add up (one per CLI process).
	geminiUsage Usage
	geminiText  tail // the assistant message being streamed

	// Generic accounting.
	genericUsage Usage
	genericCost  float64
	genericPaid  bool

	initModel, assistantModel, codexModel string

	final    string
	finalSet bool
	tail     tail

	resultSeen bool
	isError    bool
	errorText  string
	rl         *RateLimit
	rlEvent    bool // rl came from a rate_limit_event: its reset is exact
	apiTrouble bool // the model API failed the turn (5xx, overload, plain 429, lost connection)
	sessionID  string
	oversized  int
}

func newState(now func() time.Time) *state {
	return &state{
		now:        now,
		ids:        make(map[string]idEntry),
		streamIDs:  make(map[string]string),
		tail:       tail{max: maxMessage},
		geminiText: tail{max: maxMessage},
	}
}

func (s *state) clone() *state {
	c := *s
	c.sessions = slices.Clone(s.sessions)
	c.ids = maps.Clone(s.ids)
	c.idRing = slices.Clone(s.idRing)
	c.tail = s.tail.clone()
	c.geminiText = s.geminiText.clone()
	c.streamIDs = maps.Clone(s.streamIDs)
	c.threads = slices.Clone(s.threads)
	if s.codexCur != nil {
		u := *s.codexCur
		c.codexCur = &u
	}
	if s.rl != nil {
		rl := *s.rl
		c.rl = &rl
	}
	if s.folded.cost != nil {
		v := *s.folded.cost
		c.folded.cost = &v
	}
	return &c
}

// line handles one complete line that starts with '{'.
func (s *state) line(b []byte) {
	var ev event
	if !decode(b, &ev) || !s.dispatch(&ev) {
		s.tail.write(b)
		s.tail.write(newline)
	}
}

// dispatch applies a decoded line and reports whether it was recognised.
// Each dialect's line types and handlers are in a file of its own
// (claude.go, codex.go, gemini.go); a JSON line of any other type is
// plain text.
func (s *state) dispatch(ev *event) bool {
	switch {
	case ev.Type == "init" || (s.gemini && geminiTypes[ev.Type]) || (ev.Type == "result" && ev.Stats != nil):
		s.gemini = true
		s.geminiEvent(ev)
	case claudeTypes[ev.Type]:
		s.claude = true
		s.claudeEvent(ev)
	case codexTypes[ev.Type]:
		s.codex = true
		s.codexEvent(ev)
	case ev.Type == "usage":
		s.generic = true
		s.usageFound = true
		s.genericUsage.add(ev.usageFields.anthropic())
		if ev.CostUSD.ok {
			s.genericCost += ev.CostUSD.v
			s.genericPaid = true
		}
	case ev.Type == "" && ev.Msg != nil && ev.Msg.Type != "":
		s.codex = true
		s.legacyEvent(ev.Msg)
	default:
		return false
	}
	return true
}

// limitFromText records a usage limit described in the agent's words. A
// rate_limit_event's Unix reset and window beat what prose says; otherwise
// the newest notice wins, keeping older details it lacks.
func (s *state) limitFromText(text string) {
	rl := limitFromText(text, s.now())
	if old := s.rl; old != nil {
		if s.rlEvent {
			if !old.ResetsAt.IsZero() {
				rl.ResetsAt = old.ResetsAt
			}
			rl.Kind = old.Kind
		}
		if rl.ResetsAt.IsZero() {
			rl.ResetsAt = old.ResetsAt
		}
		if rl.Message == "" {
			rl.Message = old.Message
		}
	}
	s.rl = rl
}

func (s *state) clearLimit() {
	s.rl, s.rlEvent = nil, false
}

func (s *state) setFinal(text string) {
	s.final = lastBytes(text, maxMessage)
	s.finalSet = true
}

func (s *state) result() Result {
	r := Result{
		Format:         FormatText,
		UsageFound:     s.usageFound,
		ResultSeen:     s.resultSeen,
		IsError:        s.isError,
		ErrorText:      s.errorText,
		SessionID:      s.sessionID,
		OversizedLines: s.oversized,
	}
	switch {
	case s.claude:
		r.Format = FormatClaude
	case s.codex:
		r.Format = FormatCodex
	case s.gemini:
		r.Format = FormatGemini
	case s.generic:
		r.Format = FormatGeneric
	}

	u := s.folded.usage
	var cost float64
	paid := false
	if s.folded.cost != nil {
		cost, paid = *s.folded.cost, true
	}
	for _, t := range s.sessions {
		u.add(t.usage)
		if t.cost != nil {
			cost += *t.cost
			paid = true
		}
	}
	u.add(s.pending)
	u.add(s.codexDone)
	if s.codexCur != nil {
		u.add(*s.codexCur)
	}
	u.add(s.geminiUsage)
	u.add(s.genericUsage)
	if s.genericPaid {
		cost += s.genericCost
		paid = true
	}
	if paid {
		u.ReportedCostUSD = &cost
	}
	r.Usage = u

	r.Model = cmp3(s.initModel, s.assistantModel, s.codexModel)
	r.Reconnects = s.reconnects
	r.CodexThreads = slices.Clone(s.threads)
	switch {
	case s.geminiText.total > 0:
		r.FinalMessage = s.geminiText.String() // a message still streaming
	case s.finalSet:
		r.FinalMessage = s.final
	default:
		r.FinalMessage = s.tail.String()
	}
	switch {
	case s.rl != nil:
		rl := *s.rl
		r.RateLimit = &rl
		// The step's error is the limit, not the API being unavailable.
		r.APIError = false
		return r
	case !s.resultSeen:
		// A CLI in plain-text mode (or a wrapper) prints the limit notice as
		// its last line, e.g. "Claude AI usage limit reached|1755615600".
		if line := lastLine(s.tail.String()); isLimitNoticeLine(line) {
			r.RateLimit = limitFromText(line, s.now())
			return r
		}
	}
	// Only a structured agent's own error report is trusted for this: the
	// plain text of an arbitrary command may say anything.
	r.APIError = s.apiTrouble || ((s.isError || !s.resultSeen) && s.errorText != "" && isAPITroubleText(s.errorText))
	return r
}

func cmp3(a, b, c string) string {
	switch {
	case a != "":
		return a
	case b != "":
		return b
	}
	return c
}

// lastLine returns the last non-blank line of s, trimmed.
func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	if i := strings.LastIndexAny(s, "\r\n"); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// unixTime converts a Unix timestamp in seconds (or milliseconds, when it is
// that large) to a time; implausible values give the zero time.
func unixTime(m money) time.Time {
	if !m.ok || m.v <= 0 {
		return time.Time{}
	}
	sec := m.v
	if sec > 1e12 {
		sec /= 1000
	}
	if sec > 1e11 { // beyond year 5000: not a reset time
		return time.Time{}
	}
	whole, frac := math.Modf(sec)
	return time.Unix(int64(whole), int64(frac*1e9)).UTC()
}

func (u *Usage) add(v Usage) {
	u.InputTokens = satAdd(u.InputTokens, v.InputTokens)
	u.OutputTokens = satAdd(u.OutputTokens, v.OutputTokens)
	u.CacheReadTokens = satAdd(u.CacheReadTokens, v.CacheReadTokens)
	u.CacheWriteTokens = satAdd(u.CacheWriteTokens, v.CacheWriteTokens)
	u.CacheWrite1hTokens = satAdd(u.CacheWrite1hTokens, v.CacheWrite1hTokens)
	u.ReasoningTokens = satAdd(u.ReasoningTokens, v.ReasoningTokens)
}

func (u Usage) minus(v Usage) Usage {
	return Usage{
		InputTokens:        u.InputTokens - v.InputTokens,
		OutputTokens:       u.OutputTokens - v.OutputTokens,
		CacheReadTokens:    u.CacheReadTokens - v.CacheReadTokens,
		CacheWriteTokens:   u.CacheWriteTokens - v.CacheWriteTokens,
		CacheWrite1hTokens: u.CacheWrite1hTokens - v.CacheWrite1hTokens,
		ReasoningTokens:    u.ReasoningTokens - v.ReasoningTokens,
	}
}

func maxUsage(a, b Usage) Usage {
	return Usage{
		InputTokens:        max(a.InputTokens, b.InputTokens),
		OutputTokens:       max(a.OutputTokens, b.OutputTokens),
		CacheReadTokens:    max(a.CacheReadTokens, b.CacheReadTokens),
		CacheWriteTokens:   max(a.CacheWriteTokens, b.CacheWriteTokens),
		CacheWrite1hTokens: max(a.CacheWrite1hTokens, b.CacheWrite1hTokens),
		ReasoningTokens:    max(a.ReasoningTokens, b.ReasoningTokens),
	}
}

// addCost adds two optional costs; nil means none was reported.
func addCost(a, b *float64) *float64 {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	v := *a + *b
	return &v
}

// satAdd adds non-negative counters without overflowing.
func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
