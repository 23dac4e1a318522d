package transcript

// TurnMark is what one line of an agent's output says about its turn.
// Which lines say what is each agent's own (agent.ClassifyTurnLine).
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
