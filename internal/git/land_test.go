package git

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// testRepo is a real repository with a checkout on main and a run
// worktree on loop/t, as loopd makes them.
type testRepo struct {
	t        *testing.T
	checkout string
	worktree string
	base     string // main's commit when the run started
}

func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	root := t.TempDir()
	r := &testRepo{t: t, checkout: filepath.Join(root, "repo"), worktree: filepath.Join(root, "wt")}
	r.git(root, "init", "-q", "-b", "main", r.checkout)
	r.write(r.checkout, "a.txt", "one\ntwo\nthree\n")
	r.commitAll(r.checkout, "first")
	r.base = r.git(r.checkout, "rev-parse", "HEAD")
	r.git(r.checkout, "worktree", "add", "-q", "-b", "loop/t", r.worktree)
	return r
}

func (r *testRepo) git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *testRepo) write(dir, name, content string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *testRepo) commitAll(dir, msg string) string {
	r.t.Helper()
	r.git(dir, "add", "-A")
	r.git(dir, "commit", "-q", "-m", msg)
	return r.git(dir, "rev-parse", "HEAD")
}

func (r *testRepo) input() LandInput {
	return LandInput{Checkout: r.checkout, Branch: "loop/t", BaseBranch: "main", BaseCommit: r.base}
}

// snapshot is everything land must not change when it refuses: HEAD, every
// ref, the index file's bytes and the working tree's files.
func (r *testRepo) snapshot() string {
	r.t.Helper()
	var b bytes.Buffer
	b.WriteString(r.git(r.checkout, "symbolic-ref", "-q", "HEAD") + "\n")
	b.WriteString(r.git(r.checkout, "for-each-ref", "--format=%(refname) %(objectname)") + "\n")
	idx, err := os.ReadFile(filepath.Join(r.checkout, ".git", "index"))
	if err != nil {
		r.t.Fatal(err)
	}
	b.Write(idx)
	_ = filepath.WalkDir(r.checkout, func(p string, d os.DirEntry, err error) error {
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			c, _ := os.ReadFile(p)
			b.WriteString(p + "\n")
			b.Write(c)
		}
		return nil
	})
	return b.String()
}

func TestLandFastForward(t *testing.T) {
	r := newTestRepo(t)
	r.write(r.worktree, "b.txt", "new\n")
	tip := r.commitAll(r.worktree, "loop t: iteration 1")
	p, err := PlanLand(t.Context(), r.input())
	if err != nil {
		t.Fatal(err)
	}
	if p.Moved || p.Mode != LandFastForward || p.Target != tip {
		t.Fatalf("plan = %+v, want fast-forward to %s", p, tip)
	}
	if err := ApplyLand(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if got := r.git(r.checkout, "rev-parse", "main"); got != tip {
		t.Fatalf("main = %s, want %s", got, tip)
	}
	if b, _ := os.ReadFile(filepath.Join(r.checkout, "b.txt")); string(b) != "new\n" {
		t.Fatalf("checkout's b.txt = %q", b)
	}
}

func TestLandMergeWhenBaseMoved(t *testing.T) {
	r := newTestRepo(t)
	r.write(r.worktree, "b.txt", "run\n")
	runTip := r.commitAll(r.worktree, "loop t: iteration 1")
	r.write(r.checkout, "c.txt", "user\n")
	baseTip := r.commitAll(r.checkout, "user work")
	p, err := PlanLand(t.Context(), r.input())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Moved || p.Mode != LandMerge || p.Target != p.Combined || p.Combined == "" {
		t.Fatalf("plan = %+v, want a merge", p)
	}
	if got := r.git(r.checkout, "rev-parse", "main"); got != baseTip {
		t.Fatalf("PlanLand moved main to %s", got)
	}
	// The combination is tested in the worktree, detached, and the run's
	// branch does not move.
	if err := CheckoutDetached(t.Context(), r.worktree, p.Combined); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.worktree, "c.txt")); err != nil {
		t.Fatalf("the combination lacks the base's file: %v", err)
	}
	if err := RestoreBranch(t.Context(), r.worktree, "loop/t"); err != nil {
		t.Fatal(err)
	}
	if got := r.git(r.worktree, "symbolic-ref", "--short", "HEAD"); got != "loop/t" {
		t.Fatalf("worktree on %s after restore", got)
	}
	if err := ApplyLand(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	parents := r.git(r.checkout, "log", "-1", "--format=%P", "main")
	if parents != baseTip+" "+runTip {
		t.Fatalf("merge parents = %q, want %s %s", parents, baseTip, runTip)
	}
}

func TestLandSquash(t *testing.T) {
	r := newTestRepo(t)
	r.write(r.worktree, "b.txt", "1\n")
	r.commitAll(r.worktree, "loop t: iteration 1")
	r.write(r.worktree, "b.txt", "2\n")
	runTip := r.commitAll(r.worktree, "loop t: iteration 2")
	in := r.input()
	in.Squash, in.Message = true, "the goal, squashed"
	p, err := PlanLand(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyLand(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if got := r.git(r.checkout, "log", "-1", "--format=%P%n%s", "main"); got != r.base+"\nthe goal, squashed" {
		t.Fatalf("squash commit = %q", got)
	}
	if a, b := r.git(r.checkout, "rev-parse", "main^{tree}"), r.git(r.checkout, "rev-parse", runTip+"^{tree}"); a != b {
		t.Fatalf("squash tree %s differs from the run's %s", a, b)
	}
}

func TestLandRefusalsChangeNothing(t *testing.T) {
	cases := []struct {
		name  string
		setup func(r *testRepo)
		want  RefusalKind
	}{
		{"conflict", func(r *testRepo) {
			r.write(r.worktree, "a.txt", "one\nRUN\nthree\n")
			r.commitAll(r.worktree, "loop t: iteration 1")
			r.write(r.checkout, "a.txt", "one\nUSER\nthree\n")
			r.commitAll(r.checkout, "user")
		}, RefusedConflict},
		{"dirty", func(r *testRepo) {
			r.write(r.worktree, "b.txt", "x\n")
			r.commitAll(r.worktree, "loop t: iteration 1")
			r.write(r.checkout, "a.txt", "edited, not committed\n")
		}, RefusedDirty},
		{"staged", func(r *testRepo) {
			r.write(r.worktree, "b.txt", "x\n")
			r.commitAll(r.worktree, "loop t: iteration 1")
			r.write(r.checkout, "new.txt", "staged\n")
			r.git(r.checkout, "add", "new.txt")
		}, RefusedDirty},
		{"wrong branch", func(r *testRepo) {
			r.write(r.worktree, "b.txt", "x\n")
			r.commitAll(r.worktree, "loop t: iteration 1")
			r.git(r.checkout, "switch", "-q", "-c", "other")
		}, RefusedWrongBranch},
		{"nothing", func(r *testRepo) {}, RefusedNothing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			tc.setup(r)
			before := r.snapshot()
			_, err := PlanLand(t.Context(), r.input())
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Kind != tc.want {
				t.Fatalf("PlanLand = %v, want a %s refusal", err, tc.want)
			}
			if tc.want != RefusedNothing && len(ref.Hand) == 0 {
				t.Fatalf("refusal %q gives no commands to finish by hand", ref.Message)
			}
			if after := r.snapshot(); after != before {
				t.Fatal("a refused land changed the checkout")
			}
		})
	}
}

func TestApplyLandRefusesWhenBaseMovedMeanwhile(t *testing.T) {
	r := newTestRepo(t)
	r.write(r.worktree, "b.txt", "x\n")
	r.commitAll(r.worktree, "loop t: iteration 1")
	p, err := PlanLand(t.Context(), r.input())
	if err != nil {
		t.Fatal(err)
	}
	r.write(r.checkout, "c.txt", "meanwhile\n")
	r.commitAll(r.checkout, "meanwhile")
	before := r.snapshot()
	var ref *Refusal
	if err := ApplyLand(t.Context(), p); !errors.As(err, &ref) || ref.Kind != RefusedBaseMoved {
		t.Fatalf("ApplyLand = %v, want base_moved", err)
	}
	if r.snapshot() != before {
		t.Fatal("ApplyLand changed the checkout")
	}
}

func TestReconcileAndRemoveOnlyRecorded(t *testing.T) {
	r := newTestRepo(t)
	hand := filepath.Join(filepath.Dir(r.worktree), "hand")
	r.git(r.checkout, "worktree", "add", "-q", "-b", "loop/hand", hand)
	common := filepath.Join(r.checkout, ".git")
	list, err := ListWorktrees(t.Context(), common)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || !WorktreePresent(list, r.worktree) || !WorktreePresent(list, hand) {
		t.Fatalf("worktrees = %+v", list)
	}
	if err := os.RemoveAll(r.worktree); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(hand); err != nil {
		t.Fatal(err)
	}
	list, _ = ListWorktrees(t.Context(), common)
	if WorktreePresent(list, r.worktree) {
		t.Fatal("a deleted worktree is present")
	}
	// Removing ours drops its stale entry and leaves the hand-made one's.
	if err := RemoveWorktree(t.Context(), common, r.worktree); err != nil {
		t.Fatal(err)
	}
	if err := RemoveWorktree(t.Context(), common, r.worktree); err != nil {
		t.Fatalf("a second removal: %v", err)
	}
	list, _ = ListWorktrees(t.Context(), common)
	if len(list) != 2 || list[1].Path != hand || !list[1].Prunable || list[1].Branch != "loop/hand" {
		t.Fatalf("after removal: %+v", list)
	}
}

func TestDiffAndStat(t *testing.T) {
	r := newTestRepo(t)
	r.write(r.worktree, "a.txt", "one\n2\nthree\nfour\n")
	if err := os.WriteFile(filepath.Join(r.worktree, "bin"), []byte{0, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	tip := r.commitAll(r.worktree, "loop t: iteration 1")
	st, err := Stat(t.Context(), r.checkout, r.base, tip)
	if err != nil {
		t.Fatal(err)
	}
	if st.FilesChanged != 2 || st.Insertions != 2 || st.Deletions != 1 || !st.Files[1].Binary {
		t.Fatalf("stat = %+v", st)
	}
	var b bytes.Buffer
	if err := StreamDiff(t.Context(), r.checkout, r.base, tip, DiffOptions{}, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "-two\n+2\n") {
		t.Fatalf("diff:\n%s", b.String())
	}
	root, err := FirstParent(t.Context(), r.checkout, r.base)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := StreamDiff(t.Context(), r.checkout, root, r.base, DiffOptions{Stat: true}, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "a.txt | 3 +++") {
		t.Fatalf("root diff --stat:\n%s", b.String())
	}
}

// A huge diff goes from git to the writer without the daemon holding it:
// the bytes allocated while streaming stay a small fraction of the diff.
func TestStreamDiffDoesNotHoldTheDiff(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 16 MiB file")
	}
	r := newTestRepo(t)
	line := strings.Repeat("x", 99) + "\n"
	r.write(r.worktree, "big.txt", strings.Repeat(line, 160_000)) // 16 MB
	tip := r.commitAll(r.worktree, "loop t: iteration 1")
	var n countingWriter
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := StreamDiff(t.Context(), r.checkout, r.base, tip, DiffOptions{}, &n); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n < 16_000_000 {
		t.Fatalf("streamed %d bytes, want the whole 16 MB diff", n)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("streamed %d bytes of diff, allocated %d bytes", n, alloc)
	if alloc > uint64(n)/8 {
		t.Errorf("streaming a %d-byte diff allocated %d bytes", n, alloc)
	}
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// An untracked file of the user's that the land would overwrite: git
// refuses before it writes anything, and the refusal says so.
func TestApplyLandKeepsAnUntrackedFileItWouldOverwrite(t *testing.T) {
	r := newTestRepo(t)
	r.write(r.worktree, "b.txt", "the run's\n")
	r.commitAll(r.worktree, "loop t: iteration 1")
	r.write(r.checkout, "b.txt", "the user's, never committed\n")
	p, err := PlanLand(t.Context(), r.input())
	if err != nil {
		t.Fatal(err)
	}
	before := r.snapshot()
	var ref *Refusal
	if err := ApplyLand(t.Context(), p); !errors.As(err, &ref) || ref.Kind != RefusedCheckout || !strings.Contains(ref.Message, "b.txt") {
		t.Fatalf("ApplyLand = %v, want git's refusal naming b.txt", err)
	}
	if r.snapshot() != before {
		t.Fatal("a refused fast-forward changed the checkout")
	}
}

// testdata/worktree-list-porcelain.txt is git 2.39's own output for a
// checkout with a detached, a removed (prunable) and a locked worktree.
func TestParseWorktreeList(t *testing.T) {
	b, err := os.ReadFile("testdata/worktree-list-porcelain.txt")
	if err != nil {
		t.Fatal(err)
	}
	list := parseWorktreeList(string(b))
	want := []WorktreeEntry{
		{Path: "/tmp/tmp.MKsXEFgibw/r", Head: "bfcffc32999a0075e9be817cbfcf926f84c10cde", Branch: "main"},
		{Path: "/tmp/tmp.MKsXEFgibw/detached", Head: "bfcffc32999a0075e9be817cbfcf926f84c10cde", Detached: true},
		{Path: "/tmp/tmp.MKsXEFgibw/gone", Head: "bfcffc32999a0075e9be817cbfcf926f84c10cde", Branch: "loop/gone", Prunable: true},
		{Path: "/tmp/tmp.MKsXEFgibw/locked", Head: "bfcffc32999a0075e9be817cbfcf926f84c10cde", Branch: "loop/locked", Locked: true},
	}
	if len(list) != len(want) {
		t.Fatalf("parsed %d entries: %+v", len(list), list)
	}
	for i := range want {
		if list[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, list[i], want[i])
		}
	}
	if WorktreePresent(list, "/tmp/tmp.MKsXEFgibw/gone") {
		t.Error("a prunable worktree is present")
	}
}
