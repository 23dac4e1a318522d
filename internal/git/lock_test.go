package git

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// ClearStaleLocks removes a linked worktree's index.lock that no process
// holds, leaves one a process has open, and never touches the locks of a
// main working tree (the user's checkout).
func TestClearStaleLocks(t *testing.T) {
	ctx := t.Context()
	dir := repo(t, map[string]string{"a.txt": "a\n"})
	wt := filepath.Join(t.TempDir(), "wt")
	gitT(t, dir, "worktree", "add", "-q", "-b", "loop/x", wt)
	gitDir := gitT(t, wt, "rev-parse", "--path-format=absolute", "--git-dir")
	lock := filepath.Join(gitDir, "index.lock")

	userLock := filepath.Join(dir, ".git", "index.lock")
	write(t, dir, ".git/index.lock", "")
	if removed, err := ClearStaleLocks(ctx, dir); err == nil || len(removed) != 0 {
		t.Fatalf("the main working tree's locks: removed %v, err %v; want a refusal", removed, err)
	}
	if _, err := os.Stat(userLock); err != nil {
		t.Fatalf("the user's index.lock was removed: %v", err)
	}
	os.Remove(userLock)

	write(t, gitDir, "index.lock", "")
	holder := exec.Command("sh", "-c", `exec 3<"$0"; touch "$0.held"; while [ -f "$0.held" ]; do sleep 0.02; done`, lock)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(lock + ".held"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if removed, err := ClearStaleLocks(ctx, wt); err != nil || len(removed) != 0 {
		t.Fatalf("a held lock: removed %v, err %v", removed, err)
	}
	os.Remove(lock + ".held")
	_ = holder.Wait()
	removed, err := ClearStaleLocks(ctx, wt)
	if err != nil || len(removed) != 1 || removed[0] != lock {
		t.Fatalf("a stale lock: removed %v, err %v; want %s", removed, err, lock)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Fatalf("the stale lock is still there: %v", err)
	}
	gitT(t, wt, "checkout", "-q", "--detach", "HEAD") // git works there again
}
