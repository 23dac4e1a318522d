package tcpguard

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"
)

// Connections beyond the cap are closed as soon as they are accepted, and
// a closed connection gives its slot back.
func TestCapListenerClosesBeyondTheCap(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback TCP")
	}
	l := NewCapListener(inner, 3, zap.NewNop())
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 5 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var held []net.Conn
	for range 3 {
		select {
		case c := <-accepted:
			held = append(held, c)
		case <-time.After(5 * time.Second):
			t.Fatal("the first 3 connections were not accepted")
		}
	}
	// The two beyond the cap see the daemon close them.
	for i, c := range clients[3:] {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("connection %d beyond the cap: read %v, want it closed", i+4, err)
		}
	}
	select {
	case c := <-accepted:
		t.Fatalf("a connection beyond the cap was handed out: %v", c.RemoteAddr())
	default:
	}
	// One closed twice frees one slot, once.
	held[0].Close()
	held[0].Close()
	if n := l.open.Load(); n != 2 {
		t.Fatalf("open after one close = %d, want 2", n)
	}
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case got := <-accepted:
		got.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a connection within the cap again was not accepted")
	}
}
