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
)

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

	claude, codex, generic bool
	usageFound             bool

	// Claude accounting.
	sessions []sessionTotal // in order of first result, for a stable sum
	folded   sessionTotal   // sessions pushed out of the bounded list
	pending  Usage          // assistant usage since the last result
	ids      map[string]idEntry
	idRing   []string // insertion order, for eviction
	idNext   int
	gen      uint64

	// Codex accounting.
	codexDone Usage  // closed threads and per-request legacy counts
	codexCur  *Usage // running total of the current thread

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
	sessionID  string
	oversized  int
}

func newState(now func() time.Time) *state {
	return &state{
		now:  now,
		ids:  make(map[string]idEntry),
		tail: tail{max: maxMessage},
	}
}

func (s *state) clone() *state {
	c := *s
	c.sessions = slices.Clone(s.sessions)
	c.ids = maps.Clone(s.ids)
	c.idRing = slices.Clone(s.idRing)
	c.tail = s.tail.clone()
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
	if ev.Error.code == "rate_limit" || (msg.Model == "<synthetic>" && isUsageLimitText(text)) {
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
	if isUsageLimitText(why) || ev.APIErrorStatus.v == 429 {
		s.limitFromText(why)
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
		// marks the step as failed.
		if s.errorText == "" {
			s.errorText = firstBytes(ev.Message.str, maxErrorText)
		}
		if isUsageLimitText(ev.Message.str) {
			s.limitFromText(ev.Message.str)
		}
	case "item.completed":
		if ev.Item != nil && ev.Item.Type == "agent_message" && ev.Item.Text != "" {
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
	if s.finalSet {
		r.FinalMessage = s.final
	} else {
		r.FinalMessage = s.tail.String()
	}
	switch {
	case s.rl != nil:
		rl := *s.rl
		r.RateLimit = &rl
	case !s.resultSeen:
		// A CLI in plain-text mode (or a wrapper) prints the limit notice as
		// its last line, e.g. "Claude AI usage limit reached|1755615600".
		if line := lastLine(s.tail.String()); isLimitNoticeLine(line) {
			r.RateLimit = limitFromText(line, s.now())
		}
	}
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
}

func (u Usage) minus(v Usage) Usage {
	return Usage{
		InputTokens:        u.InputTokens - v.InputTokens,
		OutputTokens:       u.OutputTokens - v.OutputTokens,
		CacheReadTokens:    u.CacheReadTokens - v.CacheReadTokens,
		CacheWriteTokens:   u.CacheWriteTokens - v.CacheWriteTokens,
		CacheWrite1hTokens: u.CacheWrite1hTokens - v.CacheWrite1hTokens,
	}
}

func maxUsage(a, b Usage) Usage {
	return Usage{
		InputTokens:        max(a.InputTokens, b.InputTokens),
		OutputTokens:       max(a.OutputTokens, b.OutputTokens),
		CacheReadTokens:    max(a.CacheReadTokens, b.CacheReadTokens),
		CacheWriteTokens:   max(a.CacheWriteTokens, b.CacheWriteTokens),
		CacheWrite1hTokens: max(a.CacheWrite1hTokens, b.CacheWrite1hTokens),
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
