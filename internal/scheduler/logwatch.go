package scheduler

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/loopd/loopd/internal/transcript"
)

const (
	// maxTurnLine bounds the part of one log line held while it is being
	// written; a longer line (a huge tool result) is a sign of work.
	maxTurnLine = 1 << 20
)

// maxReconnects is how many "Reconnecting…" notices an agent may print in
// one step. Codex without network prints them for hours, and each one is
// output that keeps idle_timeout from firing; past this many the step is
// stopped like an idle one and classified as the API being unavailable.
// Codex fails the turn itself after its own stream retries (5 by default),
// so a run with the defaults loses nothing to this bound.
const maxReconnects = 5

// errAPIReconnects stops a step whose agent keeps reconnecting to its API.
var errAPIReconnects = errors.New("the agent kept reconnecting to the model API")

// logWatch says what watchLog looks for in a step's log.
type logWatch struct {
	// Grace is how long an agent may linger after it ended its turn
	// (Claude's or Gemini's result, Codex's turn.completed) with no sign of
	// a new one: it should have exited by then, and what keeps it alive (a
	// background job it started) must not hold the step until idle_timeout.
	Grace time.Duration
	// OnReconnects, when set, is called once the agent has printed
	// maxReconnects reconnect notices (read through a bounded
	// transcript.Parser); only Codex is known to print them.
	OnReconnects func()
	// ReconnectEvery is how often the log is read for them.
	ReconnectEvery time.Duration
}

// watchLog follows an agent step's log while it runs, in one goroutine
// whatever it looks for (with a thousand runs, every goroutine per step is
// a thousand stacks), and closes the returned channel once the agent has
// ended its turn and lingered for w.Grace. The goroutine ends with ctx;
// wait for it with the returned function.
func watchLog(ctx context.Context, path string, w logWatch) (<-chan struct{}, func()) {
	ended := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := turnTail{path: path}
		var parser *transcript.Parser
		if w.OnReconnects != nil {
			parser = transcript.NewParser()
			t.sink = parser
		}
		defer t.close()
		// A tenth of the grace: the step ends at most that much after it,
		// and a thousand concurrent steps read their logs a few thousand
		// times a second, not ten thousand.
		every := min(max(w.Grace/10, 100*time.Millisecond), time.Second)
		if parser != nil && w.ReconnectEvery > 0 {
			every = min(every, w.ReconnectEvery)
		}
		tk := time.NewTicker(every)
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
				if parser != nil && parser.Result().Reconnects >= maxReconnects {
					w.OnReconnects()
					parser, t.sink = nil, nil
				}
				if !since.IsZero() && now.Sub(since) >= w.Grace {
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
	partial []byte    // the current line, while it is written
	skip    bool      // the current line outgrew maxTurnLine
	sink    io.Writer // also gets every byte read; nil for none
}

// logReadBufs lends the readers of step logs that run beside every step
// (turnTail, watchReconnects) a buffer for the length of one read. A buffer
// of their own would stay on each step's goroutine stack while the step
// runs: tens of kilobytes per run, tens of megabytes with a thousand runs.
var logReadBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

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
	bp := logReadBufs.Get().(*[]byte)
	defer logReadBufs.Put(bp)
	for {
		n, err := t.f.Read(*bp)
		b := (*bp)[:n]
		if t.sink != nil && n > 0 {
			_, _ = t.sink.Write(b)
		}
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
