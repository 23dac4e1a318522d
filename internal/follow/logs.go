// Package follow streams what a run records as it records it: its events
// (`loopctl events`, `watch`) and the output of its steps (`loopctl
// logs`), what is stored first, then, when following, what comes next,
// until the run ends. It reads; the daemon's handlers decode the request,
// call it, and own the HTTP response it writes to (an Output).
package follow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/filetail"
	"github.com/loopd/loopd/internal/storage"
)

// Poll is how often a followed log file is checked for growth: step output
// goes straight from the step's processes to the file, so growth is
// observed, not announced.
const Poll = 50 * time.Millisecond

// chunk is the most of a step's log one write carries.
const chunk = 32 << 10

// Output is where a stream goes: an HTTP response in the daemon.
type Output interface {
	io.Writer
	// Stall is called before writes: it arms the write deadline that drops
	// a client that stopped reading.
	Stall()
	// Flush sends what was written and disarms the deadline, so that a
	// quiet step (one that prints nothing for minutes) is never cut.
	Flush()
}

// LogOptions say which output Logs copies, and how.
type LogOptions struct {
	Step   int  // only this step (its seq, ≥ 1); 0: every step, with headers
	Follow bool // copy output as it is written, until the step or the run ends
	JSON   bool // each chunk as {"seq":3,"phase":"verification","text":"…"}
	// Skip drops the first Skip bytes of the text stream of a whole run:
	// regenerated from the append-only logs, they are what a client that
	// reconnects already has.
	Skip int64
	// Done, when closed (the daemon shuts down), ends a followed copy.
	Done <-chan struct{}
}

// Logs copies the output of the run's steps to out: one step's, or every
// step's in order with a header line between them, as text or as NDJSON
// chunks, until it is all copied (with Follow: until the step or the run
// has ended and its logs are read to the end), ctx ends or out fails. A
// PAUSED or WAITING run has not ended: its next step comes after resume,
// and a follower goes on. A step's log is read with filetail.Follower, the
// follower the dashboard's log tail uses too.
func Logs(ctx context.Context, store *storage.Store, runID string, out Output, opts LogOptions) {
	c := &copier{store: store, done: opts.Done}
	lw := &logWriter{out: out, w: out}
	if opts.Skip > 0 {
		lw.w = &skipWriter{w: out, n: opts.Skip}
	}
	seq := max(opts.Step, 1)
	for {
		st, err := store.Step(ctx, runID, seq)
		if errors.Is(err, storage.ErrNotFound) {
			if !opts.Follow || opts.Step > 0 {
				return
			}
			// No such step yet: wait for the next one, or the end of the
			// run.
			cur, err := store.Run(ctx, runID)
			if err != nil || cur.Status.Terminal() {
				return
			}
			if !c.sleep(ctx) {
				return
			}
			continue
		}
		if err != nil {
			return
		}
		if opts.JSON {
			lw.w = &jsonChunks{w: out, seq: st.Seq, phase: string(st.Phase)}
		} else if opts.Step == 0 {
			fmt.Fprintf(lw, "%s==> #%d %s (iteration %d) <==\n", lw.sep(), st.Seq, st.Phase, st.Iteration)
		}
		if !c.tailStep(ctx, lw, st, opts.Follow) {
			return
		}
		if opts.Step > 0 {
			return
		}
		seq++
	}
}

type copier struct {
	store *storage.Store
	done  <-chan struct{}
}

// tailStep copies a step's log to w; with follow, until the step has ended
// and its log is read to the end. It reports false when the client is gone.
func (c *copier) tailStep(ctx context.Context, w *logWriter, st storage.Step, follow bool) bool {
	fl := filetail.Follow(st.LogPath, chunk, 0)
	// One close for every way out: the file may be opened late, in the
	// loop, and any return must not leave it open.
	defer fl.Close()
	if err := fl.Open(); err != nil {
		if !errors.Is(err, os.ErrNotExist) || st.Status != api.StepRunning || !follow {
			return true // a step that never started has no log
		}
	}
	running := st.Status == api.StepRunning
	for {
		var werr error
		err := fl.Read(func(p []byte) error {
			w.out.Stall()
			werr = w.writeLog(p)
			return werr
		})
		if werr != nil {
			return false
		}
		if err != nil {
			return true
		}
		w.out.Flush()
		if !follow || !running {
			w.flushTail(fl)
			return true
		}
		// Check the status before the last read, so output written just
		// before the step ended is still copied after we see it ended.
		cur, err := c.store.Step(ctx, st.RunID, st.Seq)
		if err != nil {
			return false
		}
		if cur.Status != api.StepRunning {
			running = false
			continue // one more read to the end
		}
		if !c.sleep(ctx) {
			return false
		}
	}
}

func (c *copier) sleep(ctx context.Context) bool {
	t := time.NewTimer(Poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c.done:
		return false
	case <-t.C:
		return true
	}
}

// logWriter writes a run's log stream: the header lines between steps and
// the steps' output, which filetail.Follower hands out in pieces that
// never split a UTF-8 character.
type logWriter struct {
	out   Output
	w     io.Writer // out, or what skips or frames the bytes on their way
	wrote bool
}

func (l *logWriter) sep() string {
	if l.wrote {
		return "\n"
	}
	return ""
}

// Write implements io.Writer for headers.
func (l *logWriter) Write(p []byte) (int, error) {
	l.wrote = true
	l.out.Stall()
	return l.w.Write(p)
}

// writeLog writes a piece of a step's output.
func (l *logWriter) writeLog(p []byte) error {
	l.wrote = true
	_, err := l.w.Write(p)
	return err
}

// flushTail writes any bytes fl held back (the log ended mid-character)
// and sends everything to the client.
func (l *logWriter) flushTail(fl *filetail.Follower) {
	_ = fl.Flush(func(p []byte) error {
		l.out.Stall()
		_, err := l.w.Write(p)
		return err
	})
	l.out.Flush()
}

// jsonChunks writes each chunk of a step's output as one NDJSON object,
// {"seq":3,"phase":"verification","text":"…"}; chunks never split a
// character, so text is always valid UTF-8.
type jsonChunks struct {
	w     io.Writer
	seq   int
	phase string
}

func (j *jsonChunks) Write(p []byte) (int, error) {
	b, err := json.Marshal(map[string]any{"seq": j.seq, "phase": j.phase, "text": string(p)})
	if err != nil {
		return 0, err
	}
	if _, err := j.w.Write(append(b, '\n')); err != nil {
		return 0, err
	}
	return len(p), nil
}

// skipWriter drops the first n bytes written to it.
type skipWriter struct {
	w io.Writer
	n int64
}

func (s *skipWriter) Write(p []byte) (int, error) {
	if s.n >= int64(len(p)) {
		s.n -= int64(len(p))
		return len(p), nil
	}
	q := p[s.n:]
	s.n = 0
	if _, err := s.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}
