package scheduler

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
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

// check reports the turn's end once the turn has ended and nothing new
// came for the grace, and not while the agent is still working.
func TestLogWatcherTurnEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.log")
	if err := os.WriteFile(path, []byte(`{"type":"system","subtype":"init"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lw := newLogWatcher(path, logWatch{Grace: 5 * time.Second})
	defer lw.close()
	now := time.Now()
	if lw.check(now) || lw.check(now.Add(time.Minute)) {
		t.Fatal("ended before the turn did") // working, silently
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(`{"type":"result","subtype":"success"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	ended := now.Add(2 * time.Minute)
	if lw.check(ended) || lw.check(ended.Add(4*time.Second)) {
		t.Fatal("ended before the grace passed")
	}
	if !lw.check(ended.Add(6 * time.Second)) {
		t.Fatal("the ended turn was not noticed after the grace")
	}
	// A new turn starts: the end no longer counts.
	if _, err := f.WriteString(`{"type":"assistant","message":{"content":[]}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	if lw.check(ended.Add(7 * time.Second)) {
		t.Fatal("a new turn's activity was taken for the old turn's end")
	}
}

// The same reads count reconnect notices (Codex's, as captured from the
// real CLI) and call OnReconnects once at the bound, not before.
func TestLogWatcherCountsReconnects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls := 0
	lw := newLogWatcher(path, logWatch{Grace: 5 * time.Second, OnReconnects: func() { calls++ }, ReconnectEvery: 200 * time.Millisecond})
	defer lw.close()
	if got := lw.every(); got != 200*time.Millisecond {
		t.Errorf("checked every %s, want the reconnect interval 200ms", got)
	}
	notice := `{"type":"error","message":"Reconnecting... %d/5 (stream disconnected before completion)"}` + "\n"
	now := time.Now()
	for i := 1; i <= maxReconnects+1; i++ {
		if calls != 0 && i <= maxReconnects {
			t.Fatalf("called after %d notices", i-1)
		}
		if _, err := fmt.Fprintf(f, notice, i); err != nil {
			t.Fatal(err)
		}
		lw.check(now.Add(time.Duration(i) * time.Second))
	}
	if calls != 1 {
		t.Fatalf("OnReconnects called %d times after %d notices, want once", calls, maxReconnects+1)
	}
}
