package trust

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadCommitted: the files a fleet run is made of are read as
// committed (not the working tree's), with what .loop/config names and
// the extra paths; a link among them is refused; SnapshotMismatch names
// each file that differs, is missing or was added.
func TestReadCommitted(t *testing.T) {
	ws := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@e.invalid"}, args...)...)
		cmd.Dir = ws
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	writeWS(t, ws, map[string]string{
		".loop/config":          "verify_command=make test\nplan_file=docs/PLAN.md\nstop_file=../outside.json\n",
		"docs/PLAN.md":          "- [ ] one\n",
		"docs/SPEC.md":          "spec\n",
		".claude/settings.json": `{"model": "sonnet"}`,
		"src/main.go":           "package main\n",
	})
	git("add", "-A")
	git("commit", "-qm", "c")
	head := git("rev-parse", "HEAD")
	// The working tree changes: what is read is the commit's.
	writeWS(t, ws, map[string]string{".loop/config": "verify_command=rm -rf /\n", ".mcp.json": `{"mcpServers": {}}`})

	got, err := ReadCommitted(context.Background(), ws, head, []string{"docs/SPEC.md"})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, c := range got {
		paths = append(paths, c.Path)
	}
	want := []string{".claude/settings.json", ".loop/config", "docs/PLAN.md", "docs/SPEC.md"}
	if !slices.Equal(paths, want) {
		t.Fatalf("read %v, want %v (not src/, not the uncommitted .mcp.json, not a path outside)", paths, want)
	}
	if string(got[1].Data) != "verify_command=make test\nplan_file=docs/PLAN.md\nstop_file=../outside.json\n" {
		t.Fatalf(".loop/config read as %q, not as committed", got[1].Data)
	}

	sums := map[string]string{}
	for _, c := range got {
		sums[c.Path] = Sum(c.Data)
	}
	if d := SnapshotMismatch(got, sums); len(d) != 0 {
		t.Fatalf("the same files differ: %v", d)
	}
	sums[".loop/config"] = Sum([]byte("verify_command=true\n"))
	delete(sums, ".claude/settings.json")
	sums["PROMPT.md"] = Sum([]byte("goal\n"))
	d := strings.Join(SnapshotMismatch(got, sums), "\n")
	for _, w := range []string{".claude/settings.json: in the commit, but not sent", ".loop/config: the commit's content", "PROMPT.md: sent, but not in the commit"} {
		if !strings.Contains(d, w) {
			t.Errorf("mismatch %q lacks %q", d, w)
		}
	}

	if _, err := ReadCommitted(context.Background(), ws, head, []string{"../etc/passwd"}); err == nil {
		t.Fatal("a path outside the repository was read")
	}
	if err := os.Remove(filepath.Join(ws, ".claude", "settings.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../docs/SPEC.md", filepath.Join(ws, ".claude", "settings.json")); err != nil {
		t.Fatal(err)
	}
	git("add", "-A")
	git("commit", "-qm", "link")
	if _, err := ReadCommitted(context.Background(), ws, git("rev-parse", "HEAD"), nil); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a committed link: %v, want refused", err)
	}
}
