package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// holdCheckout makes every checkout of a .txt file in the repository (the
// user's checkout and every worktree) wait in git's smudge filter while
// the file hold exists: git is then in the middle of writing the working
// tree, its index.lock taken. The filter writes its parent's pid (the
// git at work) into <hold>.waiting, atomically, once it waits.
func (e *env) holdCheckout(hold string) {
	e.t.Helper()
	filter := filepath.Join(e.home, "smudge-hold")
	script := "#!/bin/sh\nif [ -f " + hold + " ]; then\n  echo \"$PPID\" > " + hold + ".tmp && mv " + hold + ".tmp " + hold + ".waiting\n" +
		"  while [ -f " + hold + " ]; do sleep 0.05; done\nfi\nexec cat\n"
	if err := os.WriteFile(filter, []byte(script), 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.git("config", "filter.hold.smudge", filter)
	if err := os.WriteFile(filepath.Join(e.ws, ".git", "info", "attributes"), []byte("*.txt filter=hold\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// heldGit is the pid of the git the smudge filter holds.
func (e *env) heldGit(hold string) int {
	e.t.Helper()
	b, err := os.ReadFile(hold + ".waiting")
	if err != nil {
		e.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		e.t.Fatalf("%s: %q", hold+".waiting", b)
	}
	if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) != "git" {
		e.t.Fatalf("the held process %d is %q, not git", pid, comm)
	}
	return pid
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// worktreeLock is the index.lock of a run's worktree, in the repository's
// .git/worktrees/<name>/.
func (e *env) worktreeLock(run api.Run) string {
	e.t.Helper()
	gitDir := e.gitIn(run.Worktree, "rev-parse", "--path-format=absolute", "--git-dir")
	return filepath.Join(gitDir, "index.lock")
}

// landIntoMovedBase is a finished worktree run whose base branch has
// moved since: its land checks the combination out in the run's worktree.
func (e *env) landIntoMovedBase() api.Run {
	e.t.Helper()
	e.startDaemon()
	e.landRepo()
	run := e.finishedRun()
	e.commitOnMain(map[string]string{"user.txt": "the user's work\n"})
	return run
}

// A SIGTERM to the daemon while a land checks the combination out in the
// run's worktree lets git finish: it used to kill it, leaving
// .git/worktrees/<run>/index.lock, and every later land of the run failed
// (exit 70) until the file was removed by hand.
func TestSIGTERMDuringALandsCheckoutLeavesNoGitLock(t *testing.T) {
	e := newEnv(t)
	run := e.landIntoMovedBase()
	hold := filepath.Join(e.home, "hold-checkout")
	e.holdCheckout(hold)
	land, _ := e.landHeld(run.ID, hold, "the land's checkout of the combination to hold in git's smudge filter")
	pid := e.heldGit(hold)
	lock := e.worktreeLock(run)
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("git holds no %s mid-checkout: %v", lock, err)
	}
	e.stopDaemon() // SIGTERM
	_ = land.Wait()
	os.Remove(hold)
	eventually(t, "the land's git to end", 20*time.Second, func() bool { return !running(pid) })
	if _, err := os.Stat(lock); err == nil {
		t.Fatalf("loopd's shutdown left %s behind", lock)
	}
	e.startDaemon()
	res, ref, code := e.landJSON(run.ID)
	if code != 0 || res.Mode != "merge" || !res.Verified {
		t.Fatalf("land after the restart: exit %d, %+v, refusal %+v", code, res, ref)
	}
	if br := e.gitIn(run.Worktree, "symbolic-ref", "--short", "HEAD"); br != run.Branch {
		t.Errorf("the worktree is on %q, want %s", br, run.Branch)
	}
}

// A git killed in the middle of a land's checkout (an OOM kill, a crash,
// an older loopd's shutdown) leaves its index.lock in the run's worktree:
// the next land removes it, as no process holds it, and lands.
func TestALandRecoversFromAStaleLockInTheRunsWorktree(t *testing.T) {
	e := newEnv(t)
	run := e.landIntoMovedBase()
	hold := filepath.Join(e.home, "hold-checkout")
	e.holdCheckout(hold)
	land, _ := e.landHeld(run.ID, hold, "the land's checkout of the combination to hold in git's smudge filter")
	pid := e.heldGit(hold)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The orphaned filter ends (it holds the killed git's stderr, which
	// the daemon reads to its end).
	os.Remove(hold)
	_ = land.Wait()
	lock := e.worktreeLock(run)
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the killed git left no %s: the test did not kill it mid-write (%v)", lock, err)
	}
	// A lock a live process holds is not stale: it stays, and the land
	// says git's own error.
	holder := exec.Command("sh", "-c", "exec 3<\"$0\"; touch \"$0.held\"; while [ -f \"$0.held\" ]; do sleep 0.05; done", lock)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lock to be held open", 10*time.Second, func() bool {
		_, err := os.Stat(lock + ".held")
		return err == nil
	})
	if r := e.loopctl("land", run.ID); r.code == 0 || !strings.Contains(r.stderr, "index.lock") {
		t.Fatalf("land with the lock held: exit %d, want git's own error about it\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the held lock was removed: %v", err)
	}
	os.Remove(lock + ".held")
	_ = holder.Wait()
	res, ref, code := e.landJSON(run.ID)
	if code != 0 || res.Mode != "merge" || !res.Verified {
		t.Fatalf("land after a git was killed mid-checkout: exit %d, %+v, refusal %+v", code, res, ref)
	}
	if !strings.Contains(e.daemonLog(), "removed a stale git lock") {
		t.Error("the daemon did not log the stale lock it removed")
	}
	if br := e.gitIn(run.Worktree, "symbolic-ref", "--short", "HEAD"); br != run.Branch {
		t.Errorf("the worktree is on %q, want %s", br, run.Branch)
	}
}
