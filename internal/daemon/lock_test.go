package daemon

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// The lock's descriptor is close-on-exec: a process the daemon starts
// does not carry the lock past its exec.
func TestLockIsCloseOnExec(t *testing.T) {
	home := t.TempDir()
	f, err := lock(home, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Fatal("loopd.lock's descriptor is inherited across exec")
	}
	// And so a child, once exec'd, holds no descriptor of it.
	out, err := exec.Command("ls", "-l", "/proc/self/fd/").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "loopd.lock") {
		t.Fatalf("a child holds loopd.lock:\n%s", out)
	}
}

// A lock held by another process while the recorded loopd is alive is
// refused at once; while the recorded loopd has exited, it is waited for,
// up to lockWait, and the refusal then says the holder is not that loopd.
func TestLockHolders(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	defer func(w time.Duration) { lockWait = w }(lockWait)
	lockWait = 300 * time.Millisecond
	tests := []struct {
		name       string
		recorded   int
		wantWait   bool
		wantExited bool
	}{
		{"live holder", os.Getpid(), false, false},
		{"dead holder", gone.Process.Pid, true, true},
		{"no pid recorded", 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			path := filepath.Join(home, "loopd.lock")
			rec := ""
			if tt.recorded > 0 {
				rec = strconv.Itoa(tt.recorded) + "\n"
			}
			if err := os.WriteFile(path, []byte(rec), 0o600); err != nil {
				t.Fatal(err)
			}
			holder, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close()
			if err := unix.Flock(int(holder.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			f, err := lock(home, zap.NewNop())
			waited := time.Since(start)
			var locked *LockedError
			if !errors.As(err, &locked) {
				f.Close()
				t.Fatalf("lock = %v, want a LockedError", err)
			}
			if locked.PID != tt.recorded || locked.Exited != tt.wantExited {
				t.Errorf("LockedError = %+v, want pid %d exited %v", locked, tt.recorded, tt.wantExited)
			}
			if tt.wantWait != (waited >= lockWait) {
				t.Errorf("refused after %s; want a wait of lockWait (%s): %v", waited, lockWait, tt.wantWait)
			}
			if b, _ := os.ReadFile(path); string(b) != rec {
				t.Errorf("the refused lock changed the file to %q", b)
			}
			if tt.wantExited && !strings.Contains(err.Error(), "fuser") {
				t.Errorf("the message does not say how to find the holder: %v", err)
			}
		})
	}
}
