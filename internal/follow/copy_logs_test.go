package follow

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
)

// buffer is an Output that keeps what is written, safe to read while a
// Logs writes it.
type buffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	flushes int
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *buffer) Stall() {}
func (b *buffer) Flush() {
	b.mu.Lock()
	b.flushes++
	b.mu.Unlock()
}
func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitFor waits until the output contains want.
func (b *buffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the output never had %q: %q", want, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type world struct {
	t     *testing.T
	dir   string
	store *storage.Store
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	st, err := storage.Open(t.Context(), filepath.Join(dir, "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := &world{t: t, dir: dir, store: st}
	w.write(func(tx *storage.Tx) error {
		return tx.InsertRun(storage.Run{ID: "r1", Workspace: dir, Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunPending}, nil)
	})
	return w
}

func (w *world) write(fn func(tx *storage.Tx) error) {
	w.t.Helper()
	if err := w.store.Write(w.t.Context(), fn); err != nil {
		w.t.Fatal(err)
	}
}

// step starts step seq, with log (when not "") already written, and
// finishes it unless running.
func (w *world) step(seq int, phase api.Phase, log string, running bool) *storage.Step {
	w.t.Helper()
	st := &storage.Step{RunID: "r1", Seq: seq, Phase: phase, Iteration: 1, LogPath: filepath.Join(w.dir, string(phase)+".log")}
	if log != "" {
		if err := os.WriteFile(st.LogPath, []byte(log), 0o600); err != nil {
			w.t.Fatal(err)
		}
	}
	w.write(func(tx *storage.Tx) error { return tx.InsertStep(st, nil) })
	if !running {
		w.finish(st)
	}
	return st
}

func (w *world) finish(st *storage.Step) {
	w.t.Helper()
	st.Status = api.StepSucceeded
	w.write(func(tx *storage.Tx) error { return tx.FinishStep(st, events.StepFinished, nil) })
}

func (w *world) end() {
	w.t.Helper()
	w.write(func(tx *storage.Tx) error {
		return tx.TransitionRun(storage.Transition{RunID: "r1", From: []api.RunStatus{api.RunPending}, To: api.RunInterrupted,
			Reason: "user_stop", Event: events.RunInterrupted})
	})
}

func (w *world) copy(opts LogOptions) string {
	w.t.Helper()
	var out buffer
	Logs(w.t.Context(), w.store, "r1", &out, opts)
	return out.String()
}

// The stored output of a run: every step with a header between them, one
// step alone, NDJSON chunks, and the text stream less what a reconnecting
// client already has.
func TestLogsOfStoredSteps(t *testing.T) {
	w := newWorld(t)
	w.step(1, api.PhaseImplementation, "first\n", false)
	w.step(2, api.PhaseVerification, "second é\n", false)
	w.step(3, api.PhaseReview, "", false) // a step that never wrote a log
	whole := "==> #1 implementation (iteration 1) <==\nfirst\n\n==> #2 verification (iteration 1) <==\nsecond é\n\n==> #3 review (iteration 1) <==\n"
	if got := w.copy(LogOptions{}); got != whole {
		t.Errorf("whole run:\n%q\nwant\n%q", got, whole)
	}
	if got := w.copy(LogOptions{Step: 2}); got != "second é\n" {
		t.Errorf("step 2: %q", got)
	}
	if got := w.copy(LogOptions{Step: 9}); got != "" {
		t.Errorf("a step that does not exist: %q", got)
	}
	for n := range len(whole) + 1 {
		if got := w.copy(LogOptions{Skip: int64(n)}); got != whole[n:] {
			t.Fatalf("skip %d: %q, want %q", n, got, whole[n:])
		}
	}
	var chunks []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(w.copy(LogOptions{JSON: true})), "\n") {
		var c map[string]any
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		chunks = append(chunks, c)
	}
	if len(chunks) != 2 || chunks[0]["text"] != "first\n" || chunks[0]["seq"] != 1.0 || chunks[1]["phase"] != "verification" || chunks[1]["text"] != "second é\n" {
		t.Errorf("JSON chunks %v", chunks)
	}
}

// A followed copy sends a running step's output as it is written, never a
// split character, goes on to the next step, and ends once the run has
// ended and everything is copied.
func TestLogsFollowsRunningSteps(t *testing.T) {
	w := newWorld(t)
	st := w.step(1, api.PhaseImplementation, "", true) // no log yet
	var out buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		Logs(t.Context(), w.store, "r1", &out, LogOptions{Follow: true, JSON: true})
	}()
	appendLog := func(path, s string) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	appendLog(st.LogPath, "working \xe2\x86") // ends mid-character
	out.waitFor(t, `"text":"working "`)
	appendLog(st.LogPath, "\x92 done\n")
	out.waitFor(t, `"text":"→ done\n"`)
	w.finish(st)
	st2 := w.step(2, api.PhaseVerification, "", true)
	appendLog(st2.LogPath, "checking\n")
	out.waitFor(t, `"text":"checking\n"`)
	appendLog(st2.LogPath, "passed\n")
	w.finish(st2)
	w.end()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the followed copy did not end with the run")
	}
	if !strings.Contains(out.String(), `"text":"passed\n"`) {
		t.Errorf("output written just before the step ended was lost: %q", out.String())
	}
	if !json.Valid([]byte(strings.Split(out.String(), "\n")[0])) {
		t.Errorf("a chunk is not valid JSON: %q", out.String())
	}
}

// A followed copy of a run with no step yet waits, and ends when the
// daemon shuts down (Done) or the client goes away (ctx).
func TestLogsFollowEndsWithTheDaemonOrTheClient(t *testing.T) {
	w := newWorld(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		Logs(t.Context(), w.store, "r1", &buffer{}, LogOptions{Follow: true, Done: stop})
	}()
	close(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the copy did not end when the daemon shut down")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done = make(chan struct{})
	go func() {
		defer close(done)
		Logs(ctx, w.store, "r1", &buffer{}, LogOptions{Follow: true})
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the copy did not end when the client went away")
	}
}
