package tcpguard

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
)

// ListenLoopback listens on addr and, when addr is one loopback address
// (127.0.0.1, localhost or ::1) or the IPv4 wildcard, on the same port of
// the other loopback address too, as one listener.
//
// The dashboard is served at a <random>.localhost name, which browsers
// resolve to both ::1 and 127.0.0.1 and try ::1 first. Were the daemon on
// 127.0.0.1 alone, another user could bind [::1] on its port and receive
// the login code and the session cookie the owner's browser sends there.
// So the port is held on both: a port whose twin is taken is refused (or,
// for port 0, another one is picked). A machine without IPv6 has no ::1
// for anyone to bind, and the browser falls back to 127.0.0.1.
func ListenLoopback(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var first, twin string
	switch ip := net.ParseIP(host); {
	case host == "localhost":
		first, twin = "127.0.0.1", "::1"
	case ip == nil:
		return net.Listen("tcp", addr)
	case ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv4zero):
		first, twin = host, "::1"
	case ip.Equal(net.IPv6loopback):
		first, twin = host, "127.0.0.1"
	default: // "::" is dual-stack already; other addresses are not what .localhost names
		return net.Listen("tcp", addr)
	}
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", net.JoinHostPort(first, port))
		if err != nil {
			return nil, err
		}
		_, got, _ := net.SplitHostPort(l.Addr().String())
		l2, err := net.Listen("tcp", net.JoinHostPort(twin, got))
		switch {
		case err == nil:
			return newMultiListener(l, l2), nil
		case !errors.Is(err, syscall.EADDRINUSE):
			// No such address on this machine (IPv6 off): nobody can
			// take it.
			return l, nil
		}
		l.Close()
		if port != "0" || attempt == 20 {
			return nil, fmt.Errorf("port %s is free on %s but another process listens on %s: "+
				"a browser opening the dashboard tries %s first; stop that process or choose another port",
				got, first, net.JoinHostPort(twin, got), twin)
		}
	}
}

// multiListener accepts from several listeners as one; its Addr is the
// first's.
type multiListener struct {
	ls    []net.Listener
	conns chan accepted
	done  chan struct{}
	once  sync.Once
}

type accepted struct {
	c   net.Conn
	err error
}

func newMultiListener(ls ...net.Listener) *multiListener {
	m := &multiListener{ls: ls, conns: make(chan accepted), done: make(chan struct{})}
	for _, l := range ls {
		go m.accept(l)
	}
	return m
}

func (m *multiListener) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		select {
		case m.conns <- accepted{c, err}:
		case <-m.done:
			if c != nil {
				c.Close()
			}
			return
		}
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) && !errors.Is(err, syscall.EMFILE) &&
			!errors.Is(err, syscall.ENFILE) && !errors.Is(err, syscall.ECONNABORTED) {
			return // closed, or failed for good: the server has the error
		}
	}
}

// Accept returns the next connection of any of the listeners.
func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case a := <-m.conns:
		return a.c, a.err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close closes every listener.
func (m *multiListener) Close() error {
	var errs []error
	m.once.Do(func() {
		close(m.done)
		for _, l := range m.ls {
			errs = append(errs, l.Close())
		}
	})
	return errors.Join(errs...)
}

// Addr is the first listener's address.
func (m *multiListener) Addr() net.Addr { return m.ls[0].Addr() }
