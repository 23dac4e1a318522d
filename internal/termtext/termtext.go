// Package termtext is loopd's one place for text that meets a terminal,
// in two directions that must not be confused:
//
//   - Quote and QuoteLines are for showing text: bytes a repository wrote
//     (a config value, a goal, a test name, a file path) reach the user's
//     terminal through trust, status, errors and the postmortem, and a
//     terminal obeys its control characters instead of showing them:
//     "\x1b[2K\r" erases the line it is on and moves to its start, so the
//     text after it is all the user sees; U+202E shows the text after it
//     reversed. Quoting writes every such character as a visible escape
//     (\x1b, \r, \u202e) and leaves all other text as it is.
//
//   - Strip and Stripper are for reading text a program wrote for a
//     terminal (a test runner's colours, a progress bar): they drop escape
//     sequences so that the text can be parsed or given to a model. They
//     keep carriage returns, backspaces and bidi overrides, so stripped
//     text is not safe to show: quote it.
package termtext

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unsafe reports whether a terminal would act on r rather than show it,
// or would show the text around it other than as written: C0 and C1
// control characters and DEL (cursor movement, escape sequences, line
// breaks, bells), Unicode format characters (bidi overrides and isolates,
// zero-width spaces, invisible tags) and the line and paragraph
// separators. Zero-width joiners and non-joiners are safe: they join
// letters and emoji and move nothing.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r < 0xa0, r == 0x200c, r == 0x200d:
		return false
	}
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// Quote returns s, for showing on one line of a terminal, with every
// unsafe character (see Unsafe) and every byte of invalid UTF-8 written
// as a Go escape: \x1b, \r, \n, \t, \u202e, \xff. Everything else,
// backslashes included, is left as it is, so text with nothing to quote
// is returned unchanged and quoting twice changes nothing more.
func Quote(s string) string { return quote(s, false) }

// QuoteLines is Quote for text shown on several lines (a goal, an error
// with its details, the postmortem): line feeds, tabs and the carriage
// return of a CRLF line ending are kept.
func QuoteLines(s string) string { return quote(s, true) }

func quote(s string, lines bool) string {
	i := 0
	for i < len(s) {
		if c := s[i]; c >= 0x20 && c < 0x7f { // printable ASCII, the common case
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if bad(s, i, r, n, lines) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case !bad(s, i, r, n, lines):
			b.WriteString(s[i : i+n])
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		default:
			writeEscape(&b, r)
		}
		i += n
	}
	return b.String()
}

// bad reports whether the character r of n bytes at s[i] must be quoted.
func bad(s string, i int, r rune, n int, lines bool) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true
	case lines && (r == '\n' || r == '\t'):
		return false
	case lines && r == '\r' && i+1 < len(s) && s[i+1] == '\n':
		return false
	}
	return Unsafe(r)
}

func writeEscape(b *strings.Builder, r rune) {
	switch r {
	case '\a':
		b.WriteString(`\a`)
	case '\b':
		b.WriteString(`\b`)
	case '\f':
		b.WriteString(`\f`)
	case '\n':
		b.WriteString(`\n`)
	case '\r':
		b.WriteString(`\r`)
	case '\t':
		b.WriteString(`\t`)
	case '\v':
		b.WriteString(`\v`)
	default:
		switch {
		case r < 0x80:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case r <= 0xffff:
			b.WriteString(`\u`)
			b.WriteString(pad(strconv.FormatInt(int64(r), 16), 4))
		default:
			b.WriteString(`\U`)
			b.WriteString(pad(strconv.FormatInt(int64(r), 16), 8))
		}
	}
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}

func pad(s string, n int) string { return strings.Repeat("0", max(n-len(s), 0)) + s }

// MaxSequence bounds an escape sequence or control string, in
// characters: a stray ESC ] without its terminator would otherwise
// swallow everything after it.
const MaxSequence = 256

// state is where a Stripper is inside an escape sequence.
type state uint8

const (
	plain     state = iota // text
	escStart               // after ESC
	escInter               // ESC followed by intermediate bytes (e.g. ESC ( B)
	escCSI                 // inside ESC [ … final byte (or C1 CSI)
	escString              // inside OSC, DCS, SOS, PM or APC, until BEL or ST
	escStrEsc              // ESC inside a control string: ST is ESC \
)

// Stripper removes terminal escape sequences from text fed to it one
// character at a time, so that a sequence split across two reads of a
// stream is still removed whole. It knows CSI (colours, cursor movement,
// erasure; ESC [ or C1 CSI), control strings (OSC titles and hyperlinks,
// DCS, SOS, PM, APC; ended by BEL or ST), nF escapes (ESC ( B) and
// two-character escapes (ESC 7). A sequence that breaks off is abandoned
// and the character that broke it is text again; a control string ends at
// a line break (control strings hold none) and any sequence after
// MaxSequence characters. The zero value is ready to use.
type Stripper struct {
	state state
	n     int // characters of the current sequence
}

// Text feeds r to the stripper and reports whether it is text, outside
// any escape sequence. Control characters outside sequences (line feed,
// carriage return, tab, backspace, bell) are text: what they mean is the
// caller's business.
func (s *Stripper) Text(r rune) bool {
	if s.state != plain {
		s.n++
		if s.n > MaxSequence {
			s.state = plain // a runaway sequence: show what follows
		}
	}
	switch s.state {
	case escStart:
		switch {
		case r == '[':
			s.state = escCSI
			return false
		case r == ']' || r == 'P' || r == 'X' || r == '^' || r == '_':
			s.state = escString
			return false
		case r >= 0x20 && r <= 0x2f:
			s.state = escInter
			return false
		case r >= 0x30 && r <= 0x7e: // a two-character escape such as ESC 7 or ESC M
			s.state = plain
			return false
		}
		s.state = plain // not a sequence: r is read as text below
	case escInter:
		if r >= 0x20 && r <= 0x2f {
			return false
		}
		s.state = plain
		if r >= 0x30 && r <= 0x7e { // the final byte
			return false
		}
	case escCSI:
		switch {
		case r >= 0x20 && r <= 0x3f: // parameter and intermediate bytes
			return false
		case r >= 0x40 && r <= 0x7e: // the final byte
			s.state = plain
			return false
		}
		s.state = plain // broken off: abandon it, keep the character
	case escString:
		switch r {
		case 0x07, 0x9c: // BEL (xterm's OSC terminator) or C1 ST
			s.state = plain
			return false
		case 0x1b:
			s.state = escStrEsc
			return false
		case '\n':
			// Control strings hold no line breaks: this one was never
			// terminated. Keep the line break and what follows.
			s.state = plain
		default:
			return false
		}
	case escStrEsc:
		switch r {
		case '\\':
			s.state = plain
		case 0x1b:
		default:
			s.state = escString
		}
		return false
	}
	switch r {
	case 0x1b:
		s.state, s.n = escStart, 0
		return false
	case 0x9b: // C1 CSI
		s.state, s.n = escCSI, 0
		return false
	case 0x90, 0x98, 0x9d, 0x9e, 0x9f: // C1 DCS, SOS, OSC, PM, APC
		s.state, s.n = escString, 0
		return false
	}
	return true
}

// Reset forgets a sequence in progress, for a new stream.
func (s *Stripper) Reset() { *s = Stripper{} }

// Strip removes the escape sequences from b in place and returns the
// shortened slice. Invalid UTF-8 bytes are kept as they are.
func Strip(b []byte) []byte {
	if bytes.IndexByte(b, 0x1b) < 0 && bytes.IndexByte(b, 0xc2) < 0 { // no ESC, no C1 control
		return b
	}
	var s Stripper
	out := b[:0]
	for i := 0; i < len(b); {
		if s.state == plain {
			// Text up to the next byte that may start a sequence (ESC, or
			// the lead byte of a C1 control) is copied as it is.
			j := i
			for j < len(b) && b[j] != 0x1b && b[j] != 0xc2 {
				j++
			}
			out = append(out, b[i:j]...) // never ahead of i: safe in place
			if i = j; i == len(b) {
				break
			}
		}
		r, n := utf8.DecodeRune(b[i:])
		if s.Text(r) {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// StripString is Strip for a string.
func StripString(s string) string {
	if strings.IndexByte(s, 0x1b) < 0 && strings.IndexByte(s, 0xc2) < 0 {
		return s
	}
	return string(Strip([]byte(s)))
}

// StripCSI removes CSI sequences (ESC [ or C1 CSI, parameters, a final
// byte: colours, cursor movement, erasure) from s and leaves everything
// else, other escapes included, for Quote to show. A CSI sequence holds no
// text, so removing it hides nothing, where obeying it could (erase the
// line, conceal, move back over it); control strings (OSC, DCS, APC) do
// hold text and are not removed. A sequence that breaks off, or runs past
// MaxSequence characters, is kept as it is.
func StripCSI(s string) string {
	if strings.IndexByte(s, 0x1b) < 0 && !strings.Contains(s, "\u009b") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		var n int // length of the introducer
		switch {
		case s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[':
			n = 2
		case strings.HasPrefix(s[i:], "\u009b"):
			n = len("\u009b")
		}
		if n > 0 {
			j := i + n
			for j < len(s) && j-i <= MaxSequence && s[j] >= 0x20 && s[j] <= 0x3f {
				j++
			}
			if j < len(s) && j-i <= MaxSequence && s[j] >= 0x40 && s[j] <= 0x7e {
				i = j + 1 // the whole sequence, final byte included
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// EscapeJSON returns the JSON text b with every character a terminal
// would act on that encoding/json leaves as it is written as a \u escape:
// DEL, C1 controls, bidi overrides and the other format characters (the
// encoder escapes only those below U+0020, and U+2028 and U+2029), and a
// byte of invalid UTF-8 as \ufffd, which is what decoding makes of it.
// Such characters can only be inside strings, where the escape stands for
// the same character: the text decodes to the same value, and is still
// safe to show on a terminal. b is returned as it is when there is
// nothing to escape.
func EscapeJSON(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] < 0x7f {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		if b[i] < 0x7f {
			out = append(out, b[i])
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = append(out, `\ufffd`...)
		case Unsafe(r) && r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			out = appendU(appendU(out, hi), lo)
		case Unsafe(r):
			out = appendU(out, r)
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

func appendU(b []byte, r rune) []byte {
	return append(append(b, `\u`...), pad(strconv.FormatInt(int64(r), 16), 4)...)
}
