package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// workingTreeChanges tells changed files (modified, new, renamed) from
// those git ignores, among the paths asked about only.
func TestWorkingTreeChanges(t *testing.T) {
	ws := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@e.invalid"}, args...)...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write(".gitignore", ".env\n.claude/settings.local.json\n")
	write(".loop/config", "max_iterations=3\n")
	write(".loop/stop.json", "{}\n")
	write("src/a.go", "package a\n")
	git("add", "-A")
	git("commit", "-qm", "c")
	write(".loop/config", "max_iterations=4\n")      // modified
	write(".mcp.json", "{}\n")                       // new
	write(".env", "A=1\n")                           // ignored
	write(".claude/settings.local.json", "{}\n")     // ignored
	write("src/a.go", "package b\n")                 // not asked about
	git("mv", ".loop/stop.json", ".loop/stop2.json") // renamed
	changed, ignored, err := workingTreeChanges(context.Background(), ws, []string{".loop", ".mcp.json", ".env", ".claude"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".loop/config", ".loop/stop.json", ".loop/stop2.json", ".mcp.json"}; !slices.Equal(changed, want) {
		t.Errorf("changed %v, want %v", changed, want)
	}
	if want := []string{".claude/settings.local.json", ".env"}; !slices.Equal(ignored, want) {
		t.Errorf("ignored %v, want %v", ignored, want)
	}
	if strings.Contains(strings.Join(changed, " "), "src/") {
		t.Errorf("a path not asked about: %v", changed)
	}
}
