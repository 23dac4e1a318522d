package transcript

import (
	"slices"
	"strings"
)

// Claude Code's dialect: `claude -p --output-format stream-json --verbose
// --include-partial-messages` (system, assistant, user, result,
// rate_limit_event, stream_event, …). How the preset runs it is in
// internal/agent (claude.go).

// claudeTypes are Claude Code's stream-json line types.
var claudeTypes = map[string]bool{
	"system": true, "assistant": true, "user": true, "result": true,
	"rate_limit_event": true, "stream_event": true, "tool_progress": true,
	"tool_use_summary": true, "auth_status": true, "keep_alive": true,
	"control_request": true, "control_response": true,
	"control_cancel_request": true,
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
