package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// lineMode says how the bytes of the current, unterminated line are handled.
type lineMode uint8

const (
	// modeStart: only blanks so far; they are held in Parser.line.
	modeStart lineMode = iota
	// modeJSON: the line starts with '{' and is buffered whole.
	modeJSON
	// modeText: the line is plain text and streams straight into the tail,
	// so a long text line needs no buffer.
	modeText
	// modeSkip: a JSON-looking line outgrew the limit; drop it up to '\n'.
	modeSkip
)

// Parser consumes an agent's output incrementally. It is fed the step's log as
// it is written, in chunks of any size (chunks may split lines and multi-byte
// characters), and holds at most one line of up to 8 MiB plus a 64 KiB text
// tail and a bounded set of message ids, whatever the length of the output.
//
// Usage accounting:
//   - Claude: assistant message usages are summed once per message.id (Claude
//     Code prints one assistant line per content block, each repeating the
//     message's usage; if copies differ, the largest value of each field is
//     kept). A `result` carrying usage replaces that sum for its run and its
//     total_cost_usd becomes the reported cost. Results of different
//     session_ids add up (a wrapper that ran claude twice); a later result of
//     the same session_id replaces the earlier one, because Claude Code
//     restates per-process cumulative totals on every result. Assistant usage
//     after the last result (a run killed before its result line) is added
//     without a reported cost.
//   - Codex: turn.completed usage is the thread's running total, so the last
//     one per thread counts and threads (thread.started) add up. Legacy
//     token_count events count the same way when they carry
//     info.total_token_usage; flat legacy token_count events are per request
//     and add up.
//   - Generic usage lines always add up, in any format.
//
// A Parser is safe for concurrent use: one goroutine may Write while another
// calls Result.
type Parser struct {
	mu      sync.Mutex
	maxLine int
	mode    lineMode
	line    []byte // current line while modeStart or modeJSON
	st      *state
}

// NewParser returns a Parser ready to be written to.
func NewParser(opts ...Option) *Parser {
	cfg := config{now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	return &Parser{maxLine: defaultMaxLine, st: newState(cfg.now)}
}

// Write feeds the next chunk of output. It never fails: malformed or unknown
// JSON lines are treated as text. It always returns len(b), nil.
func (p *Parser) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.feed(b)
			break
		}
		p.feed(b[:i])
		p.endLine()
		b = b[i+1:]
	}
	return n, nil
}

// feed handles bytes of the current line (no '\n' among them).
func (p *Parser) feed(seg []byte) {
	for len(seg) > 0 {
		switch p.mode {
		case modeStart:
			i := bytes.IndexFunc(seg, func(r rune) bool { return !isBlank(r) })
			if i < 0 {
				i = len(seg)
			}
			p.line = append(p.line, seg[:i]...)
			seg = seg[i:]
			switch {
			case len(p.line) > p.maxLine:
				p.toText() // absurd indentation: not worth buffering
			case len(seg) == 0:
				return
			case seg[0] == '{':
				p.mode = modeJSON
			default:
				p.toText()
			}
		case modeJSON:
			if len(p.line)+len(seg) > p.maxLine {
				p.mode = modeSkip
				p.dropLine()
				p.st.oversized++
				return
			}
			p.line = append(p.line, seg...)
			return
		case modeText:
			p.st.tail.write(seg)
			return
		case modeSkip:
			return
		}
	}
}

// toText switches the current line to streaming text, moving what was held.
func (p *Parser) toText() {
	p.mode = modeText
	p.st.tail.write(p.line)
	p.line = p.line[:0]
}

// dropLine forgets the held line, releasing a large buffer instead of
// keeping megabytes around for the rest of the step.
func (p *Parser) dropLine() {
	if cap(p.line) > 64<<10 {
		p.line = nil
		return
	}
	p.line = p.line[:0]
}

// endLine handles the '\n' that ends the current line.
func (p *Parser) endLine() {
	switch p.mode {
	case modeStart:
		p.st.tail.write(p.line)
		p.st.tail.write(newline)
	case modeText:
		p.st.tail.write(newline)
	case modeJSON:
		p.st.line(p.line)
	case modeSkip:
	}
	p.mode = modeStart
	p.dropLine()
}

var newline = []byte{'\n'}

// Result returns a snapshot of what the output says so far. It may be called
// at any time; an unterminated last line is taken into account when it is
// already a complete JSON object (the agent may not end its output with a
// newline), without changing what later writes will do.
func (p *Parser) Result() Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Only a line ending in '}' can be a complete object; checking that first
	// keeps frequent snapshots of a long, half-written line cheap.
	if p.mode == modeJSON && bytes.HasSuffix(bytes.TrimRight(p.line, " \t\r"), []byte("}")) && json.Valid(p.line) {
		s := p.st.clone()
		s.line(p.line)
		return s.result()
	}
	return p.st.result()
}

// ParseFile streams the log file at path through a Parser and returns its
// Result. Unless [WithNow] is given, human reset times are resolved relative
// to the file's modification time, the moment the agent last wrote to it.
func ParseFile(path string, opts ...Option) (Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return Result{}, fmt.Errorf("open transcript: %w", err)
	}
	defer f.Close()
	size := int64(256 << 10)
	if fi, err := f.Stat(); err == nil {
		mod := fi.ModTime()
		opts = append([]Option{WithNow(func() time.Time { return mod })}, opts...)
		size = min(max(fi.Size()+1, 4<<10), size) // a short transcript gets a short buffer
	}
	p := NewParser(opts...)
	buf := make([]byte, size)
	if _, err := io.CopyBuffer(p, onlyReader{f}, buf); err != nil {
		return Result{}, fmt.Errorf("read transcript: %w", err)
	}
	return p.Result(), nil
}

// onlyReader hides *os.File's WriterTo so io.CopyBuffer uses our buffer size.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(b []byte) (int, error) { return o.r.Read(b) }

func isBlank(r rune) bool { return r == ' ' || r == '\t' || r == '\r' }
