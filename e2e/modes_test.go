package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Every file loopd creates under LOOPD_HOME is owner-only (files 0600,
// directories 0700) even when loopd runs under a umask that lets everyone
// read and write: the database and its -wal/-shm, the exits file, logs,
// prompts, the postmortem.
func TestHomeIsOwnerOnlyUnderPermissiveUmask(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	e := newEnv(t)
	e.startDaemon("--http", "127.0.0.1:0")
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=2"), "verify_command=echo checked")
	id := e.start("goal")
	if code := e.wait(id); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	e.must("postmortem", id) // written, read back
	var seen []string
	err := filepath.WalkDir(e.home, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(e.home, path)
		if strings.HasPrefix(rel, "daemon-") {
			return nil // the test harness's own capture of loopd's output
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm()&^want != 0 {
			t.Errorf("%s has mode %04o, want at most %04o", rel, fi.Mode().Perm(), want)
		}
		seen = append(seen, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(seen, " ")
	for _, want := range []string{"loopd.db", "loopd.db-wal", "/exits", "postmortem.md", "0001-implementation.log", "http.token"} {
		if !strings.Contains(joined, want) {
			t.Errorf("%s was not checked (files: %s)", want, joined)
		}
	}
}
