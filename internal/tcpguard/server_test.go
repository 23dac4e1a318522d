package tcpguard

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// The TCP server's timeouts close a connection that sends no headers and
// one kept alive without a next request, but never cut a stream that
// lasts many times longer than either. (Shortened here; the daemon's are
// 5s and 30s.)
func TestTCPTimeoutsSpareStreams(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback TCP")
	}
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stream" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		// Ten lines 100ms apart: a second, five times the timeouts.
		for i := range 10 {
			_, _ = io.WriteString(w, "line "+string(rune('0'+i))+"\n")
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}), nil, zap.NewNop())
	srv.ReadHeaderTimeout, srv.IdleTimeout = 200*time.Millisecond, 200*time.Millisecond
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	addr := l.Addr().String()

	get := func(c net.Conn, br *bufio.Reader, path string) string {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("GET %s: body cut after %q: %v", path, b, err)
		}
		return string(b)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	if got := get(c, br, "/stream"); strings.Count(got, "\n") != 10 {
		t.Errorf("the stream was cut: %q", got)
	}
	// Kept alive: a second request on the same connection is answered...
	if got := get(c, br, "/"); got != "ok" {
		t.Errorf("second request: %q", got)
	}
	// ...and then the idle connection is closed by the server.
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("idle keep-alive connection: read %v, want EOF", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("idle connection closed after %s, want about 200ms", d)
	}
	// A connection that sends nothing is closed too.
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("silent connection: read %v, want it closed", err)
	}
}
