package storage

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestTrustFilesReplaceAndRevoke(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		sum := strings.Repeat("a", 64)
		write := func(ws string, files ...TrustedFile) {
			t.Helper()
			if err := s.Write(t.Context(), func(tx *Tx) error { return tx.TrustFiles(ws, files) }); err != nil {
				t.Fatal(err)
			}
		}
		write("/ws", TrustedFile{Path: "/ws/.loop/config", Kind: "config", SHA256: sum, Summary: "{}"},
			TrustedFile{Path: "/ws/.env", Kind: "env", SHA256: sum, Summary: "{}"})
		write("/other", TrustedFile{Path: "/other/.env", Kind: "env", SHA256: sum, Summary: "{}"})

		got, err := s.TrustedFile(t.Context(), "/ws", "/ws/.env")
		if err != nil || got.SHA256 != sum || got.TrustedAt != 1_700_000_000_000 || got.Kind != "env" {
			t.Fatalf("TrustedFile = %+v, %v", got, err)
		}
		// Trusting again replaces the workspace's records: .env is gone.
		write("/ws", TrustedFile{Path: "/ws/.loop/config", Kind: "config", SHA256: strings.Repeat("b", 64), Summary: "{}"})
		if _, err := s.TrustedFile(t.Context(), "/ws", "/ws/.env"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a file left out of the new trust is still trusted: %v", err)
		}
		files, err := s.TrustedFiles(t.Context(), "/ws")
		if err != nil || len(files) != 1 || files[0].SHA256 != strings.Repeat("b", 64) {
			t.Errorf("TrustedFiles = %+v, %v", files, err)
		}
		var revoked []string
		if err := s.Write(t.Context(), func(tx *Tx) error { revoked, err = tx.RevokeTrust("/ws"); return err }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(revoked, []string{"/ws/.loop/config"}) {
			t.Errorf("revoked %v", revoked)
		}
		if files, _ := s.TrustedFiles(t.Context(), "/ws"); len(files) != 0 {
			t.Errorf("after revoke: %+v", files)
		}
		if files, _ := s.TrustedFiles(t.Context(), "/other"); len(files) != 1 {
			t.Errorf("revoking /ws touched /other: %+v", files)
		}
		// A bad hash is refused by the schema.
		err = s.Write(t.Context(), func(tx *Tx) error {
			return tx.TrustFiles("/ws", []TrustedFile{{Path: "/ws/x", Kind: "config", SHA256: "short", Summary: "{}"}})
		})
		if err == nil {
			t.Error("a malformed hash was stored")
		}
	})
}

func TestRunEnvTrust(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "run1")
		newRun(t, s, "run2")
		if err := s.Write(t.Context(), func(tx *Tx) error { return tx.RequireEnvTrust("run1", "/ws/.env") }); err != nil {
			t.Fatal(err)
		}
		if p, err := s.RunEnvTrust(t.Context(), "run1"); err != nil || p != "/ws/.env" {
			t.Errorf("run1: %q, %v", p, err)
		}
		if p, err := s.RunEnvTrust(t.Context(), "run2"); err != nil || p != "" {
			t.Errorf("run2: %q, %v", p, err)
		}
	})
}

// TestDatabaseIsOwnerOnly opens a database under a umask that lets
// everyone read and write: the database and its -wal and -shm files are
// still 0600, and an existing world-readable database is tightened.
func TestDatabaseIsOwnerOnly(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	path := filepath.Join(dir, "loopd.db")
	check := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if perm := fi.Mode().Perm(); perm != 0o600 {
				t.Errorf("%s: %s has mode %04o, want 0600", when, filepath.Base(p), perm)
			}
		}
	}
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	newRun(t, s, "run1") // a write: the -wal exists
	check("new database")
	s.Close()

	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Chmod(p, 0o666)
	}
	s, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	newRun(t, s, "run2")
	check("reopened world-writable database")
}
