package tcpguard

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Limits of the connections the guard lets through. Anyone on the
// machine can connect to a loopback port, so nothing a connection does
// before it is authorized may hold a file descriptor for long: with the
// descriptor limit at 512, 600 refused keep-alive connections that were
// never closed left the daemon unable to accept on its Unix socket
// (accept4: too many open files), and loopctl could no longer reach its
// own daemon.
const (
	// MaxConns is the most TCP connections open at once; more are
	// closed as soon as they are accepted. A browser opens at most six
	// per host, so this is room for many tabs and scripts.
	MaxConns = 128
	// fdShare: under a low descriptor limit the cap is at most
	// 1/fdShare of it, so the rest of the daemon (the Unix socket's
	// connections, the database, steps' pipes and logs) always keeps
	// three quarters.
	fdShare = 4
)

// ConnCap is the cap on open TCP connections under the process's
// descriptor limit: MaxConns, or a quarter of the limit when that is
// less (at least 4).
func ConnCap() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return MaxConns
	}
	return max(4, min(MaxConns, int(lim.Cur/fdShare)))
}

// CapListener caps the open connections of a listener: a connection
// accepted beyond the cap is closed at once (its descriptor is back before
// the next accept), so whatever is done to the TCP port, it holds at most
// cap descriptors and the Unix socket keeps the rest.
//
// Before a connection counts, the owner of its other end is looked up
// when that end is on this machine (PeerUID): another user's connection
// is closed at once, as the Unix socket refuses them. Otherwise any local
// user could fill the cap with silent connections (each lives up to the
// header timeout, and is replaced as soon as it is closed), and the
// owner's own requests would find no slot for as long as they kept at it.
// A peer on another machine (--http-allow-remote) has no local owner and
// is served as before: its requests need the bearer token.
type CapListener struct {
	net.Listener
	cap     int
	owner   int // the uid whose local connections are served
	open    atomic.Int64
	log     *zap.Logger
	refused *Refusals
	others  *Refusals
}

// NewCapListener caps l at cap open connections, serving only this
// process's uid among local peers; refusals are logged on log, at most one
// line per RefusalLogEvery.
func NewCapListener(l net.Listener, cap int, log *zap.Logger) *CapListener {
	return &CapListener{Listener: l, cap: cap, owner: os.Getuid(), log: log, refused: NewRefusals(), others: NewRefusals()}
}

// fromAnotherUser reports whether c's other end is a socket on this
// machine that another user owns. A lookup that fails for any other reason
// than "not here" lets the connection through: the bearer token and the
// session still guard every request on it.
func (l *CapListener) fromAnotherUser(c net.Conn) (int, bool) {
	la, ok1 := c.LocalAddr().(*net.TCPAddr)
	ra, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return 0, false
	}
	uid, err := PeerUID(la, ra)
	if err != nil {
		if !errors.Is(err, ErrPeerNotLocal) {
			l.refused.Note(l.log, "could not look up a TCP peer's owner; serving it", zap.String("remote", ra.String()), zap.Error(err))
		}
		return 0, false
	}
	return uid, uid != l.owner
}

// Accept returns the next connection within the cap. Errors (EMFILE
// included) are returned as they are: http.Server backs off and retries.
func (l *CapListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if uid, other := l.fromAnotherUser(c); other {
			c.Close()
			l.others.Note(l.log, "closed a TCP connection from another user", zap.Int("peer_uid", uid),
				zap.String("remote", c.RemoteAddr().String()))
			continue
		}
		if n := l.open.Add(1); n > int64(l.cap) {
			l.open.Add(-1)
			c.Close()
			l.refused.Note(l.log, "closed a TCP connection: too many open", zap.Int("max_tcp_connections", l.cap),
				zap.String("remote", c.RemoteAddr().String()))
			continue
		}
		return &cappedConn{Conn: c, l: l}, nil
	}
}

// cappedConn gives its slot back when closed (once, however often it is
// closed).
type cappedConn struct {
	net.Conn
	l    *CapListener
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
