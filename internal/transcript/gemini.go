package transcript

// geminiTypes are Gemini CLI's stream-json types. "result", "error" and
// "message" are shared with other dialects: they are Gemini's only
// after its "init" line (or, for a result, when it carries stats).
var geminiTypes = map[string]bool{
	"init": true, "message": true, "tool_use": true, "tool_result": true,
	"error": true, "result": true,
}

// geminiEvent applies one line of Gemini CLI's `--output-format
// stream-json`: init, message (assistant text as deltas), tool_use,
// tool_result, error, result{status, error, stats}.
//
// Usage comes only from result.stats, which sums the requests the CLI got
// an answer to; results of several CLI processes (a wrapper) add up. A
// Gemini step killed before its result line reports no usage here: the
// caller reads the CLI's session file for it (agent.GeminiSessionUsage).
func (s *state) geminiEvent(ev *event) {
	if ev.SessionID != "" {
		s.sessionID = ev.SessionID
	}
	switch ev.Type {
	case "init":
		if ev.Model != "" {
			s.initModel = ev.Model
		}
	case "message":
		if ev.Role == "assistant" {
			s.geminiText.write([]byte(ev.Content))
			return
		}
		s.flushGeminiText()
	case "tool_use", "tool_result":
		s.flushGeminiText()
	case "error":
		if ev.Message.str != "" && ev.Severity != "warning" {
			s.errorText = firstBytes(ev.Message.str, maxErrorText)
		}
	case "result":
		s.flushGeminiText()
		s.resultSeen = true
		if ev.Stats != nil {
			s.usageFound = true
			s.geminiUsage.add(ev.Stats.usage())
		}
		s.isError = ev.Status != "" && ev.Status != "success"
		if !s.isError {
			s.errorText = ""
			s.clearLimit()
			return
		}
		// A stream the CLI found broken (no finish reason, an empty or
		// malformed response) ends in a result with no error of its own:
		// the error line just before it said why.
		why := ev.Error.message
		if why == "" {
			why = s.errorText
		}
		if why == "" {
			why = "error"
		}
		s.errorText = firstBytes(why, maxErrorText)
		if isUsageLimitText(why) || isQuotaText(why) {
			s.limitFromText(why)
		}
	}
}

// flushGeminiText ends the assistant message being streamed: it becomes
// the final message so far.
func (s *state) flushGeminiText() {
	if s.geminiText.total == 0 {
		return
	}
	s.setFinal(s.geminiText.String())
	s.geminiText = tail{max: maxMessage}
}
