package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenUnix creates the API socket: its directory is made 0700 (if we
// create it) and the socket 0600. A stale socket file is removed first;
// that is safe because the caller holds the home lock.
func listenUnix(path string) (*net.UnixListener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	// The umask makes the socket owner-only from the moment it exists; the
	// chmod after is belt and braces.
	old := unix.Umask(0o177)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return l, nil
}

// checkSocketDir refuses a socket directory that another user could
// change. The home's check at start saw it only if it existed then; made
// afterwards by another user (LOOPD_SOCKET in /tmp: they win the race to
// mkdir it), or open to others, they could remove the daemon's socket and
// bind their own in its place, and loopctl would talk to them.
func checkSocketDir(dir string) error {
	uid := os.Geteuid()
	refuse := func(reason, fix string) error {
		return &HomeOwnerError{Path: "socket directory " + dir, Reason: reason, Fix: fix,
			Wrote: "no socket was bound in it"}
	}
	li, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if li.Mode()&fs.ModeSymlink != 0 {
		if owner := fileUID(li); owner != uid {
			return refuse(fmt.Sprintf("is a symlink of %s, not of %s that runs loopd", describeUID(owner), describeUID(uid)),
				"Use a socket path in a directory of your own (unset LOOPD_SOCKET for LOOPD_HOME/loopd.sock).")
		}
		if li, err = os.Stat(dir); err != nil {
			return fmt.Errorf("socket directory: %w", err)
		}
	}
	switch owner := fileUID(li); {
	case !li.IsDir():
		return fmt.Errorf("socket directory %s is not a directory", dir)
	case owner != uid && owner != 0: // root's: /tmp, /run/user
		return refuse(fmt.Sprintf("belongs to %s, not to %s that runs loopd or root: its owner could put a socket of their own in the daemon's place",
			describeUID(owner), describeUID(uid)),
			"Use a socket path in a directory of your own (unset LOOPD_SOCKET for LOOPD_HOME/loopd.sock).")
	// Sticky (/tmp itself): others cannot remove or rename the daemon's
	// socket there, and loopctl checks whose process serves it.
	case li.Mode()&fs.ModeSticky == 0 && (li.Mode().Perm()&0o002 != 0 || li.Mode().Perm()&0o020 != 0 && !groupWriteOK(li)):
		return refuse(fmt.Sprintf("is writable by others (mode %04o, not sticky): they could put a socket of their own in the daemon's place", li.Mode().Perm()),
			fmt.Sprintf("Run `chmod go-w %s` (0700 is best), or use a socket path elsewhere.", dir))
	}
	return nil
}

// fileUID is the owner of a file; -1 when unknown.
func fileUID(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

type peerKey struct{}

// peer is the credentials of the process on the other end of a connection.
type peer struct {
	uid, pid int
	ok       bool // credentials were read from the Unix socket
	tcp      bool // the optional TCP listener: authenticated by token
}

// connContext records the peer's credentials (SO_PEERCRED, filled in by
// the kernel at connect time, so they cannot be forged) on each connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	p := peer{}
	if uc, ok := c.(*net.UnixConn); ok {
		if raw, err := uc.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) {
				cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
				if err == nil {
					p = peer{uid: int(cred.Uid), pid: int(cred.Pid), ok: true}
				}
			})
		}
	} else {
		// Not a Unix socket (the optional TCP listener): authenticated by
		// token instead.
		p = peer{uid: -1, tcp: true}
	}
	return context.WithValue(ctx, peerKey{}, p)
}

func peerFrom(ctx context.Context) peer {
	p, _ := ctx.Value(peerKey{}).(peer)
	return p
}
