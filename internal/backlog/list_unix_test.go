//go:build unix

package backlog

import (
	"path/filepath"
	"syscall"
	"testing"
)

// A FIFO would block a plain open until someone writes to it: ReadFile must
// refuse it at once.
func TestReadFileRefusesAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo.md")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(fifo)
	if want := fifo + ": the task list is not a regular file"; err == nil || err.Error() != want {
		t.Errorf("ReadFile error:\n got  %v\n want %s", err, want)
	}
}
