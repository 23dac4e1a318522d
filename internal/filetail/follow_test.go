package filetail

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// collect reads what fl has now, checking that every piece is whole text.
func collect(t *testing.T, fl *Follower) string {
	t.Helper()
	var b strings.Builder
	if err := fl.Read(func(p []byte) error {
		if len(p) == 0 || !utf8.Valid(p) {
			t.Errorf("a piece that is empty or splits a character: %q", p)
		}
		b.Write(p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// A log followed from before it exists, written a byte at a time with
// characters of 2, 3 and 4 bytes cut across reads and across the reader's
// buffer, comes out whole and in order, every piece valid text.
func TestFollowerNeverSplitsACharacter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.log")
	const text = "héllo → wörld 🎉 done\n"
	for _, chunk := range []int{1, 2, 3, 5, 64} {
		os.Remove(path)
		fl := Follow(path, chunk, 0)
		if err := fl.Open(); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Open of a log not written yet: %v", err)
		}
		if got := collect(t, fl); got != "" {
			t.Fatalf("read %q from a missing file", got)
		}
		var got strings.Builder
		for i := range len(text) {
			appendTo(t, path, text[i:i+1])
			got.WriteString(collect(t, fl))
		}
		if got.String() != text {
			t.Errorf("chunk %d: followed %q, want %q", chunk, got.String(), text)
		}
		fl.Close()
	}
}

// A log that ends in the middle of a character keeps the start of it
// until Flush, which hands it out once.
func TestFollowerFlushHandsOutAnIncompleteEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.log")
	appendTo(t, path, "ok \xe2\x86")
	fl := Follow(path, 32, 0)
	defer fl.Close()
	if got := collect(t, fl); got != "ok " {
		t.Fatalf("read %q, want the complete part", got)
	}
	var flushed []string
	emit := func(p []byte) error { flushed = append(flushed, string(p)); return nil }
	if err := fl.Flush(emit); err != nil {
		t.Fatal(err)
	}
	if err := fl.Flush(emit); err != nil {
		t.Fatal(err)
	}
	if len(flushed) != 1 || flushed[0] != "\xe2\x86" {
		t.Errorf("Flush handed out %q, want the held-back bytes once", flushed)
	}
}

// With a backlog, reading starts that many bytes before the end, drops
// the rest of a character the start falls in, and says it begins mid-way.
func TestFollowerBacklogStartsMidFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.log")
	appendTo(t, path, "line one\nsecond é line\n")
	// 7 bytes before the end falls on the second byte of é.
	fl := Follow(path, 64, 7)
	defer fl.Close()
	if got, want := collect(t, fl), "… line\n"; got != want {
		t.Errorf("backlog read %q, want %q", got, want)
	}
	appendTo(t, path, "more\n")
	if got := collect(t, fl); got != "more\n" {
		t.Errorf("then read %q", got)
	}
	short := Follow(path, 64, 1<<10) // a file shorter than the backlog is read whole
	defer short.Close()
	if got := collect(t, short); got != "line one\nsecond é line\nmore\n" {
		t.Errorf("short file read %q", got)
	}
}

// An error from emit (the client went away) stops the read and is
// returned; Close may be called more than once.
func TestFollowerReturnsEmitsError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.log")
	appendTo(t, path, strings.Repeat("x", 100))
	fl := Follow(path, 10, 0)
	gone := errors.New("client gone")
	calls := 0
	err := fl.Read(func(p []byte) error { calls++; return gone })
	if !errors.Is(err, gone) || calls != 1 {
		t.Errorf("Read = %v after %d calls, want emit's error after 1", err, calls)
	}
	if err := fl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fl.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
