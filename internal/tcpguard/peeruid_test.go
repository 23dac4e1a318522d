package tcpguard

import (
	"errors"
	"net"
	"os"
	"testing"
)

// PeerUID names the owner of the other end of a loopback connection
// (this process's uid here, on IPv4 and IPv6), and says "not local" for a
// socket that is not there.
func TestTCPPeerUID(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v (skipped)", addr, err)
			continue
		}
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		uid, err := PeerUID(s.LocalAddr().(*net.TCPAddr), s.RemoteAddr().(*net.TCPAddr))
		if err != nil || uid != os.Getuid() {
			t.Errorf("%s: peer uid %d %v, want %d", addr, uid, err, os.Getuid())
		}
		gone := *s.RemoteAddr().(*net.TCPAddr)
		c.Close()
		s.Close()
		l.Close()
		gone.Port = 1 // nobody's
		if _, err := PeerUID(s.LocalAddr().(*net.TCPAddr), &gone); !errors.Is(err, ErrPeerNotLocal) {
			t.Errorf("%s: a socket that is not there: %v, want ErrPeerNotLocal", addr, err)
		}
	}
}

// BenchmarkTCPPeerUID is the cost the peer-owner lookup adds to each TCP
// connection accepted (not to each request: a kept-alive connection is
// looked up once).
func BenchmarkTCPPeerUID(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Skip(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	la, ra := s.LocalAddr().(*net.TCPAddr), s.RemoteAddr().(*net.TCPAddr)
	for b.Loop() {
		if _, err := PeerUID(la, ra); err != nil {
			b.Fatal(err)
		}
	}
}
