package main

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gdamore/tcell/v2/terminfo"
	// The compiled-in terminal database (xterm, tmux, screen, kitty,
	// alacritty, foot, the Linux console, …): no infocmp at run time.
	_ "github.com/gdamore/tcell/v2/terminfo/extended"
	"github.com/rivo/uniseg"
	"golang.org/x/term"
)

// screenEvent is something the user did at the terminal.
type screenEvent uint8

const (
	screenQuit   screenEvent = iota + 1 // q or Ctrl+C
	screenRedraw                        // Ctrl+L or a resize: repaint every line
)

// liveScreen is what the live view draws on: ttyScreen on a terminal, a
// fake in tests.
type liveScreen interface {
	// Size is the screen's width and height in cells.
	Size() (width, height int)
	// Draw shows frame; with full, every line is rewritten, else only the
	// lines that changed since the last frame.
	Draw(frame []viewLine, full bool)
	// Events delivers what the user does.
	Events() <-chan screenEvent
}

// ttyScreen is the controlling terminal in raw mode on its alternate
// screen. Every control sequence comes from the terminal's terminfo entry.
type ttyScreen struct {
	f     *os.File // /dev/tty: pollable, so a pending read can be cut short on close
	fd    int
	saved *term.State
	ti    *terminfo.Terminfo
	color bool

	prev       []string // the lines on screen as written, to rewrite only what changed
	prevW      int
	prevH      int
	events     chan screenEvent
	sigs       chan os.Signal
	stop       chan struct{}
	wg         sync.WaitGroup
	readerDone chan struct{}
	closeOnce  sync.Once
}

// openTTYScreen takes over the controlling terminal. It fails when there
// is none, or when $TERM names a terminal that cannot address the cursor.
func openTTYScreen() (*ttyScreen, error) {
	name := os.Getenv("TERM")
	ti, err := terminfo.LookupTerminfo(name)
	if err != nil {
		return nil, fmt.Errorf("terminal %q: %w", name, err)
	}
	if ti.SetCursor == "" {
		return nil, fmt.Errorf("terminal %q cannot address the cursor", name)
	}
	// Opened here rather than using stdin: keys are read from the
	// terminal even when stdin is redirected.
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	s := &ttyScreen{f: f, ti: ti, color: os.Getenv("NO_COLOR") == "", events: make(chan screenEvent, 8),
		sigs: make(chan os.Signal, 1), stop: make(chan struct{}), readerDone: make(chan struct{})}
	// f.Fd() would switch the file to blocking mode, and a blocked read
	// could then never be interrupted: take the descriptor without that.
	rc, err := f.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) { s.fd = int(fd) })
	}
	if err == nil {
		s.saved, err = term.MakeRaw(s.fd)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("raw mode: %w", err)
	}
	signal.Notify(s.sigs, syscall.SIGWINCH)
	s.write(ti.EnterCA, ti.HideCursor, ti.AttrOff, ti.Clear)
	go s.readKeys() // owned by Close, which cuts its read short and waits for it
	s.wg.Go(func() {
		for {
			select {
			case <-s.stop:
				return
			case <-s.sigs:
				s.post(screenRedraw)
			}
		}
	})
	return s, nil
}

// readKeys turns key presses into events. Raw mode turns off the
// terminal's signals, so Ctrl+C arrives here as byte 3, not as SIGINT.
func (s *ttyScreen) readKeys() {
	defer close(s.readerDone)
	buf := make([]byte, 256)
	for {
		n, err := s.f.Read(buf)
		for _, b := range buf[:n] {
			switch b {
			case 'q', 'Q', 0x03:
				s.post(screenQuit)
			case 0x0c: // Ctrl+L
				s.post(screenRedraw)
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *ttyScreen) post(ev screenEvent) {
	select {
	case s.events <- ev:
	case <-s.stop:
	default: // the loop is behind; the events pending already cover this one
	}
}

// Events implements liveScreen.
func (s *ttyScreen) Events() <-chan screenEvent { return s.events }

// Size implements liveScreen.
func (s *ttyScreen) Size() (int, int) {
	w, h, err := term.GetSize(s.fd)
	if err != nil || w <= 0 || h <= 0 {
		return 80, 24
	}
	return w, h
}

// Draw implements liveScreen.
func (s *ttyScreen) Draw(frame []viewLine, full bool) {
	w, h := s.Size()
	var b bytes.Buffer
	if full || w != s.prevW || h != s.prevH {
		s.prev, s.prevW, s.prevH = nil, w, h
		s.ti.TPuts(&b, s.ti.AttrOff)
		s.ti.TPuts(&b, s.ti.Clear)
	}
	lines := make([]string, h)
	for y := range h {
		var l viewLine
		if y < len(frame) {
			l = frame[y]
		}
		width := w
		if y == h-1 && s.ti.AutoMargin {
			width-- // writing the last cell would scroll some terminals
		}
		lines[y] = s.encode(l, width)
		if y < len(s.prev) && s.prev[y] == lines[y] {
			continue
		}
		s.ti.TPuts(&b, s.ti.TGoto(0, y))
		b.WriteString(lines[y])
	}
	s.prev = lines
	_, _ = s.f.Write(b.Bytes())
}

// encode is a line as written to the terminal: exactly width cells, each
// span in its attributes, control characters dropped.
func (s *ttyScreen) encode(l viewLine, width int) string {
	var b strings.Builder
	used := 0
	for _, sp := range l {
		if used >= width {
			break
		}
		b.WriteString(s.attrs(sp.tone))
		state := -1
		for str := sp.text; str != ""; {
			var cluster string
			var cw int
			cluster, str, cw, state = uniseg.FirstGraphemeClusterInString(str, state)
			if isControl(cluster) {
				continue
			}
			if used+cw > width {
				break
			}
			b.WriteString(cluster)
			used += cw
		}
	}
	b.WriteString(s.ti.AttrOff)
	b.WriteString(strings.Repeat(" ", max(width-used, 0)))
	return b.String()
}

// attrs is the sequence that starts text in tone t.
func (s *ttyScreen) attrs(t tone) string {
	ti := s.ti
	a := ti.AttrOff
	color := func(c int) string {
		if !s.color {
			return ""
		}
		return ti.TColor(c, -1)
	}
	switch t {
	case toneDim:
		a += ti.Dim
	case toneHeading:
		a += ti.Bold
	case toneGood:
		a += color(2) // green
	case toneWarn:
		a += color(3) // yellow
	case toneBad:
		a += ti.Bold + color(1) // red
	}
	return a
}

func isControl(cluster string) bool {
	for _, r := range cluster {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return true
		}
	}
	return false
}

func (s *ttyScreen) write(caps ...string) {
	var b bytes.Buffer
	for _, c := range caps {
		s.ti.TPuts(&b, c)
	}
	_, _ = s.f.Write(b.Bytes())
}

// Close gives the terminal back as it was: main screen, cursor, cooked
// mode. It is safe to call more than once.
func (s *ttyScreen) Close() {
	s.closeOnce.Do(func() {
		signal.Stop(s.sigs)
		close(s.stop)
		s.write(s.ti.AttrOff, s.ti.ShowCursor, s.ti.ExitCA)
		_ = term.Restore(s.fd, s.saved)
		s.wg.Wait()
		// Cut the key reader's pending read short. Should the device not
		// support deadlines, the reader is left to end with the process
		// rather than hang the exit on a key press.
		if s.f.SetReadDeadline(time.Now()) == nil {
			<-s.readerDone
		}
		s.f.Close()
	})
}
