package follow

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// openFilesOf counts this process's descriptors open on path.
func openFilesOf(t *testing.T, path string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// tailStep closes the step's log on every way out, including when the
// step's row cannot be read while it is followed.
func TestTailStepClosesTheLogOnError(t *testing.T) {
	dir := t.TempDir()
	store, err := storage.Open(t.Context(), filepath.Join(dir, "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	log := filepath.Join(dir, "0001-implementation.log")
	if err := os.WriteFile(log, []byte("some output\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &copier{store: store, done: make(chan struct{})}
	rec := httptest.NewRecorder()
	w := &logWriter{out: recorder{rec}, w: rec}
	// A RUNNING step with no row: reading its status fails.
	st := storage.Step{RunID: "gone", Seq: 1, LogPath: log, Status: api.StepRunning}
	if c.tailStep(context.Background(), w, st, true) {
		t.Fatal("tailStep reported success although the step's row is gone")
	}
	if rec.Body.String() != "some output\n" {
		t.Errorf("copied %q", rec.Body.String())
	}
	if n := openFilesOf(t, log); n != 0 {
		t.Errorf("%d descriptors left open on the log", n)
	}
}

// recorder is an httptest.ResponseRecorder as an Output: it has no write
// deadline to arm.
type recorder struct{ *httptest.ResponseRecorder }

func (r recorder) Stall() {}
func (r recorder) Flush() { r.ResponseRecorder.Flush() }
