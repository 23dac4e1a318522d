package homeguard

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
	f, err := Lock(home, zap.NewNop())
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
			f, err := Lock(home, zap.NewNop())
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

// loopd.lock that is not a plain file of the daemon's own (a symlink or a
// second hard link to a file elsewhere) is refused before it is locked,
// truncated or written: while the home was open to others (an existing
// home of mode 0777, a new one in a sticky directory), another user could
// plant it between the home's check and the lock, and the daemon would
// overwrite whatever it leads to with its pid. Calling lock on the planted
// home makes that race deterministic.
func TestLockRefusesAPlantedLockFile(t *testing.T) {
	for _, kind := range []string{"symlink", "hard link"} {
		t.Run(kind, func(t *testing.T) {
			home := t.TempDir()
			precious := filepath.Join(t.TempDir(), "precious")
			if err := os.WriteFile(precious, []byte("precious\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(home, "loopd.lock")
			link := os.Symlink
			if kind == "hard link" {
				link = os.Link
			}
			if err := link(precious, path); err != nil {
				t.Fatal(err)
			}
			f, err := Lock(home, zap.NewNop())
			if err == nil {
				f.Close()
			}
			if b, _ := os.ReadFile(precious); string(b) != "precious\n" {
				t.Fatalf("lock through a planted %s overwrote its target with %q", kind, b)
			}
			if err == nil || !strings.Contains(err.Error(), "loopd.lock") {
				t.Fatalf("lock = %v, want a refusal naming loopd.lock", err)
			}
		})
	}
}

// A recorded pid that now belongs to another process (the loopd that
// wrote it exited and the pid was reused) does not count as a live loopd:
// the start time recorded beside it tells them apart. The lock is then
// waited for like a dead holder's, and a matching start time still counts
// as alive.
func TestLockHolderPidReused(t *testing.T) {
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	start, ok := procStart(other.Process.Pid)
	if !ok {
		t.Fatal("cannot read the start time of a live process")
	}
	defer func(w time.Duration) { lockWait = w }(lockWait)
	lockWait = 300 * time.Millisecond
	for _, tt := range []struct {
		name       string
		start      uint64
		wantExited bool
	}{
		{"same pid, another process", start + 1, true},
		{"same process", start, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			path := filepath.Join(home, "loopd.lock")
			rec := strconv.Itoa(other.Process.Pid) + " " + strconv.FormatUint(tt.start, 10) + "\n"
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
			f, err := Lock(home, zap.NewNop())
			var locked *LockedError
			if !errors.As(err, &locked) {
				f.Close()
				t.Fatalf("lock = %v, want a LockedError", err)
			}
			if locked.PID != other.Process.Pid || locked.Exited != tt.wantExited {
				t.Errorf("LockedError = %+v, want pid %d exited %v", locked, other.Process.Pid, tt.wantExited)
			}
		})
	}
}

// lock records the daemon's pid and start time.
func TestLockRecordsPidAndStart(t *testing.T) {
	home := t.TempDir()
	f, err := Lock(home, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start, _ := procStart(os.Getpid())
	b, _ := os.ReadFile(filepath.Join(home, "loopd.lock"))
	if want := strconv.Itoa(os.Getpid()) + " " + strconv.FormatUint(start, 10) + "\n"; string(b) != want {
		t.Fatalf("loopd.lock = %q, want %q", b, want)
	}
}

// --log-file of the daemon's own is created, then appended to on the next
// start; a hard link to another file is refused.
func TestOpenLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopd.log")
	for i := range 2 {
		f, err := OpenLogFile(path)
		if err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
		_, _ = f.WriteString("line\n")
		f.Close()
	}
	if b, _ := os.ReadFile(path); string(b) != "line\nline\n" {
		t.Fatalf("log = %q, want two appended lines", b)
	}
	linked := filepath.Join(t.TempDir(), "linked.log")
	if err := os.Link(path, linked); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenLogFile(linked); err == nil || !strings.Contains(err.Error(), "hard links") {
		if f != nil {
			f.Close()
		}
		t.Fatalf("openLogFile on a hard link = %v, want a refusal", err)
	}
}
