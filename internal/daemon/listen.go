package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/loopd/loopd/internal/homeguard"
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
	if err := homeguard.CheckSocketDir(dir); err != nil {
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
