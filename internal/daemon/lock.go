package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked is returned when another daemon already serves the home.
var ErrLocked = errors.New("another loopd is running")

// LockedError names the daemon that holds the lock.
type LockedError struct {
	Home string
	PID  int // 0 when the holder's pid could not be read
}

func (e *LockedError) Error() string {
	holder := "another loopd"
	if e.PID > 0 {
		holder = fmt.Sprintf("another loopd (pid %d)", e.PID)
	}
	return fmt.Sprintf("%s is already running with LOOPD_HOME=%s; stop it with `loopctl daemon stop` or use another LOOPD_HOME", holder, e.Home)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// lock takes the home's exclusive lock (flock on loopd.lock, released by
// the kernel when the process dies, so a crash never leaves a stale lock)
// and writes our pid into it. It refuses at once, changing nothing, when
// another daemon holds it.
func lock(home string) (*os.File, error) {
	path := home + "/loopd.lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockedError{Home: home, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
