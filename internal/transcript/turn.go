package transcript

import (
	"bytes"
	"encoding/json"
	"strings"
)

// TurnMark is what one line of an agent's output says about its turn.
type TurnMark int

const (
	// TurnNone: the line says nothing about the turn (plain text, a keep-alive,
	// a rate-limit notice, an unknown event).
	TurnNone TurnMark = iota
	// TurnActive: the agent is working on a turn (it started one, the model
	// answered, a tool ran).
	TurnActive
	// TurnEnded: the agent ended its turn: Claude Code's and Gemini CLI's
	// `result`, Codex's `turn.completed` or `turn.failed`.
	TurnEnded
)

// ClassifyTurnLine reads one line of output (without its newline). An agent
// whose last TurnActive line came before a TurnEnded line has finished its
// turn, whatever its process still does (Claude Code stays alive on a
// background Bash job after its result).
func ClassifyTurnLine(line []byte) TurnMark {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return TurnNone
	}
	var ev struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return TurnNone
	}
	switch ev.Type {
	case "result", "turn.completed", "turn.failed":
		return TurnEnded
	case "system":
		// Claude Code's init starts a turn; its other system lines
		// (hooks, compaction, notices) may come after the result.
		if ev.Subtype == "init" {
			return TurnActive
		}
		return TurnNone
	case "assistant", "user", "stream_event", // Claude Code
		"thread.started", "turn.started", "item.started", "item.updated", "item.completed", // Codex
		"init", "message", "tool_use", "tool_result": // Gemini CLI
		return TurnActive
	}
	if strings.HasPrefix(ev.Type, "item.") {
		return TurnActive
	}
	return TurnNone
}
