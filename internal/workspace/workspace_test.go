package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func fp(t *testing.T, dir string) string {
	t.Helper()
	s, err := Fingerprint(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// touch moves a file's mtime forward so that a rewrite with the same size
// within the filesystem's timestamp granularity still registers.
func touchLater(t *testing.T, path string) {
	t.Helper()
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
}

func TestFingerprintGit(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	write(t, filepath.Join(dir, "a.txt"), "one")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-qm", "init")
	base := fp(t, dir)
	if again := fp(t, dir); again != base {
		t.Fatal("fingerprint of an unchanged tree changed")
	}
	steps := []struct {
		name   string
		change func()
	}{
		{"modify tracked file", func() { write(t, filepath.Join(dir, "a.txt"), "two") }},
		{"modify it again", func() { write(t, filepath.Join(dir, "a.txt"), "three"); touchLater(t, filepath.Join(dir, "a.txt")) }},
		{"untracked file", func() { write(t, filepath.Join(dir, "new/b.txt"), "b") }},
		{"stage", func() { git(t, dir, "add", ".") }},
		{"commit", func() { git(t, dir, "commit", "-qm", "more") }},
	}
	prev := base
	for _, s := range steps {
		s.change()
		got := fp(t, dir)
		if got == prev {
			t.Errorf("%s: fingerprint did not change", s.name)
		}
		prev = got
	}
	// Fingerprinting must not write: the index is untouched.
	idx := filepath.Join(dir, ".git", "index")
	before, _ := os.Stat(idx)
	fp(t, dir)
	after, _ := os.Stat(idx)
	if !before.ModTime().Equal(after.ModTime()) {
		t.Error("Fingerprint modified .git/index")
	}
}

func TestFingerprintNonGit(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "src/main.c"), "int main;")
	base := fp(t, dir)
	if fp(t, dir) != base {
		t.Fatal("unstable fingerprint")
	}
	write(t, filepath.Join(dir, "node_modules/x/y.js"), "dependency churn")
	if fp(t, dir) != base {
		t.Error("a change under node_modules counted as progress")
	}
	write(t, filepath.Join(dir, "src/main.c"), "int main(void){}")
	if fp(t, dir) == base {
		t.Error("an edit did not change the fingerprint of a non-git workspace")
	}
}

func TestReadPlan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "PLAN.md")
	write(t, path, "# Plan\n\n- [x] scaffold\n* [X] parse input\n- [ ] handle errors  \n  - [ ] nested detail\n- not a task\n+ [ ] docs\n")
	p, err := ReadPlan(filepath.Dir(path), path)
	if err != nil {
		t.Fatal(err)
	}
	want := Plan{Checked: 2, Unchecked: 3, Current: "handle errors"}
	if p != want {
		t.Errorf("ReadPlan = %+v, want %+v", p, want)
	}
	if _, err := ReadPlan("", filepath.Join(t.TempDir(), "missing.md")); err == nil {
		t.Error("missing plan file: no error")
	}
}

func TestResolveLikeGit(t *testing.T) {
	ctx := t.Context()
	repo := t.TempDir()
	git(t, repo, "init", "-q")
	deep := filepath.Join(repo, "src", "deep", "dir")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	realRepo, _ := filepath.EvalSymlinks(repo)
	plain := t.TempDir()
	tests := []struct {
		name, setup, dir, want string
	}{
		{name: "git top-level from a subdirectory", dir: deep, want: realRepo},
		{name: "nearest .loop wins over the top-level", setup: filepath.Join(repo, "src", ".loop"), dir: deep, want: filepath.Join(repo, "src")},
		{name: "the directory itself outside git", dir: plain, want: plain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != "" {
				if err := os.MkdirAll(tt.setup, 0o755); err != nil {
					t.Fatal(err)
				}
				defer os.RemoveAll(tt.setup)
			}
			if got := Resolve(ctx, tt.dir); got != tt.want {
				t.Fatalf("Resolve(%s) = %s, want %s", tt.dir, got, tt.want)
			}
		})
	}
}

// OpenRegular refuses what would block the daemon or lead a re-read goal
// or plan out of the workspace, and opens what the user named outside it.
func TestOpenRegular(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	for name, content := range map[string]string{"PLAN.md": "- [ ] x\n", "docs/goal.md": "goal\n"} {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "notes.md"), []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, link := range [][2]string{{"environ", "/proc/self/environ"}, {"urandom", "/dev/urandom"}, {"out", outside},
		{"goal.md", "docs/goal.md"}, {"fifolink", "fifo"}} {
		if err := os.Symlink(link[1], filepath.Join(ws, link[0])); err != nil {
			t.Fatal(err)
		}
	}
	for name, ok := range map[string]bool{"PLAN.md": true, "goal.md": true, "docs/../PLAN.md": true,
		"fifo": false, "fifolink": false, "environ": false, "urandom": false, "out/notes.md": false, "docs": false} {
		done := make(chan error, 1)
		go func() {
			f, err := OpenRegular(ws, filepath.Join(ws, name))
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if (err == nil) != ok {
				t.Errorf("OpenRegular(%s): %v, want ok=%v", name, err, ok)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("OpenRegular(%s) blocked", name)
		}
	}
	f, err := OpenRegular(ws, filepath.Join(outside, "notes.md"))
	if err != nil {
		t.Fatalf("a file the user named outside the workspace: %v", err)
	}
	f.Close()
}

// A symlinked .loop counts only when the link and its target are the
// user's; ownership is read with lstat, so a link another user made to a
// directory of the user's is not the user's .loop.
func TestLoopDirOwnership(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make files owned by another uid (lchown)")
	}
	ctx := t.Context()
	root := t.TempDir()
	mine := filepath.Join(root, "mine")
	theirs := filepath.Join(root, "theirs")
	for _, d := range []string{mine, theirs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// parent/.loop is made per case; parent/proj is where the run starts.
	tests := []struct {
		name      string
		make      func(loop string) error
		counts    bool
		mixed     bool // refused by ResolveChecked from below
		wantInErr string
	}{
		{name: "own directory", make: func(l string) error { return os.Mkdir(l, 0o755) }, counts: true},
		{name: "own link to own directory", make: func(l string) error { return os.Symlink(mine, l) }, counts: true},
		{name: "another user's directory", make: func(l string) error {
			if err := os.Mkdir(l, 0o755); err != nil {
				return err
			}
			return os.Chown(l, 65534, 65534)
		}, wantInErr: "it belongs to uid 65534"},
		{name: "another user's link to own directory", make: func(l string) error {
			if err := os.Symlink(mine, l); err != nil {
				return err
			}
			return os.Lchown(l, 65534, 65534)
		}, mixed: true, wantInErr: "symlink of uid 65534"},
		{name: "own link to another user's directory", make: func(l string) error { return os.Symlink(theirs, l) },
			mixed: true, wantInErr: "which belongs to uid 65534"},
		{name: "another user's link to their directory", make: func(l string) error {
			if err := os.Symlink(theirs, l); err != nil {
				return err
			}
			return os.Lchown(l, 65534, 65534)
		}, wantInErr: "symlink of uid 65534"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := filepath.Join(root, "p"+string(rune('a'+i)))
			proj := filepath.Join(parent, "proj")
			if err := os.MkdirAll(proj, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tt.make(filepath.Join(parent, ".loop")); err != nil {
				t.Fatal(err)
			}
			ok, err := LoopDir(parent)
			if ok != tt.counts {
				t.Errorf("LoopDir = %v, %v; want counts=%v", ok, err, tt.counts)
			}
			if tt.wantInErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantInErr)) {
				t.Errorf("LoopDir error = %v, want one saying %q", err, tt.wantInErr)
			}
			want := proj
			if tt.counts {
				want = parent
			}
			if got := Resolve(ctx, proj); got != want {
				t.Errorf("Resolve(proj) = %s, want %s", got, want)
			}
			ws, err := ResolveChecked(ctx, proj)
			if tt.mixed {
				if err == nil || !strings.Contains(err.Error(), tt.wantInErr) {
					t.Errorf("ResolveChecked(proj) = %s, %v; want refused", ws, err)
				}
			} else if err != nil || ws != want {
				t.Errorf("ResolveChecked(proj) = %s, %v; want %s", ws, err, want)
			}
			// Started in the directory itself, a .loop that does not count
			// is refused: it would be read as the workspace's config.
			if _, err := ResolveChecked(ctx, parent); (err != nil) == tt.counts {
				t.Errorf("ResolveChecked(parent) error = %v, want refused: %v", err, !tt.counts)
			}
		})
	}
}

// Every link on the way from .loop to its directory must be the user's
// (or root's): ws/.loop, the user's, leading to shared/.loop, another
// user's link, leading to a directory of the user's, is not the user's
// .loop: the other user can point the middle link anywhere.
func TestLoopDirSymlinkChain(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a symlink owned by another uid")
	}
	root := t.TempDir()
	target := filepath.Join(root, "mine")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(root, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	middle := filepath.Join(shared, ".loop")
	if err := os.Symlink(target, middle); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(root, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(middle, filepath.Join(ws, ".loop")); err != nil {
		t.Fatal(err)
	}
	// All the user's: a chain of links is fine.
	if ok, err := LoopDir(ws); !ok || err != nil {
		t.Fatalf("LoopDir with a chain of the user's own links = %v, %v; want true", ok, err)
	}
	if err := os.Lchown(middle, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	ok, err := LoopDir(ws)
	if ok || err == nil {
		t.Fatalf("LoopDir through another user's link = %v, %v; want a ForeignLoopError", ok, err)
	}
	if !strings.Contains(err.Error(), middle) || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("the refusal does not name the other user's link %s:\n%v", middle, err)
	}
	// Through a relative link, too.
	rel := filepath.Join(root, "ws2")
	if err := os.Mkdir(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../shared/.loop", filepath.Join(rel, ".loop")); err != nil {
		t.Fatal(err)
	}
	if ok, err := LoopDir(rel); ok || err == nil {
		t.Fatalf("LoopDir through another user's link, relative = %v, %v; want a ForeignLoopError", ok, err)
	}
}
