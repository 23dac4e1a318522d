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

// Type names of the recognised dialects. A JSON line of any other type is
// plain text.
var (
	claudeTypes = map[string]bool{
		"system": true, "assistant": true, "user": true, "result": true,
		"rate_limit_event": true, "stream_event": true, "tool_progress": true,
		"tool_use_summary": true, "auth_status": true, "keep_alive": true,
		"control_request": true, "control_response": true,
		"control_cancel_request": true,
	}
	codexTypes = map[string]bool{
		"thread.started": true, "turn.started": true, "turn.completed": true,
		"turn.failed": true, "item.started": true, "item.updated": true,
		"item.completed": true, "item.plan.delta": true,
		"request_user_input": true, "error": true,
	}
	// geminiTypes are Gemini CLI's stream-json types. "result", "error" and
	// "message" are shared with other dialects: they are Gemini's only
	// after its "init" line (or, for a result, when it carries stats).
	geminiTypes = map[string]bool{
		"init": true, "message": true, "tool_use": true, "tool_result": true,
		"error": true, "result": true,
	}
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

func (s *state) claudeEvent(ev *event) {
	if ev.SessionID != "" {
		s.sessionID = ev.SessionID
	}
	switch ev.Type {
	case "system":
		if ev.Subtype == "init" && ev.Model != "" {
			s.initModel = ev.Model
		}
	case "assistant":
		s.claudeAssistant(ev)
	case "result":
		s.claudeResult(ev)
	case "rate_limit_event":
		s.claudeRateLimit(ev.RateLimitInfo)
	case "stream_event":
		s.claudeStreamEvent(ev)
	}
}

// claudeStreamEvent reads the usage of partial-message events
// (--include-partial-messages). message_delta carries a message's final
// usage as soon as the API sent it, before (and whether or not) Claude Code
// prints a result: a step killed mid-turn is counted from these. They merge
// with the assistant lines of the same message id, keeping the largest of
// each counter, so nothing is counted twice.
func (s *state) claudeStreamEvent(ev *event) {
	se := ev.Event
	if se == nil {
		return
	}
	parent := ""
	if ev.ParentToolUseID != nil {
		parent = *ev.ParentToolUseID
	}
	switch se.Type {
	case "message_start":
		if se.Message == nil {
			return
		}
		id := se.Message.ID
		if id == "" {
			id = ev.APIMessageID
		}
		s.streamIDs[parent] = id
		if se.Message.Usage != nil && id != "" {
			s.usageFound = true
			s.assistantUsage(id, se.Message.Usage.anthropic())
		}
	case "message_delta":
		id := ev.APIMessageID
		if id == "" {
			id = s.streamIDs[parent]
		}
		if se.Usage != nil && id != "" {
			s.usageFound = true
			s.assistantUsage(id, se.Usage.anthropic())
		}
	}
}

func (s *state) claudeAssistant(ev *event) {
	msg := ev.Message.claude()
	if msg == nil {
		return
	}
	if msg.Model != "" && msg.Model != "<synthetic>" && s.assistantModel == "" {
		s.assistantModel = msg.Model
	}
	if msg.Usage != nil {
		s.usageFound = true
		s.assistantUsage(msg.ID, msg.Usage.anthropic())
	}
	var texts []string
	for _, blk := range msg.Content {
		if blk.Type == "text" && blk.Text != "" {
			texts = append(texts, blk.Text)
		}
	}
	text := strings.Join(texts, "\n")
	// A sub-agent's words (parent_tool_use_id set) are not the step's answer.
	if text != "" && (ev.ParentToolUseID == nil || *ev.ParentToolUseID == "") {
		s.setFinal(text)
	}
	// Claude Code reports a usage limit as a synthetic assistant message
	// with "error":"rate_limit" before its result line; keep it so a step
	// killed before the result still reports the limit.
	// Claude Code also tags a plain 429 of an API key "rate_limit"
	// ("API Error: Request rejected (429) · Rate limited"): that is the
	// API's trouble, not a usage limit, unless its words or a rejected
	// rate_limit_event say so.
	if (ev.Error.code == "rate_limit" || msg.Model == "<synthetic>") && (isUsageLimitText(text) || (ev.Error.code == "rate_limit" && s.rlEvent)) {
		s.limitFromText(text)
	}
}

// assistantUsage adds one assistant line's usage, once per message id.
func (s *state) assistantUsage(id string, u Usage) {
	if id == "" {
		s.pending.add(u)
		return
	}
	if e, ok := s.ids[id]; ok {
		if e.gen != s.gen {
			return // already covered by a result
		}
		// Copies of one message normally repeat the same usage; when a
		// streamed copy carries a partial count, keep the largest.
		m := maxUsage(e.usage, u)
		s.pending.add(m.minus(e.usage))
		s.ids[id] = idEntry{usage: m, gen: e.gen}
		return
	}
	if len(s.idRing) < maxIDs {
		s.idRing = append(s.idRing, id)
	} else {
		delete(s.ids, s.idRing[s.idNext])
		s.idRing[s.idNext] = id
		s.idNext = (s.idNext + 1) % maxIDs
	}
	s.ids[id] = idEntry{usage: u, gen: s.gen}
	s.pending.add(u)
}

func (s *state) claudeResult(ev *event) {
	s.resultSeen = true
	i := slices.IndexFunc(s.sessions, func(t sessionTotal) bool { return t.id == ev.SessionID })
	if i < 0 {
		if len(s.sessions) == maxSessions {
			s.folded.usage.add(s.sessions[0].usage)
			s.folded.cost = addCost(s.folded.cost, s.sessions[0].cost)
			s.sessions = slices.Delete(s.sessions, 0, 1)
		}
		s.sessions = append(s.sessions, sessionTotal{id: ev.SessionID})
		i = len(s.sessions) - 1
	}
	t := &s.sessions[i]
	if ev.Usage != nil {
		// Authoritative for the run, and a restatement of the session's
		// running total: replace, do not add.
		s.usageFound = true
		t.usage = ev.Usage.anthropic()
		t.cost = ev.TotalCostUSD.ptr()
	} else {
		t.usage.add(s.pending)
		if ev.TotalCostUSD.ok {
			t.cost = ev.TotalCostUSD.ptr()
		}
	}
	s.pending = Usage{}
	s.gen++
	s.apiTrouble = false

	text := ""
	if ev.Result != nil {
		text = *ev.Result
	}
	if text != "" {
		s.setFinal(text)
	}
	s.isError = ev.IsError || strings.HasPrefix(ev.Subtype, "error")
	if !s.isError {
		s.errorText = ""
		s.clearLimit() // the run went through after all
		return
	}
	why := strings.Join(ev.Errors, "; ")
	if why == "" {
		why = text
	}
	if why == "" {
		why = ev.Subtype
	}
	if why == "" {
		why = "error"
	}
	s.errorText = firstBytes(why, maxErrorText)
	// A 429 is a usage limit only when Claude Code says so (its words, or
	// a rejected rate_limit_event of a subscription); a plain 429 of an API
	// key is the API's trouble, like a 5xx or a lost connection.
	status := ev.APIErrorStatus.v
	switch {
	case isUsageLimitText(why) || (status == 429 && s.rl != nil):
		s.limitFromText(why)
	case ev.TerminalReason == "api_error" && (status == 0 || status == 408 || status == 429 || status >= 500):
		s.apiTrouble = true
	}
}

func (s *state) claudeRateLimit(info *rateLimitRaw) {
	if info == nil {
		return
	}
	switch strings.ToLower(info.Status) {
	case "rejected":
		rl := &RateLimit{ResetsAt: unixTime(info.ResetsAt), Kind: info.RateLimitType}
		if s.rl != nil {
			rl.Message = s.rl.Message
			if rl.ResetsAt.IsZero() {
				rl.ResetsAt = s.rl.ResetsAt
			}
		}
		s.rl, s.rlEvent = rl, true
	case "allowed", "allowed_warning":
		// Requests go through again; a warning is not a rejection.
		s.clearLimit()
	}
}

func (s *state) codexEvent(ev *event) {
	switch ev.Type {
	case "thread.started":
		s.codexNewThread()
		if ev.ThreadID != "" {
			s.sessionID = ev.ThreadID
			if !slices.Contains(s.threads, ev.ThreadID) && len(s.threads) < maxThreads {
				s.threads = append(s.threads, ev.ThreadID)
			}
		}
	case "turn.completed":
		s.resultSeen = true
		s.isError = false
		s.errorText = ""
		s.clearLimit()
		if ev.Usage != nil {
			s.codexTotal(ev.Usage)
		}
	case "turn.failed":
		s.resultSeen = true
		s.isError = true
		why := ev.Error.message
		if why == "" {
			why = "turn failed"
		}
		s.errorText = firstBytes(why, maxErrorText)
		if isUsageLimitText(why) {
			s.limitFromText(why)
		}
		if ev.Usage != nil {
			s.codexTotal(ev.Usage)
		}
	case "error":
		// Also used for transient notices (reconnecting…); only turn.failed
		// marks the step as failed. The newest error is the agent's last
		// word on what went wrong.
		if ev.Message.str != "" {
			s.errorText = firstBytes(ev.Message.str, maxErrorText)
		}
		if isReconnectNotice(ev.Message.str) {
			s.reconnects++
		}
		if isUsageLimitText(ev.Message.str) {
			s.limitFromText(ev.Message.str)
		}
	case "item.started", "item.completed":
		// Work goes on: a reconnect notice before it was a passing trouble.
		if isReconnectNotice(s.errorText) {
			s.errorText = ""
		}
		if ev.Type == "item.completed" && ev.Item != nil && ev.Item.Type == "agent_message" && ev.Item.Text != "" {
			s.setFinal(ev.Item.Text)
		}
	}
}

func (s *state) legacyEvent(m *legacyMsg) {
	switch m.Type {
	case "session_configured":
		s.codexNewThread()
		if m.SessionID != "" {
			s.sessionID = m.SessionID
		}
		if m.Model != "" {
			s.codexModel = m.Model
		}
	case "agent_message":
		if m.Message != "" {
			s.setFinal(m.Message)
		}
	case "task_complete":
		s.resultSeen = true
		s.isError = false
		s.errorText = ""
		s.clearLimit()
		if m.LastAgentMessage != "" {
			s.setFinal(m.LastAgentMessage)
		}
	case "token_count":
		switch {
		case m.Info != nil && m.Info.Total != nil:
			s.codexTotal(m.Info.Total) // cumulative: replaces
		case m.Info != nil && m.Info.Last != nil:
			s.usageFound = true
			s.codexDone.add(m.Info.Last.openAI())
		case m.InputTokens.ok || m.OutputTokens.ok:
			// The oldest envelope: one event per model request.
			s.usageFound = true
			s.codexDone.add(m.usageFields.openAI())
		}
	case "error":
		s.errorText = firstBytes(m.Message, maxErrorText)
		if isUsageLimitText(m.Message) {
			s.limitFromText(m.Message)
		}
	}
}

// codexTotal records a thread's running total, replacing the previous one.
func (s *state) codexTotal(f *usageFields) {
	s.usageFound = true
	u := f.openAI()
	s.codexCur = &u
}

// codexNewThread closes the current thread's total.
func (s *state) codexNewThread() {
	if s.codexCur != nil {
		s.codexDone.add(*s.codexCur)
		s.codexCur = nil
	}
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
