//go:build unix

package procgroup

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A canceled command dies with the children it started.
func TestCancelKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", "sleep 1000 & echo $! > child; touch ready; wait")
	cmd.Dir = dir
	Set(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start its child")
		}
		time.Sleep(5 * time.Millisecond)
	}
	b, err := os.ReadFile(filepath.Join(dir, "child"))
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	cancel()
	_ = cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(child, 0) == nil; {
		// The killed child is a zombie of init or of this test's subreaper
		// until reaped; its stat says so.
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat"); err == nil && strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(child, syscall.SIGKILL)
			t.Fatal("the command's child outlived its cancellation")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Once the leader is reaped, Cancel says the process is done (exec.Cmd's
// contract for a cancellation that came too late) rather than an error.
func TestCancelAfterReapSaysDone(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "/bin/sh", "-c", "exit 0")
	Set(cmd)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Cancel(); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Cancel after the leader was reaped: %v, want os.ErrProcessDone", err)
	}
}
