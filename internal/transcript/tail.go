package transcript

import (
	"strings"
	"unicode/utf8"
)

// tail keeps the last max bytes written to it. It compacts when its buffer
// reaches twice that, so each byte is copied a bounded number of times and
// the buffer never exceeds 2*max.
type tail struct {
	max   int
	buf   []byte
	total int64 // bytes ever written
}

func (t *tail) write(b []byte) {
	t.total += int64(len(b))
	if len(b) >= t.max {
		t.buf = append(t.buf[:0], b[len(b)-t.max:]...)
		return
	}
	if len(t.buf)+len(b) > 2*t.max {
		keep := t.max - len(b)
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-keep:]...)
	}
	t.buf = append(t.buf, b...)
}

// String returns the last max bytes as valid UTF-8, starting at a character
// boundary.
func (t *tail) String() string {
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return capUTF8(string(b), t.max, t.total > int64(len(b)))
}

func (t *tail) clone() tail {
	c := *t
	c.buf = append([]byte(nil), t.buf...)
	return c
}

// lastBytes returns at most the last n bytes of s, starting at a character
// boundary, with invalid UTF-8 replaced.
func lastBytes(s string, n int) string {
	cut := len(s) > n
	if cut {
		s = s[len(s)-n:]
	}
	return capUTF8(s, n, cut)
}

// capUTF8 makes s valid UTF-8 of at most n bytes, keeping its end. When cut
// is set, s is the end of something longer, so a character split at its
// start is dropped rather than shown as garbage.
func capUTF8(s string, n int, cut bool) string {
	if cut {
		for i := 0; i < utf8.UTFMax && len(s) > 0 && !utf8.RuneStart(s[0]); i++ {
			s = s[1:]
		}
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > n { // replacements made it longer
		s = s[len(s)-n:]
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
	}
	return s
}

// firstBytes returns at most the first n bytes of s, ending at a character
// boundary, with invalid UTF-8 replaced.
func firstBytes(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}
