package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2/terminfo"
)

// xtermScreen is a ttyScreen for xterm writing to a file instead of a
// terminal; its size is then the 80×24 fallback.
func xtermScreen(t *testing.T) (*ttyScreen, *os.File) {
	t.Helper()
	ti, err := terminfo.LookupTerminfo("xterm-256color")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "tty")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &ttyScreen{f: f, fd: int(f.Fd()), ti: ti, color: true}, f
}

// written returns what the screen wrote since the last call.
func written(t *testing.T, f *os.File, from *int64) string {
	t.Helper()
	b, err := io.ReadAll(io.NewSectionReader(f, *from, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	*from += int64(len(b))
	return string(b)
}

func TestTTYScreenEncodesLinesToTheWidth(t *testing.T) {
	s, _ := xtermScreen(t)
	plain := func(l viewLine, w int) string {
		enc := s.encode(l, w)
		// Drop the attribute sequences to look at the cells.
		for _, seq := range []string{s.ti.AttrOff, s.ti.Bold, s.ti.Dim, s.ti.TColor(1, -1), s.ti.TColor(2, -1), s.ti.TColor(3, -1)} {
			if seq != "" {
				enc = strings.ReplaceAll(enc, seq, "")
			}
		}
		return enc
	}
	tests := []struct {
		name string
		line viewLine
		w    int
		want string
	}{
		{"padded to the width", viewLine{{"ok", toneGood}}, 6, "ok    "},
		{"cut at the width", viewLine{{"abc", toneNormal}, {"defgh", toneBad}}, 5, "abcde"},
		{"a wide character that does not fit is left out", viewLine{{"ab日本", toneNormal}}, 5, "ab日 "},
		{"control characters never reach the terminal", viewLine{{"a\x1b[2Jb\rc\n", toneNormal}}, 6, "a[2Jbc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := plain(tt.line, tt.w); got != tt.want {
				t.Errorf("cells = %q, want %q", got, tt.want)
			}
		})
	}
	if enc := s.encode(viewLine{{"x", toneBad}}, 3); !strings.HasPrefix(enc, s.ti.AttrOff+s.ti.Bold+s.ti.TColor(1, -1)+"x") {
		t.Errorf("bad tone is not bold red: %q", enc)
	}
	s.color = false // NO_COLOR
	if enc := s.encode(viewLine{{"x", toneBad}}, 3); strings.Contains(enc, s.ti.TColor(1, -1)) {
		t.Errorf("colour despite NO_COLOR: %q", enc)
	}
}

// Only the lines that changed are rewritten, so the view does not flicker;
// a full redraw clears the screen first.
func TestTTYScreenRewritesOnlyChangedLines(t *testing.T) {
	s, f := xtermScreen(t)
	var off int64
	frame := []viewLine{{{"status RUNNING", toneGood}}, {{"step #1", toneNormal}}, {{"output", toneNormal}}}
	s.Draw(frame, false)
	first := written(t, f, &off)
	if !strings.HasPrefix(first, s.ti.AttrOff+s.ti.Clear) || strings.Count(first, "\x1b[") < 24 {
		t.Errorf("first frame does not clear and write every line: %q", first)
	}
	frame[1] = viewLine{{"step #2", toneNormal}}
	s.Draw(frame, false)
	second := written(t, f, &off)
	if !strings.HasPrefix(second, s.ti.TGoto(0, 1)) || strings.Count(second, s.ti.TGoto(0, 0)) > 0 ||
		!strings.Contains(second, "step #2") || strings.Contains(second, "RUNNING") || strings.Contains(second, s.ti.Clear) {
		t.Errorf("second frame = %q, want only line 2 rewritten", second)
	}
	s.Draw(frame, true)
	if third := written(t, f, &off); !strings.Contains(third, s.ti.Clear) || !strings.Contains(third, "RUNNING") {
		t.Errorf("full redraw = %q", third)
	}
	// The last line stops one cell short: writing the bottom-right cell
	// scrolls terminals with automatic margins.
	if !strings.HasSuffix(s.prev[23], strings.Repeat(" ", 79)) || strings.HasSuffix(s.prev[23], strings.Repeat(" ", 80)) {
		t.Errorf("last line = %q", s.prev[23])
	}
}
