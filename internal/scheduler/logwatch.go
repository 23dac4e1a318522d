package scheduler

import (
	"bytes"
	"context"
	"io"
	"os"
	"time"

	"github.com/loopd/loopd/internal/transcript"
)

const (
	// maxTurnLine bounds the part of one log line held while it is being
	// written; a longer line (a huge tool result) is a sign of work.
	maxTurnLine = 1 << 20
)

// turnEnds watches an agent step's log while it runs and closes the
// returned channel when the agent has ended its turn (Claude's or
// Gemini's result, Codex's turn.completed) and shown no sign of a new one
// for grace: the agent should have exited by then, and what keeps it alive
// (a background job it started) must not hold the step until idle_timeout.
// The goroutine ends with ctx; wait for it with the returned function.
func turnEnds(ctx context.Context, path string, grace time.Duration) (<-chan struct{}, func()) {
	ended := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := turnTail{path: path}
		defer t.close()
		// A tenth of the grace: the step ends at most that much after it,
		// and a thousand concurrent steps read their logs a few thousand
		// times a second, not ten thousand.
		tk := time.NewTicker(min(max(grace/10, 100*time.Millisecond), time.Second))
		defer tk.Stop()
		var since time.Time // when the turn ended; zero while it has not
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				switch t.read() {
				case transcript.TurnEnded:
					since = now
				case transcript.TurnActive:
					since = time.Time{}
				}
				if !since.IsZero() && now.Sub(since) >= grace {
					close(ended)
					return
				}
			}
		}
	}()
	return ended, func() { <-done }
}

// turnTail reads what a log gained since the last read and classifies its
// complete lines.
type turnTail struct {
	path    string
	f       *os.File
	partial []byte // the current line, while it is written
	skip    bool   // the current line outgrew maxTurnLine
	buf     [32 << 10]byte
}

// read returns the mark of the newest line that had one (TurnNone when no
// new complete line did).
func (t *turnTail) read() transcript.TurnMark {
	if t.f == nil {
		f, err := os.Open(t.path)
		if err != nil {
			return transcript.TurnNone
		}
		t.f = f
	}
	mark := transcript.TurnNone
	for {
		n, err := t.f.Read(t.buf[:])
		b := t.buf[:n]
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				t.hold(b)
				break
			}
			t.hold(b[:i])
			if m := t.endLine(); m != transcript.TurnNone {
				mark = m
			}
			b = b[i+1:]
		}
		if err == io.EOF || n == 0 {
			return mark
		}
		if err != nil {
			return mark
		}
	}
}

func (t *turnTail) hold(b []byte) {
	if t.skip {
		return
	}
	if len(t.partial)+len(b) > maxTurnLine {
		t.skip, t.partial = true, t.partial[:0]
		return
	}
	t.partial = append(t.partial, b...)
}

func (t *turnTail) endLine() transcript.TurnMark {
	defer func() { t.partial, t.skip = t.partial[:0], false }()
	if t.skip {
		return transcript.TurnActive
	}
	return transcript.ClassifyTurnLine(t.partial)
}

func (t *turnTail) close() {
	if t.f != nil {
		t.f.Close()
	}
}
