package transcript

import "slices"

// Codex's dialect: `codex exec --json` (thread.started, turn.*, item.*,
// error) and the older {"id":…,"msg":{…}} envelope. How the preset runs
// it, and its session files, are in internal/agent (codex.go).

// codexTypes are Codex's exec --json line types.
var codexTypes = map[string]bool{
	"thread.started": true, "turn.started": true, "turn.completed": true,
	"turn.failed": true, "item.started": true, "item.updated": true,
	"item.completed": true, "item.plan.delta": true,
	"request_user_input": true, "error": true,
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
