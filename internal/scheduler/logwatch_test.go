package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopd/loopd/internal/transcript"
)

// turnTail reads what the log gained since its last read, line by line,
// whatever the chunks the agent wrote: a half-written line counts once it
// is complete, and a line too long to hold is a sign of work.
func TestTurnTailReadsCompleteLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.log")
	tail := turnTail{path: path}
	defer tail.close()
	if got := tail.read(); got != transcript.TurnNone {
		t.Errorf("no log yet: %v", got)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	steps := []struct {
		write string
		want  transcript.TurnMark
	}{
		{`{"type":"system","subtype":"init"}` + "\n", transcript.TurnActive},
		{`{"type":"res`, transcript.TurnNone}, // half a line
		{`ult","subtype":"success"}` + "\nplain text\n", transcript.TurnEnded},
		{`{"type":"system","subtype":"task_notification"}` + "\n", transcript.TurnNone},
		{`{"type":"user","message":"` + string(bytes.Repeat([]byte("x"), maxTurnLine)) + `"}` + "\n", transcript.TurnActive},
		{`{"type":"turn.completed"}` + "\n", transcript.TurnEnded},
	}
	for i, s := range steps {
		if _, err := f.WriteString(s.write); err != nil {
			t.Fatal(err)
		}
		if got := tail.read(); got != s.want {
			t.Errorf("step %d: %v, want %v", i, got, s.want)
		}
	}
	if cap(tail.partial) > 2*maxTurnLine {
		t.Errorf("the tail holds %d bytes", cap(tail.partial))
	}
}

// watchLog closes its channel once the turn has ended and nothing new came
// for the grace, and not while the agent is still working (fake time: the
// grace passes without a wait).
func TestTurnEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "step.log")
		if err := os.WriteFile(path, []byte(`{"type":"system","subtype":"init"}`+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		ended, wait := watchLog(ctx, path, logWatch{Grace: 5 * time.Second})
		defer wait()
		defer cancel()
		time.Sleep(time.Minute) // working, silently
		synctest.Wait()
		select {
		case <-ended:
			t.Fatal("ended before the turn did")
		default:
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(`{"type":"result","subtype":"success"}` + "\n"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second) // within the grace
		synctest.Wait()
		select {
		case <-ended:
			t.Fatal("ended before the grace passed")
		default:
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case <-ended:
		default:
			t.Fatal("the ended turn was not noticed after the grace")
		}
	})
}

// The same goroutine counts reconnect notices (Codex's, as captured from
// the real CLI) and calls OnReconnects once at the bound, not before.
func TestWatchLogCountsReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "step.log")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		calls := 0
		ctx, cancel := context.WithCancel(t.Context())
		_, wait := watchLog(ctx, path, logWatch{Grace: 5 * time.Second, OnReconnects: func() { calls++ }, ReconnectEvery: time.Second})
		defer wait()
		defer cancel()
		notice := `{"type":"error","message":"Reconnecting... %d/5 (stream disconnected before completion)"}` + "\n"
		for i := 1; i <= maxReconnects; i++ {
			if calls != 0 {
				t.Fatalf("called after %d notices", i-1)
			}
			if _, err := fmt.Fprintf(f, notice, i); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
		}
		if _, err := fmt.Fprintf(f, notice, 6); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if calls != 1 {
			t.Fatalf("OnReconnects called %d times after %d notices, want once", calls, maxReconnects+1)
		}
	})
}
