package transcript

// The lenient decoding of agents' JSON, for readers of agents' files
// outside this package (the session files in internal/agent): the same
// rules as the output parser's, so a counter means the same wherever it
// is read.

// Decode unmarshals one JSON line of an agent's file into v, tolerating
// fields of unexpected types (they are skipped, the rest is filled). It
// reports false only for a line that is not JSON.
func Decode(line []byte, v any) bool { return decode(line, v) }

// Count is a token counter in an agent's JSON: any number, clamped to
// [0, 2^50]; anything else (a string, null, an object) leaves it 0.
type Count struct{ c count }

// UnmarshalJSON never fails; see [Count].
func (n *Count) UnmarshalJSON(b []byte) error { return n.c.UnmarshalJSON(b) }

// Value is the counter, 0 when it was not a number.
func (n Count) Value() int64 { return n.c.v }

// OpenAIUsage is an OpenAI-style usage object (Codex's): input_tokens
// include cache reads and writes, output_tokens include reasoning.
type OpenAIUsage struct{ f usageFields }

// UnmarshalJSON never fails on a well-formed value; fields of unexpected
// types are skipped, as by [Decode].
func (o *OpenAIUsage) UnmarshalJSON(b []byte) error {
	decode(b, &o.f)
	return nil
}

// Usage converts the counters to loopd's [Usage]: cache reads and writes
// are taken out of InputTokens, so it means the same for every agent.
func (o *OpenAIUsage) Usage() Usage { return o.f.openAI() }

// Add adds v's token counts to u (saturating); the reported cost is left
// as it is.
func (u *Usage) Add(v Usage) { u.add(v) }

// Since is the growth of a cumulative total u over an earlier total
// before, field by field, never negative (a restated total may shrink).
func (u Usage) Since(before Usage) Usage { return maxUsage(u.minus(before), Usage{}) }
