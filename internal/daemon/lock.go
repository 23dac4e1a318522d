package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// ErrLocked is returned when another daemon already serves the home.
var ErrLocked = errors.New("another loopd is running")

// LockedError names the daemon that holds the lock.
type LockedError struct {
	Home string
	PID  int // 0 when the holder's pid could not be read
	// Exited is true when the loopd whose pid is in the lock file has
	// exited, yet another process still held the lock after waiting for
	// it (a child of that loopd that inherited the lock).
	Exited bool
}

func (e *LockedError) Error() string {
	if e.Exited {
		return fmt.Sprintf("%s/loopd.lock is still held %s after the loopd that took it (pid %d) exited: a process it started holds the lock; find it with `fuser -v %s/loopd.lock`",
			e.Home, lockWait, e.PID, e.Home)
	}
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
// another live daemon holds it; when the loopd whose pid the file records
// has exited, it waits up to lockWait for the lock (see flockAfterDeadHolder).
//
// The file is opened close-on-exec (os.OpenFile always asks for it; said
// here so no refactoring loses it): a step, git or hook the daemon starts
// must not carry the lock past its exec and keep the next daemon out.
func lock(home string, log *zap.Logger) (*os.File, error) {
	path := home + "/loopd.lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if pid, exited, err := flockAfterDeadHolder(f, path, log); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockedError{Home: home, PID: pid, Exited: exited}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
