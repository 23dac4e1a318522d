package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loopd/loopd/internal/termtext"
)

// Bounds of a rendered transcript. An agent's output can hold megabytes of
// tool results in single lines; the reader wants their gist.
const (
	// renderMaxLine bounds one raw line held while it is written; a longer
	// line is announced, not shown.
	renderMaxLine = 8 << 20
	// resultLines and resultBytes cap a tool result.
	resultLines = 12
	resultBytes = 2 << 10
	// textBytes caps one message's text (the whole answer is in the raw log).
	textBytes = 16 << 10
	// inputBytes caps a tool call's arguments shown inline.
	inputBytes = 300
	// maxRemembered bounds the message ids and tool names remembered.
	maxRemembered = 512
)

// Renderer turns an agent's output, written to it in chunks of any size, into
// a readable transcript written to w: the agent's messages, its tool calls
// with their commands, their results (capped), errors and usage, for Claude
// Code stream-json, Codex `exec --json` and Gemini CLI stream-json. Lines that
// are none of these (plain text, a test runner's output, loopd's own headers)
// are written as they are. Its memory is bounded whatever the output's size.
// Call Flush at the end of the output.
type Renderer struct {
	w      io.Writer
	err    error
	line   []byte // the current line: leading blanks, or a JSON line being written
	inText bool   // the current line is plain text, written as it comes
	head   []byte // the first bytes of the current plain-text line
	skip   int    // bytes of an oversized line being skipped; 0 when none

	streamed   bool              // Claude partial messages: usage comes with message_delta
	usageShown map[string]bool   // Claude message ids whose usage was shown
	tools      map[string]string // tool call ids → names (Claude), for results
	order      []string          // insertion order of usageShown and tools keys, for eviction
	delta      strings.Builder   // Gemini assistant text arriving in deltas
	lastText   string            // Claude's last top-level assistant text (capped), which its result repeats
}

// NewRenderer returns a Renderer writing to w.
func NewRenderer(w io.Writer) *Renderer {
	return &Renderer{w: w, usageShown: map[string]bool{}, tools: map[string]string{}}
}

// Write renders the complete lines in b and holds the rest. It fails only
// when writing to the underlying writer does.
func (r *Renderer) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 && r.err == nil {
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		r.hold(seg)
		if i < 0 {
			break
		}
		r.endLine()
		b = b[i+1:]
	}
	return n, r.err
}

// Flush renders an unterminated last line and any text still held.
func (r *Renderer) Flush() error {
	if len(r.line) > 0 || r.skip > 0 {
		r.endLine()
	}
	r.inText = false
	r.flushDelta()
	return r.err
}

func (r *Renderer) hold(b []byte) {
	if r.inText {
		r.write(b) // plain text is shown as it comes, half lines too
		return
	}
	if r.skip == 0 && (len(r.line) == 0 || isBlankLine(r.line)) {
		// Still deciding: a line is JSON when it starts with '{'.
		i := bytes.IndexFunc(b, func(c rune) bool { return c != ' ' && c != '\t' && c != '\r' })
		if i >= 0 && b[i] != '{' {
			r.flushDelta()
			r.inText = true
			r.head = append(append(r.head[:0], r.line...), b[:min(len(b), len(stepHeader))]...)
			r.write(r.line)
			r.line = r.line[:0]
			r.write(b)
			return
		}
	}
	switch {
	case r.skip > 0:
		r.skip += len(b)
	case len(r.line)+len(b) > renderMaxLine:
		r.skip = len(r.line) + len(b)
		r.line = nil
	default:
		r.line = append(r.line, b...)
	}
}

func (r *Renderer) endLine() {
	if r.inText {
		r.inText = false
		r.write([]byte{'\n'})
		if bytes.HasPrefix(bytes.TrimLeft(r.head, " \t"), []byte(stepHeader)) {
			r.newStep()
		}
		return
	}
	line := r.line
	r.line = r.line[:0]
	if r.skip > 0 {
		r.flushDelta()
		r.printf("[a line of %d bytes, not shown; loopctl logs --raw prints it]\n", r.skip)
		r.skip = 0
		return
	}
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' || !r.event(trimmed) {
		r.flushDelta()
		r.write(line)
		r.write([]byte{'\n'})
	}
	if cap(r.line) > 64<<10 {
		r.line = nil // release a large buffer
	}
}

// stepHeader starts the line `loopctl logs` prints before each step's
// output; what the renderer learned about one agent does not carry over to
// the next step.
const stepHeader = "==> #"

func (r *Renderer) newStep() {
	r.streamed, r.lastText = false, ""
	clear(r.usageShown)
	clear(r.tools)
	r.order = r.order[:0]
}

func isBlankLine(b []byte) bool { return len(bytes.Trim(b, " \t\r")) == 0 }

func (r *Renderer) write(b []byte) {
	if r.err == nil {
		_, r.err = r.w.Write(b)
	}
}

// printf writes a line built from what the renderer decoded: its string
// arguments are text from JSON strings, where a control character is an
// escape (\u001b, \u0007, \r) that the log file shows as six harmless
// bytes and decoding makes real. They are quoted (termtext.QuoteLines:
// line feeds and tabs stay), so that an agent's text, a command or a
// tool's output cannot erase lines, retitle the terminal or hide what
// follows. Plain-text lines are the file's own bytes and go out by write.
func (r *Renderer) printf(format string, args ...any) {
	if r.err != nil {
		return
	}
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = termtext.QuoteLines(s)
		}
	}
	_, r.err = fmt.Fprintf(r.w, format, args...)
}

// renderEvent is the union of the line shapes rendered.
type renderEvent struct {
	Type     string             `json:"type"`
	Subtype  string             `json:"subtype"`
	Model    string             `json:"model"`
	Session  string             `json:"session_id"`
	Cwd      string             `json:"cwd"`
	Version  string             `json:"claude_code_version"`
	Message  json.RawMessage    `json:"message"`
	Parent   *string            `json:"parent_tool_use_id"`
	Event    *renderStreamEvent `json:"event"`
	IsError  bool               `json:"is_error"`
	Result   *string            `json:"result"`
	Errors   []string           `json:"errors"`
	Cost     *float64           `json:"total_cost_usd"`
	Turns    int                `json:"num_turns"`
	Duration int64              `json:"duration_ms"`
	Usage    *renderUsage       `json:"usage"`
	RateInfo *struct {
		Status   string  `json:"status"`
		ResetsAt float64 `json:"resetsAt"`
		Type     string  `json:"rateLimitType"`
	} `json:"rate_limit_info"`
	// Codex.
	Thread string          `json:"thread_id"`
	Item   *codexItemShown `json:"item"`
	Error  json.RawMessage `json:"error"`
	// Gemini.
	Role       string             `json:"role"`
	Content    json.RawMessage    `json:"content"`
	Delta      bool               `json:"delta"`
	ToolName   string             `json:"tool_name"`
	ToolID     string             `json:"tool_id"`
	Parameters json.RawMessage    `json:"parameters"`
	Status     string             `json:"status"`
	Output     json.RawMessage    `json:"output"`
	Stats      *renderGeminiStats `json:"stats"`
	// Legacy Codex envelope {"id":…,"msg":{…}}.
	Msg *legacyShown `json:"msg"`
	// Generic usage line.
	InputTokens  *int64   `json:"input_tokens"`
	OutputTokens *int64   `json:"output_tokens"`
	CostUSD      *float64 `json:"cost_usd"`
}

type renderStreamEvent struct {
	Type    string       `json:"type"`
	Usage   *renderUsage `json:"usage"`
	Message *struct {
		ID string `json:"id"`
	} `json:"message"`
}

type renderUsage struct {
	Input       int64 `json:"input_tokens"`
	Output      int64 `json:"output_tokens"`
	CacheRead   int64 `json:"cache_read_input_tokens"`
	CacheWrite  int64 `json:"cache_creation_input_tokens"`
	Cached      int64 `json:"cached_input_tokens"`
	CachedWrite int64 `json:"cache_write_input_tokens"`
	Reasoning   int64 `json:"reasoning_output_tokens"`
}

type codexItemShown struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Message  string          `json:"message"`
	Command  string          `json:"command"`
	Output   string          `json:"aggregated_output"`
	ExitCode *int            `json:"exit_code"`
	Status   string          `json:"status"`
	Changes  []codexChange   `json:"changes"`
	Server   string          `json:"server"`
	Tool     string          `json:"tool"`
	Query    string          `json:"query"`
	Items    json.RawMessage `json:"items"`
}

type legacyShown struct {
	Type     string   `json:"type"`
	Message  string   `json:"message"`
	Text     string   `json:"text"`
	Last     string   `json:"last_agent_message"`
	Command  []string `json:"command"`
	Stdout   string   `json:"stdout"`
	Stderr   string   `json:"stderr"`
	ExitCode *int     `json:"exit_code"`
	Model    string   `json:"model"`
	Session  string   `json:"session_id"`
	renderUsage
	Info *struct {
		Last *renderUsage `json:"last_token_usage"`
	} `json:"info"`
}

type codexChange struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

type renderGeminiStats struct {
	Input     int64 `json:"input_tokens"`
	Output    int64 `json:"output_tokens"`
	Cached    int64 `json:"cached"`
	ToolCalls int   `json:"tool_calls"`
	Duration  int64 `json:"duration_ms"`
}

type claudeShown struct {
	ID      string       `json:"id"`
	Model   string       `json:"model"`
	Usage   *renderUsage `json:"usage"`
	Content []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	} `json:"content"`
}

// event renders one JSON line and reports whether it was one it knows.
func (r *Renderer) event(line []byte) bool {
	var ev renderEvent
	if json.Unmarshal(line, &ev) != nil {
		return false
	}
	if ev.Type != "message" || !ev.Delta {
		r.flushDelta()
	}
	switch ev.Type {
	// Claude Code.
	case "system":
		if ev.Subtype == "init" {
			r.printf("── %s\n", joinNonEmpty(" · ", ev.Model, short("session ", ev.Session), ev.Cwd, prefixed("claude ", ev.Version)))
		}
		return true // status and hook notices say nothing to a reader
	case "assistant":
		r.claudeAssistant(ev)
		return true
	case "user":
		r.claudeUser(ev)
		return true
	case "stream_event":
		r.claudeStream(ev)
		return true
	case "result":
		if ev.Stats != nil || ev.Status != "" {
			r.geminiResult(ev)
		} else {
			r.claudeResult(ev)
		}
		return true
	case "rate_limit_event":
		if ev.RateInfo != nil && ev.RateInfo.Status != "allowed" {
			r.printf("! rate limit %s%s\n", ev.RateInfo.Status, prefixed(" · ", ev.RateInfo.Type))
		}
		return true
	case "keep_alive", "tool_progress", "auth_status", "control_request", "control_response", "control_cancel_request", "tool_use_summary":
		return true
	// Codex.
	case "thread.started":
		r.printf("── codex%s\n", prefixed(" · thread ", ev.Thread))
		return true
	case "turn.started":
		return true
	case "item.started", "item.updated", "item.completed":
		r.codexItem(ev.Type, ev.Item)
		return true
	case "turn.completed":
		r.printf("■ turn completed%s\n", usageText(ev.Usage, true))
		return true
	case "turn.failed":
		r.printf("■ turn failed: %s\n", errorText(ev.Error))
		return true
	case "error":
		r.printf("! %s\n", firstNonEmpty(stringOf(ev.Message), errorText(ev.Error)))
		return true
	// Gemini CLI.
	case "init":
		r.printf("── %s\n", joinNonEmpty(" · ", ev.Model, short("session ", ev.Session)))
		return true
	case "message":
		r.geminiMessage(ev)
		return true
	case "tool_use":
		r.toolCall(ev.ToolName, ev.Parameters)
		return true
	case "tool_result":
		text := stringOf(ev.Output)
		if ev.Status != "" && ev.Status != "success" {
			text = firstNonEmpty(text, errorText(ev.Error))
			r.printf("  ! %s\n", ev.Status)
		}
		r.toolResult(text)
		return true
	// loopd's generic usage line.
	case "usage":
		u := renderUsage{}
		if ev.InputTokens != nil {
			u.Input = *ev.InputTokens
		}
		if ev.OutputTokens != nil {
			u.Output = *ev.OutputTokens
		}
		cost := ""
		if ev.CostUSD != nil {
			cost = fmt.Sprintf(" · $%.4f", *ev.CostUSD)
		}
		r.printf("%s%s\n", usageLine(&u, false), cost)
		return true
	}
	if ev.Type == "" && ev.Msg != nil && ev.Msg.Type != "" {
		r.legacy(ev.Msg)
		return true
	}
	// Any other JSON is the agent's own: shown as it is.
	return false
}

// legacy renders the event envelope of Codex up to 0.43.
func (r *Renderer) legacy(m *legacyShown) {
	switch m.Type {
	case "session_configured":
		r.printf("── %s\n", joinNonEmpty(" · ", m.Model, short("session ", m.Session)))
	case "agent_message":
		r.text("", m.Message)
	case "agent_reasoning":
		r.text("(reasoning) ", capText(m.Text, inputBytes*2))
	case "exec_command_begin":
		r.printf("$ %s\n", oneLine(strings.Join(m.Command, " ")))
	case "exec_command_end":
		r.toolResult(m.Stdout + m.Stderr)
		if m.ExitCode != nil && *m.ExitCode != 0 {
			r.printf("  ! exit %d\n", *m.ExitCode)
		}
	case "token_count":
		u := &m.renderUsage
		if m.Info != nil {
			if m.Info.Last == nil {
				return // a running total: the per-request one is shown
			}
			u = m.Info.Last
		}
		r.printf("%s\n", usageLine(u, true))
	case "task_complete":
		r.printf("■ task complete\n")
	case "error":
		r.printf("! %s\n", m.Message)
	}
}

func (r *Renderer) claudeAssistant(ev renderEvent) {
	var msg claudeShown
	if json.Unmarshal(ev.Message, &msg) != nil {
		return
	}
	sub := ev.Parent != nil && *ev.Parent != ""
	indent := ""
	if sub {
		indent = "  ┆ " // a sub-agent's words
	}
	for _, c := range msg.Content {
		switch c.Type {
		case "text":
			r.text(indent, c.Text)
			if !sub {
				r.lastText = capText(c.Text, textBytes)
			}
		case "thinking":
			if c.Thinking != "" {
				r.text(indent+"(thinking) ", capText(c.Thinking, inputBytes*2))
			}
		case "tool_use":
			r.remember(r.tools, c.ID, c.Name)
			r.toolCall(c.Name, c.Input)
		}
	}
	if msg.Usage != nil && !r.streamed && msg.ID != "" && !r.usageShown[msg.ID] {
		r.remember(r.usageShown, msg.ID, true)
		r.printf("%s%s\n", indent, usageLine(msg.Usage, false))
	}
}

func (r *Renderer) claudeUser(ev renderEvent) {
	var msg claudeShown
	if json.Unmarshal(ev.Message, &msg) != nil {
		// A prompt (replayed user message): its content is a string.
		var prompt struct {
			Content string `json:"content"`
		}
		if json.Unmarshal(ev.Message, &prompt) == nil {
			r.text("» ", capText(prompt.Content, inputBytes*2))
		}
		return
	}
	for _, c := range msg.Content {
		if c.Type != "tool_result" {
			continue
		}
		if c.IsError {
			r.printf("  ! %s failed\n", firstNonEmpty(r.tools[c.ToolUseID], "tool"))
		}
		r.toolResult(contentText(c.Content))
	}
}

func (r *Renderer) claudeStream(ev renderEvent) {
	if ev.Event == nil {
		return
	}
	switch ev.Event.Type {
	case "message_start":
		r.streamed = true
	case "message_delta":
		// The message's final usage (the assistant lines carry the one
		// from its start, with output tokens not yet counted).
		if ev.Event.Usage != nil {
			r.printf("%s\n", usageLine(ev.Event.Usage, false))
		}
	}
}

func (r *Renderer) claudeResult(ev renderEvent) {
	// The result's text is the final answer, most often the last assistant
	// text again: shown when it says something new.
	if !ev.IsError && ev.Result != nil && strings.TrimSpace(capText(*ev.Result, textBytes)) != strings.TrimSpace(r.lastText) {
		r.text("", *ev.Result)
	}
	r.lastText = ""
	status := firstNonEmpty(ev.Subtype, "done")
	if ev.IsError {
		status = "error"
	}
	var parts []string
	if ev.Turns > 0 {
		parts = append(parts, plural(ev.Turns, "turn"))
	}
	if ev.Cost != nil {
		parts = append(parts, fmt.Sprintf("$%.4f", *ev.Cost))
	}
	r.printf("■ %s%s%s\n", status, prefixed(" · ", strings.Join(parts, " · ")), usageText(ev.Usage, false))
	if ev.IsError {
		why := strings.Join(ev.Errors, "; ")
		if why == "" && ev.Result != nil {
			why = *ev.Result
		}
		if why != "" {
			r.text("! ", capText(why, resultBytes))
		}
	}
}

func (r *Renderer) codexItem(typ string, it *codexItemShown) {
	if it == nil {
		return
	}
	done := typ == "item.completed"
	switch it.Type {
	case "agent_message":
		if done {
			r.text("", it.Text)
		}
	case "reasoning":
		if done && it.Text != "" {
			r.text("(reasoning) ", capText(it.Text, inputBytes*2))
		}
	case "command_execution":
		switch {
		case typ == "item.started":
			r.printf("$ %s\n", oneLine(it.Command))
		case done:
			r.toolResult(it.Output)
			if it.ExitCode != nil && *it.ExitCode != 0 {
				r.printf("  ! exit %d\n", *it.ExitCode)
			}
		}
	case "file_change":
		if done {
			for _, c := range it.Changes {
				r.printf("✎ %s %s\n", c.Kind, c.Path)
			}
		}
	case "mcp_tool_call":
		if typ == "item.started" {
			r.printf("▸ %s.%s\n", it.Server, it.Tool)
		}
	case "web_search":
		if typ == "item.started" {
			r.printf("▸ web search: %s\n", oneLine(it.Query))
		}
	case "error":
		r.printf("! %s\n", firstNonEmpty(it.Message, it.Text))
	}
}

func (r *Renderer) geminiMessage(ev renderEvent) {
	text := stringOf(ev.Content)
	if ev.Role == "user" {
		r.text("» ", capText(text, inputBytes*2))
		return
	}
	if ev.Delta {
		if r.delta.Len() < textBytes {
			r.delta.WriteString(text)
		}
		return
	}
	r.text("", text)
}

func (r *Renderer) geminiResult(ev renderEvent) {
	status := firstNonEmpty(ev.Status, "done")
	usage := ""
	if s := ev.Stats; s != nil {
		usage = fmt.Sprintf(" · %d in (%d cached) · %d out", s.Input, s.Cached, s.Output)
		if s.ToolCalls > 0 {
			usage += " · " + plural(s.ToolCalls, "tool call")
		}
	}
	r.printf("■ %s%s\n", status, usage)
	if msg := errorText(ev.Error); msg != "" {
		r.text("! ", capText(msg, resultBytes))
	}
}

// flushDelta writes the Gemini text gathered from deltas.
func (r *Renderer) flushDelta() {
	if r.delta.Len() == 0 {
		return
	}
	text := r.delta.String()
	r.delta.Reset()
	r.text("", text)
}

// toolCall shows a tool call: a shell command as `$ command`, a file tool
// with its path, others with their arguments, capped.
func (r *Renderer) toolCall(name string, input json.RawMessage) {
	var args map[string]any
	_ = json.Unmarshal(input, &args)
	if cmd, ok := args["command"].(string); ok && cmd != "" {
		note := nonShell(name)
		if bg, _ := args["run_in_background"].(bool); bg {
			note = joinNonEmpty(", ", note, "in the background")
		}
		r.printf("$ %s%s\n", oneLine(capText(cmd, textBytes)), prefixed("    # ", note))
		return
	}
	for _, k := range []string{"file_path", "path", "absolute_path", "pattern", "url", "query"} {
		if v, ok := args[k].(string); ok && v != "" {
			r.printf("▸ %s %s\n", name, oneLine(v))
			return
		}
	}
	compact := strings.TrimSpace(string(input))
	if compact == "" || compact == "{}" || compact == "null" {
		r.printf("▸ %s\n", name)
		return
	}
	var b bytes.Buffer
	if json.Compact(&b, input) == nil {
		compact = b.String()
	}
	r.printf("▸ %s %s\n", name, capText(compact, inputBytes))
}

// nonShell names a tool unless it is the usual shell tool.
func nonShell(name string) string {
	switch name {
	case "Bash", "run_shell_command", "shell", "exec_command", "":
		return ""
	}
	return name
}

// toolResult shows a tool's output indented, capped in lines and bytes.
func (r *Renderer) toolResult(text string) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return
	}
	lines := strings.Split(text, "\n")
	shown, more, size := 0, 0, 0
	for _, l := range lines {
		if shown == resultLines || size+len(l) > resultBytes {
			more++
			continue
		}
		size += len(l)
		shown++
		r.printf("  %s\n", capText(strings.TrimSuffix(l, "\r"), resultBytes))
	}
	if more > 0 {
		r.printf("  … %s\n", plural(more, "more line"))
	}
}

// text writes a message, each line prefixed, capped.
func (r *Renderer) text(prefix, text string) {
	text = strings.TrimRight(capText(text, textBytes), "\n")
	if strings.TrimSpace(text) == "" {
		return
	}
	// Continuation lines of a labelled text line up under its first.
	cont := prefix
	if strings.TrimSpace(prefix) != "┆" {
		cont = strings.Repeat(" ", utf8.RuneCountInString(prefix))
	}
	for l := range strings.SplitSeq(text, "\n") {
		if l == "" {
			r.printf("\n")
		} else {
			r.printf("%s%s\n", prefix, strings.TrimSuffix(l, "\r"))
		}
		prefix = cont
	}
}

// remember adds a key to a bounded map, forgetting the oldest key.
func (r *Renderer) remember(m any, key string, v any) {
	if key == "" {
		return
	}
	switch m := m.(type) {
	case map[string]bool:
		m[key] = v.(bool)
	case map[string]string:
		m[key] = v.(string)
	}
	r.order = append(r.order, key)
	if len(r.order) > 2*maxRemembered {
		for _, old := range r.order[:maxRemembered] {
			delete(r.usageShown, old)
			delete(r.tools, old)
		}
		r.order = append(r.order[:0], r.order[maxRemembered:]...)
	}
}

// usageText is " · 1200 in · 82 out · 500 cache read · 300 cache write",
// with only the counts that are there. OpenAI counts (Codex) include cached
// input in input: they are shown as "in (cached)".
func usageText(u *renderUsage, openAI bool) string {
	if u == nil {
		return ""
	}
	var parts []string
	if openAI || u.Cached > 0 {
		in := fmt.Sprintf("%d in", u.Input)
		if u.Cached > 0 {
			in += fmt.Sprintf(" (%d cached)", u.Cached)
		}
		parts = append(parts, in)
	} else {
		parts = append(parts, fmt.Sprintf("%d in", u.Input))
	}
	out := fmt.Sprintf("%d out", u.Output)
	if u.Reasoning > 0 {
		out += fmt.Sprintf(" (%d reasoning)", u.Reasoning)
	}
	parts = append(parts, out)
	if u.CacheRead > 0 {
		parts = append(parts, fmt.Sprintf("%d cache read", u.CacheRead))
	}
	if w := max(u.CacheWrite, u.CachedWrite); w > 0 {
		parts = append(parts, fmt.Sprintf("%d cache write", w))
	}
	return " · " + strings.Join(parts, " · ")
}

// usageLine is a usage's own line: "· usage 10 in · 5 out".
func usageLine(u *renderUsage, openAI bool) string {
	return "· usage " + strings.TrimPrefix(usageText(u, openAI), " · ")
}

// contentText is a Claude tool result's content: a string, or text blocks.
func contentText(raw json.RawMessage) string {
	if s := stringOf(raw); s != "" {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		} else if b.Type != "" {
			texts = append(texts, "["+b.Type+"]")
		}
	}
	return strings.Join(texts, "\n")
}

// errorText reads an error given as a string or as {"message": …}.
func errorText(raw json.RawMessage) string {
	if s := stringOf(raw); s != "" {
		return s
	}
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil {
		return e.Message
	}
	return ""
}

func stringOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)-cut) + " more bytes)"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func short(label, id string) string {
	if id == "" {
		return ""
	}
	if len(id) > 8 {
		id = id[:8]
	}
	return label + id
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
