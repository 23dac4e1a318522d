package git

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// remote makes a bare repository with one commit on main, served as a
// file:// URL, and a clone of it to push more from; it returns the URL,
// the clone and the first commit.
func remote(t *testing.T) (url, clone, first string) {
	t.Helper()
	src := repo(t, map[string]string{"a.txt": "a\n"})
	bare := filepath.Join(t.TempDir(), "remote.git")
	gitT(t, src, "clone", "-q", "--bare", src, bare)
	url = "file://" + bare
	clone = filepath.Join(t.TempDir(), "clone")
	gitT(t, src, "clone", "-q", url, clone)
	return url, clone, gitT(t, clone, "rev-parse", "HEAD")
}

func commitIn(t *testing.T, dir, name, content string) string {
	t.Helper()
	write(t, dir, name, content)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-q", "-m", name)
	return gitT(t, dir, "rev-parse", "HEAD")
}

// Four runs of one repository start on one worker at once: one mirror is
// cloned, every worktree is added on its own branch at the base commit.
func TestMirrorSharedByConcurrentRuns(t *testing.T) {
	url, _, base := remote(t)
	m := Mirrors{Dir: filepath.Join(t.TempDir(), "mirrors")}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	paths := make([]string, 4)
	for i := range 4 {
		paths[i] = filepath.Join(t.TempDir(), "wt")
		wg.Go(func() {
			_, errs[i] = m.AddRunWorktree(ctx, RunWorktree{URL: url, Path: paths[i], Branch: "loop/r" + string(rune('0'+i)), Start: base})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if head := gitT(t, paths[i], "rev-parse", "HEAD"); head != base {
			t.Errorf("run %d's worktree is at %s, want the base %s", i, head, base)
		}
	}
	entries, _ := filepath.Glob(filepath.Join(m.Dir, "*.git"))
	if len(entries) != 1 || entries[0] != m.Path(url) {
		t.Fatalf("mirrors: %v, want exactly %s", entries, m.Path(url))
	}
}

// A commit pushed after the mirror was cloned is fetched when a run needs
// it; one that is nowhere is a clear error.
func TestMirrorFetchesAMissingBaseCommit(t *testing.T) {
	url, clone, base := remote(t)
	m := Mirrors{Dir: t.TempDir()}
	ctx := context.Background()
	if _, err := m.AddRunWorktree(ctx, RunWorktree{URL: url, Path: filepath.Join(t.TempDir(), "wt"), Branch: "loop/a", Start: base}); err != nil {
		t.Fatal(err)
	}
	later := commitIn(t, clone, "b.txt", "b\n")
	gitT(t, clone, "push", "-q", "origin", "HEAD:main")
	wt := filepath.Join(t.TempDir(), "wt")
	if _, err := m.AddRunWorktree(ctx, RunWorktree{URL: url, Path: wt, Branch: "loop/b", Start: later}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wt, "b.txt")); err != nil {
		t.Fatalf("the worktree at the later base lacks its file: %v", err)
	}
	missing := "0123456789012345678901234567890123456789"
	_, err := m.AddRunWorktree(ctx, RunWorktree{URL: url, Path: filepath.Join(t.TempDir(), "wt"), Branch: "loop/c", Start: missing})
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), url) {
		t.Fatalf("a commit that is nowhere: err = %v, want one naming the commit and the URL", err)
	}
}

// The run branch pushed with a lease on the last pushed commit: each
// push moves the remote branch by one commit; once someone else moved
// it, the push is refused (remote_moved) and the remote keeps their
// commit. Another worker's worktree then starts from the last pushed
// commit, without what the first had committed but not pushed.
func TestRunBranchPushedWithLeaseAndTakenOver(t *testing.T) {
	url, clone, base := remote(t)
	ctx := context.Background()
	w1 := Mirrors{Dir: t.TempDir()}
	wt1 := filepath.Join(t.TempDir(), "wt")
	mirror, err := w1.AddRunWorktree(ctx, RunWorktree{URL: url, Path: wt1, Branch: "loop/r", Start: base})
	if err != nil {
		t.Fatal(err)
	}
	rem := Remote{URL: url}
	pushed := ""
	for i, name := range []string{"it1.txt", "it2.txt"} {
		c := commitIn(t, wt1, name, name)
		if _, err := Push(ctx, PushInput{Dir: mirror, Remote: rem, Branch: "loop/r", Commit: c, Expect: pushed}); err != nil {
			t.Fatalf("push %d: %v", i+1, err)
		}
		if got, _ := RemoteBranch(ctx, mirror, rem, "loop/r"); got != c {
			t.Fatalf("after push %d the remote branch is at %s, want %s", i+1, got, c)
		}
		pushed = c
	}
	unpushed := commitIn(t, wt1, "it3.txt", "never pushed")

	// Worker 2 takes the run over from the last pushed commit.
	w2 := Mirrors{Dir: t.TempDir()}
	wt2 := filepath.Join(t.TempDir(), "wt")
	if _, err := w2.AddRunWorktree(ctx, RunWorktree{URL: url, Path: wt2, Branch: "loop/r", Start: pushed}); err != nil {
		t.Fatal(err)
	}
	if head := gitT(t, wt2, "rev-parse", "HEAD"); head != pushed {
		t.Fatalf("the taker's worktree is at %s, want the last pushed %s", head, pushed)
	}
	if _, err := os.Stat(filepath.Join(wt2, "it3.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the taker has the unpushed iteration's file (err %v)", err)
	}
	c2 := commitIn(t, wt2, "it3.txt", "redone")
	if _, err := Push(ctx, PushInput{Dir: wt2, Remote: rem, Branch: "loop/r", Commit: c2, Expect: pushed}); err != nil {
		t.Fatalf("the taker's push: %v", err)
	}

	// The first worker, a zombie now, pushes its stale commit: refused.
	_, err = Push(ctx, PushInput{Dir: mirror, Remote: rem, Branch: "loop/r", Commit: unpushed, Expect: pushed})
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Kind != RefusedRemoteMoved {
		t.Fatalf("the zombie's push: err = %v, want a remote_moved refusal", err)
	}
	if got, _ := RemoteBranch(ctx, clone, rem, "loop/r"); got != c2 {
		t.Fatalf("the remote branch is at %s after the refused push, want the taker's %s", got, c2)
	}
	// Each iteration is on the branch exactly once.
	gitT(t, clone, "fetch", "-q", "origin", "loop/r")
	log := gitT(t, clone, "log", "--format=%s", base+".."+c2)
	if log != "it3.txt\nit2.txt\nit1.txt" {
		t.Fatalf("the branch's history:\n%s", log)
	}

	// Worker 1 gets the run back later: its old worktree is reset to the
	// pushed commit, its unpushed work gone.
	if _, err := w1.AddRunWorktree(ctx, RunWorktree{URL: url, Path: wt1, Branch: "loop/r", Start: c2}); err != nil {
		t.Fatal(err)
	}
	if head := gitT(t, wt1, "rev-parse", "HEAD"); head != c2 {
		t.Fatalf("the returning worker's worktree is at %s, want %s", head, c2)
	}
	if b, _ := os.ReadFile(filepath.Join(wt1, "it3.txt")); string(b) != "redone" {
		t.Fatalf("it3.txt in the returning worker's worktree = %q, want the taker's", b)
	}
}

// A git command loopd runs in a run's worktree runs whatever the agent
// could put there (here a reference-transaction hook in the shared
// hooks directory, which the ledger's update-ref triggers): it gets no
// fleet credential from the worker's environment.
func TestGitCommandsCarryNoFleetCredentials(t *testing.T) {
	dir := repo(t, map[string]string{"a.txt": "a\n"})
	t.Setenv("LOOPD_STORE", "postgres://loopd:s3cret@db/loopd")
	t.Setenv("PGPASSWORD", "s3cret")
	t.Setenv("LOOPD_TOKEN", "loopd_tok")
	dump := filepath.Join(t.TempDir(), "hook-env")
	write(t, dir, ".git/hooks/reference-transaction", "#!/bin/sh\nenv > "+dump+"\n")
	if err := os.Chmod(filepath.Join(dir, ".git/hooks/reference-transaction"), 0o755); err != nil {
		t.Fatal(err)
	}
	head := gitT(t, dir, "rev-parse", "HEAD")
	if _, err := (Cmd{Dir: dir}).Run(context.Background(), "update-ref", "refs/heads/other", head); err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile(dump)
	if err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	for _, bad := range []string{"LOOPD_STORE=", "PGPASSWORD=", "LOOPD_TOKEN=", "s3cret"} {
		if strings.Contains(string(env), bad) {
			t.Errorf("a hook run by loopd's git saw %q", bad)
		}
	}
}
