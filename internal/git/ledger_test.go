package git

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repo makes a git repository with one commit holding files, with no
// user identity configured (HOME points to an empty directory).
func repo(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for name, content := range files {
		write(t, dir, name, content)
	}
	gitT(t, dir, "init", "-q", "-b", "main")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "-c", "gc.auto=0", "-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-q", "-m", "first")
	return dir
}

func write(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := Cmd{Dir: dir}.Output(context.Background(), args...)
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return out
}

// hashTree hashes every file under dir, .git included (index, refs,
// HEAD), so that any write to a checkout shows.
func hashTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWorktreeLedgerCommitsEachStepOnce(t *testing.T) {
	ctx := t.Context()
	dir := repo(t, map[string]string{"a.txt": "one\n", "b.bin": "x"})
	r, err := Inspect(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	before := hashTree(t, dir)
	wt := filepath.Join(t.TempDir(), "worktrees", "run1")
	if err := AddWorktree(ctx, dir, wt, "loop/run1", r.Head); err != nil {
		t.Fatal(err)
	}
	l := &Ledger{Dir: wt, RunID: "run1", Short: "run1"}

	// Nothing changed: no commit.
	ch, err := l.CommitWorktree(ctx, 1, 1, r.Head)
	if err != nil || ch.Commit != "" || ch.FilesChanged != 0 {
		t.Fatalf("no change: %+v, %v", ch, err)
	}

	write(t, wt, "a.txt", "one\ntwo\nthree\n")
	write(t, wt, "new/c.txt", "c\n")
	write(t, wt, "img.bin", "\x00\x01\x02binary")
	ch, err = l.CommitWorktree(ctx, 2, 1, r.Head)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Commit == "" || ch.FilesChanged != 3 || ch.Insertions != 3 || ch.Deletions != 0 || ch.BinaryFiles != 1 {
		t.Fatalf("change: %+v", ch)
	}
	if want := []string{"a.txt", "img.bin", "new/c.txt"}; !slices.Equal(ch.Files, want) {
		t.Fatalf("files %v, want %v", ch.Files, want)
	}
	if got := gitT(t, wt, "log", "-1", "--format=%s%n%an <%ae>", "loop/run1"); got != "loop run1: iteration 1\nloopd <loopd@localhost>" {
		t.Fatalf("commit: %q", got)
	}
	if got := gitT(t, wt, "status", "--porcelain"); got != "" {
		t.Fatalf("worktree not clean after the ledger: %q", got)
	}

	// Recording the same step again (a daemon crash before its database
	// record) finds the commit: no second one.
	again, err := l.CommitWorktree(ctx, 2, 1, r.Head)
	if err != nil || again.Commit != ch.Commit || again.FilesChanged != 3 {
		t.Fatalf("again: %+v, %v (first %s)", again, err, ch.Commit)
	}
	if n := gitT(t, wt, "rev-list", "--count", r.Head+"..loop/run1"); n != "1" {
		t.Fatalf("%s commits on the branch, want 1", n)
	}

	// The agent's own commit counts in its step's change.
	write(t, wt, "a.txt", "one\n")
	gitT(t, wt, "-c", "user.name=agent", "-c", "user.email=a@example.com", "commit", "-q", "-am", "agent")
	ch3, err := l.CommitWorktree(ctx, 3, 2, ch.Commit)
	if err != nil || ch3.FilesChanged != 1 || ch3.Deletions != 2 || ch3.Commit != gitT(t, wt, "rev-parse", "HEAD") {
		t.Fatalf("agent commit: %+v, %v", ch3, err)
	}

	after := hashTree(t, dir)
	// The worktree's own metadata lives in the common git directory; the
	// user's checkout (files, index, HEAD, branches) is unchanged.
	for name, sum := range before {
		if after[name] != sum {
			t.Errorf("%s changed in the user's checkout", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok && !strings.HasPrefix(name, ".git/worktrees/") && name != ".git/refs/heads/loop/run1" &&
			!strings.HasPrefix(name, ".git/logs/refs/heads/loop/") && !strings.HasPrefix(name, ".git/objects/") {
			t.Errorf("%s appeared in the user's checkout", name)
		}
	}
}

func TestSnapshotLeavesTheCheckoutUntouched(t *testing.T) {
	ctx := t.Context()
	dir := repo(t, map[string]string{"a.txt": "one\n", ".gitignore": "*.log\n"})
	// The user's own state: a staged change, an unstaged one, a stash.
	write(t, dir, "a.txt", "stashed\n")
	gitT(t, dir, "-c", "user.name=u", "-c", "user.email=u@example.com", "stash", "-q")
	write(t, dir, "staged.txt", "s\n")
	gitT(t, dir, "add", "staged.txt")
	write(t, dir, "a.txt", "one\nedited\n")

	status := gitT(t, dir, "status", "--porcelain")
	stash := gitT(t, dir, "stash", "list")
	head := gitT(t, dir, "rev-parse", "HEAD")
	refs := gitT(t, dir, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/stash")
	indexBytes, _ := os.ReadFile(filepath.Join(dir, ".git", "index"))

	l := &Ledger{Dir: dir, Index: filepath.Join(t.TempDir(), "ledger.index"), RunID: "r2", Short: "r2"}
	base, err := l.Baseline(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := l.Baseline(ctx); again != base {
		t.Fatalf("a second baseline %s replaced %s", again, base)
	}
	ch, err := l.Snapshot(ctx, 1, 1, base)
	if err != nil || ch.Commit != "" {
		t.Fatalf("no change: %+v, %v", ch, err)
	}
	write(t, dir, "b.txt", "b1\nb2\n")
	write(t, dir, "debug.log", "ignored\n")
	os.Remove(filepath.Join(dir, "staged.txt"))
	ch, err = l.Snapshot(ctx, 2, 1, base)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Commit == "" || ch.FilesChanged != 2 || ch.Insertions != 2 || ch.Deletions != 1 ||
		!slices.Equal(ch.Files, []string{"b.txt", "staged.txt"}) {
		t.Fatalf("snapshot: %+v", ch)
	}
	if got := gitT(t, dir, "rev-parse", SnapshotRef("r2", 1)); got != ch.Commit {
		t.Fatalf("ref %s, want %s", got, ch.Commit)
	}
	if again, err := l.Snapshot(ctx, 2, 1, base); err != nil || again.Commit != ch.Commit {
		t.Fatalf("again: %+v, %v", again, err)
	}
	// Undo the "agent's" work: what remains must be the user's state, exactly.
	write(t, dir, "staged.txt", "s\n")
	os.Remove(filepath.Join(dir, "b.txt"))
	os.Remove(filepath.Join(dir, "debug.log"))

	if got := gitT(t, dir, "status", "--porcelain"); got != status {
		t.Errorf("status changed:\n%s\nwant:\n%s", got, status)
	}
	if got := gitT(t, dir, "stash", "list"); got != stash {
		t.Errorf("stash list changed: %q, want %q", got, stash)
	}
	if got := gitT(t, dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved")
	}
	if got := gitT(t, dir, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/stash"); got != refs {
		t.Errorf("branches changed: %s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".git", "index")); string(b) != string(indexBytes) {
		t.Errorf("the user's index file changed")
	}
}

func TestBigFilesAreCountedNotDiffed(t *testing.T) {
	ctx := t.Context()
	dir := repo(t, map[string]string{"a.txt": "a\n"})
	big := strings.Repeat("a line of generated text\n", 300_000) // 7.5 MB of text
	write(t, dir, "gen.txt", big)
	l := &Ledger{Dir: dir, Index: filepath.Join(t.TempDir(), "i"), RunID: "r3", Short: "r3"}
	ch, err := l.Snapshot(ctx, 1, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	// Above core.bigFileThreshold it is binary to git: counted as a
	// changed file, its lines not counted.
	if ch.FilesChanged != 1 || ch.Insertions != 0 || ch.BinaryFiles != 1 {
		t.Fatalf("big file: %+v", ch)
	}
}

func TestParseNumstatCapsTheFileList(t *testing.T) {
	var b strings.Builder
	for i := range MaxFiles + 5 {
		b.WriteString("1\t2\tf" + strings.Repeat("x", i%3) + "\x00")
	}
	b.WriteString("-\t-\tbin\x00")
	ch := parseNumstat([]byte(b.String()))
	if ch.FilesChanged != MaxFiles+6 || len(ch.Files) != MaxFiles || ch.Insertions != MaxFiles+5 || ch.Deletions != 2*(MaxFiles+5) || ch.BinaryFiles != 1 {
		t.Fatalf("%d files (%d listed), +%d -%d", ch.FilesChanged, len(ch.Files), ch.Insertions, ch.Deletions)
	}
}

func TestInspect(t *testing.T) {
	ctx := t.Context()
	dir := repo(t, map[string]string{"src/deep/x.go": "package x\n"})
	r, err := Inspect(ctx, filepath.Join(dir, "src", "deep"))
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if r.TopLevel != real || r.Prefix != "src/deep" || r.Branch != "main" || len(r.Head) < 40 ||
		r.CommonDir != filepath.Join(real, ".git") {
		t.Fatalf("%+v", r)
	}
	if _, err := Inspect(ctx, t.TempDir()); err != ErrNotRepository {
		t.Fatalf("not a repository: %v", err)
	}
	if ch, err := Uncommitted(ctx, dir); err != nil || len(ch) != 0 {
		t.Fatalf("clean repo: %v %v", ch, err)
	}
	write(t, dir, "new.txt", "n")
	write(t, dir, "src/deep/x.go", "package y\n")
	write(t, dir, "moved.go", "package x\n")
	gitT(t, dir, "mv", "src/deep/x.go", "src/deep/renamed.go")
	write(t, dir, "dir/a", "a")
	ch, err := Uncommitted(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(ch)
	if want := "[{src/deep/renamed.go false} {dir/ true} {moved.go true} {new.txt true}]"; got != want {
		t.Fatalf("Uncommitted = %s, want %s", got, want)
	}
}
