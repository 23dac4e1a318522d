package scheduler

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/loopd/loopd/internal/agent"
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

// logWatch says what a logWatcher looks for in a step's log.
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

// logWatcher follows an agent step's log while it runs. Its check is
// called by supervise.Watch on the runner's own goroutine (Limits.Check),
// not on a goroutine per step: with a thousand runs, each goroutine per
// step is a thousand stacks.
type logWatcher struct {
	w      logWatch
	tail   turnTail
	parser *transcript.Parser // counts reconnect notices; nil when not looked for
	since  time.Time          // when the turn ended; zero while it has not
}

func newLogWatcher(path string, w logWatch) *logWatcher {
	lw := &logWatcher{w: w, tail: turnTail{path: path}}
	if w.OnReconnects != nil {
		lw.parser = transcript.NewParser()
		lw.tail.sink = lw.parser
	}
	return lw
}

// every is how often check is to be called: a tenth of the grace (the step
// ends at most that much after it, and a thousand concurrent steps read
// their logs a few thousand times a second, not ten thousand), or the
// reconnect interval when that is shorter.
func (lw *logWatcher) every() time.Duration {
	every := min(max(lw.w.Grace/10, 100*time.Millisecond), time.Second)
	if lw.parser != nil && lw.w.ReconnectEvery > 0 {
		every = min(every, lw.w.ReconnectEvery)
	}
	return every
}

// check reads what the log gained and reports whether the agent ended its
// turn and showed no sign of a new one for the grace; it calls
// OnReconnects once the agent has printed maxReconnects reconnect notices.
func (lw *logWatcher) check(now time.Time) bool {
	switch lw.tail.read() {
	case transcript.TurnEnded:
		lw.since = now
	case transcript.TurnActive:
		lw.since = time.Time{}
	}
	if lw.parser != nil && lw.parser.Result().Reconnects >= maxReconnects {
		lw.w.OnReconnects()
		lw.parser, lw.tail.sink = nil, nil
	}
	return !lw.since.IsZero() && now.Sub(lw.since) >= lw.w.Grace
}

// close releases the log.
func (lw *logWatcher) close() { lw.tail.close() }

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
// (turnTail, whose bytes also feed the reconnect count) a buffer for the length of one read. A buffer
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
	return agent.ClassifyTurnLine(t.partial)
}

func (t *turnTail) close() {
	if t.f != nil {
		t.f.Close()
	}
}
