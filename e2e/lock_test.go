package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A daemon started right after a kill -9 of the previous one can find the
// lock still held: a child the dead daemon was forking shares its lock
// until it execs. The recorded holder is dead, so the new daemon waits for
// the lock instead of exiting 75 (which systemd does not retry).
func TestDaemonWaitsForALockItsDeadHolderLeft(t *testing.T) {
	e := newEnv(t)
	// A pid that was a process and is no more: the crashed daemon's.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	lockPath := filepath.Join(e.home, "loopd.lock")
	if err := os.WriteFile(lockPath, []byte(strconv.Itoa(gone.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The test holds the lock as the dead daemon's child would: another
	// process, whose pid is not the one recorded.
	holder, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	// Let go of the lock once the daemon says it waits for it.
	logPath := filepath.Join(e.home, fmt.Sprintf("daemon-%d.log", len(e.logs)+1))
	released := make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "waiting for the home's lock") {
				released <- syscall.Flock(int(holder.Fd()), syscall.LOCK_UN) == nil
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		released <- false
	}()
	e.startDaemon() // fails the test if loopd exits (75) instead of waiting
	if !<-released {
		t.Fatalf("the daemon never said it waits for the lock:\n%s", e.daemonLog())
	}
	b, _ := os.ReadFile(lockPath)
	if got, _, _ := strings.Cut(strings.TrimSpace(string(b)), " "); got != strconv.Itoa(e.daemon.Process.Pid) {
		t.Fatalf("loopd.lock records pid %q, want the new daemon's %d", got, e.daemon.Process.Pid)
	}
}
