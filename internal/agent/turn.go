package agent

import (
	"bytes"
	"encoding/json"

	"github.com/loopd/loopd/internal/transcript"
)

// ClassifyTurnLine reads one line of output (without its newline) and
// says what it tells of the agent's turn, whichever agent printed it
// (each agent's Turn). An agent whose last TurnActive line came before a
// TurnEnded line has finished its turn, whatever its process still does
// (Claude Code stays alive on a background Bash job after its result).
func ClassifyTurnLine(line []byte) transcript.TurnMark {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return transcript.TurnNone
	}
	var ev struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return transcript.TurnNone
	}
	// No two agents' lines of one type disagree, so the first that knows
	// the type says it.
	for _, a := range all {
		if a.Turn == nil {
			continue
		}
		if m := a.Turn(ev.Type, ev.Subtype); m != transcript.TurnNone {
			return m
		}
	}
	return transcript.TurnNone
}
