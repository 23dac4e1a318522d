package scheduler

import (
	"os"
	"path/filepath"
	"testing"
)

// onPath finds a program as the step's shell would: in PATH's
// directories (relative ones in the step's working directory, "" being
// that directory), or at a path; only an executable regular file counts.
func TestOnPath(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []struct {
		name string
		mode os.FileMode
	}{{"bin/claude", 0o755}, {"bin/codex", 0o644}, {"here", 0o755}} {
		p := filepath.Join(dir, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin", "gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bin, path string
		want      bool
	}{
		{"claude", filepath.Join(dir, "bin"), true},
		{"claude", "/nonexistent:" + filepath.Join(dir, "bin"), true},
		{"claude", "./bin", true}, // relative: in the working directory
		{"claude", "/usr/bin:/bin", false},
		{"codex", filepath.Join(dir, "bin"), false},  // not executable
		{"gemini", filepath.Join(dir, "bin"), false}, // a directory
		{"here", "/nonexistent:", true},              // an empty entry is the working directory
		{"here", "/nonexistent", false},
		{filepath.Join(dir, "bin", "claude"), "", true},
		{filepath.Join(dir, "bin", "codex"), "", false},
	} {
		if got := onPath(tc.bin, tc.path, dir); got != tc.want {
			t.Errorf("onPath(%q, %q) = %v, want %v", tc.bin, tc.path, got, tc.want)
		}
	}
}
