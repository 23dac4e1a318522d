package tcpguard

import (
	"io"
	"net"
	"strings"
	"testing"
)

// The TCP port is held on both loopback addresses: a browser opening the
// dashboard's .localhost name tries ::1 first, where another user must not
// be able to listen in its place.
func TestListenLoopbackHoldsBothAddresses(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skip("no IPv6 loopback on this machine: nobody can take ::1")
	} else {
		l.Close()
	}
	l, err := ListenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	if _, err := net.Listen("tcp", "[::1]:"+port); err == nil {
		t.Fatal("[::1] on the listener's port is free for anyone")
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hi"))
			c.Close()
		}
	}()
	for _, a := range []string{"127.0.0.1:" + port, "[::1]:" + port} {
		c, err := net.Dial("tcp", a)
		if err != nil {
			t.Fatalf("dial %s: %v", a, err)
		}
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) != "hi" {
			t.Fatalf("%s answered %q", a, b)
		}
	}

	// A fixed port whose ::1 twin is taken is refused, naming why.
	squat, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squat.Close()
	_, sport, _ := net.SplitHostPort(squat.Addr().String())
	if l, err := ListenLoopback("127.0.0.1:" + sport); err == nil {
		l.Close()
		t.Fatalf("listened on 127.0.0.1:%s while another process holds [::1]:%s", sport, sport)
	} else if !strings.Contains(err.Error(), "[::1]:"+sport) {
		t.Fatalf("refusal %q does not name [::1]:%s", err, sport)
	}
}
