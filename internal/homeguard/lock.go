package homeguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

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

// Lock takes the home's exclusive lock (flock on loopd.lock, released by
// the kernel when the process dies, so a crash never leaves a stale lock)
// and writes our pid into it. It refuses at once, changing nothing, when
// another live daemon holds it; when the loopd whose pid the file records
// has exited, it waits up to lockWait for the lock (see flockAfterDeadHolder).
//
// The file is opened close-on-exec (os.OpenFile always asks for it; said
// here so no refactoring loses it): a step, git or hook the daemon starts
// must not carry the lock past its exec and keep the next daemon out.
func Lock(home string, log *zap.Logger) (*os.File, error) {
	path := home + "/loopd.lock"
	dir, err := openHome(home)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	f, err := openLockFile(dir, path)
	if err != nil {
		return nil, err
	}
	if pid, exited, err := flockAfterDeadHolder(f, path, log); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockedError{Home: home, PID: pid, Exited: exited}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(holderRecord()), 0)
	}
	return f, nil
}

// openHome opens the home directory and checks, on the handle itself,
// that it is a directory of the daemon's user: what is opened from it
// afterwards is opened in that directory, whatever its path leads to by
// then.
func openHome(home string) (*os.File, error) {
	fd, err := unix.Open(home, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open LOOPD_HOME %s: %w", home, err)
	}
	dir := os.NewFile(uintptr(fd), home)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		dir.Close()
		return nil, fmt.Errorf("stat LOOPD_HOME %s: %w", home, err)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		dir.Close()
		return nil, &OwnerError{Path: "LOOPD_HOME " + home,
			Reason: fmt.Sprintf("belongs to %s, not to %s that runs loopd: its owner could replace the daemon's token, database or socket",
				describeUID(int(st.Uid)), describeUID(uid)),
			Fix: "Use a LOOPD_HOME of your own (unset LOOPD_HOME for the default)."}
	}
	return dir, nil
}

// openLockFile opens (or creates) loopd.lock in the home's directory
// handle, never through a symlink, and refuses it unless it is a regular
// file of the daemon's user with no other link. Until the home is made
// owner-only, another user who could write to it (an existing home of mode
// 0777, a new home in a sticky directory) could have planted loopd.lock
// after the home was checked, as a symlink or a hard link to a file of the
// daemon's user: taking the lock truncates it and writes the pid into it.
// These checks come before the flock, the truncate and the write.
func openLockFile(dir *os.File, path string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), "loopd.lock", unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.ELOOP) {
		return nil, &OwnerError{Path: path, Reason: "is a symlink: someone could make the daemon overwrite the file it leads to",
			Fix: "Remove it (`rm " + path + "`) and check who made it."}
	}
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	uid := os.Geteuid()
	var reason string
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		reason = "is not a regular file"
	case int(st.Uid) != uid:
		reason = fmt.Sprintf("belongs to %s, not to %s that runs loopd", describeUID(int(st.Uid)), describeUID(uid))
	case st.Nlink == 0:
		reason = "was removed or replaced while the daemon opened it: someone else can write to the home"
	case st.Nlink != 1:
		reason = fmt.Sprintf("has %d hard links: someone could make the daemon overwrite another of them", st.Nlink)
	}
	if reason != "" {
		f.Close()
		return nil, &OwnerError{Path: path, Reason: reason, Fix: "Remove it (`rm " + path + "`) and check who made it.",
			Wrote: "nothing was written but, perhaps, an empty loopd.lock"}
	}
	return f, nil
}

// OpenLogFile opens --log-file for appending, never through a symlink,
// and refuses it unless it is a regular file of the daemon's user with no
// other link. In a sticky directory (/tmp) another user can create the
// path first: as a file they can read (the daemon's log, run ids,
// workspaces, errors), or as a symlink or hard link to a file of the
// daemon's user that the log would grow into. Nothing is written before
// these checks.
func OpenLogFile(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	fix := "Use a --log-file path in a directory of your own (LOOPD_HOME/loopd.log, say)."
	if err != nil {
		// The kernel may refuse first (protected_regular in a sticky
		// directory: EACCES); say what is there either way.
		if li, lerr := os.Lstat(path); lerr == nil {
			reason := ""
			switch owner := fileUID(li); {
			case li.Mode()&fs.ModeSymlink != 0:
				reason = fmt.Sprintf("is a symlink of %s: whoever made it chooses the file the daemon's log grows into", describeUID(owner))
			case owner != os.Geteuid():
				reason = fmt.Sprintf("belongs to %s, not to %s that runs loopd: its owner could read the daemon's log", describeUID(owner), describeUID(os.Geteuid()))
			}
			if reason != "" {
				return nil, &OwnerError{Path: "log file " + path, Reason: reason, Fix: fix, Wrote: "no log line was written"}
			}
		}
		return nil, fmt.Errorf("open log file: %w", err)
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat log file %s: %w", path, err)
	}
	uid := os.Geteuid()
	var reason string
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		reason = "is not a regular file"
	case int(st.Uid) != uid:
		reason = fmt.Sprintf("belongs to %s, not to %s that runs loopd: its owner could read the daemon's log", describeUID(int(st.Uid)), describeUID(uid))
	case st.Nlink != 1:
		reason = fmt.Sprintf("has %d hard links: the log would grow into another file", st.Nlink)
	}
	if reason != "" {
		f.Close()
		return nil, &OwnerError{Path: "log file " + path, Reason: reason, Fix: fix, Wrote: "no log line was written"}
	}
	return f, nil
}
