package daemon

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// A request refused for its token is answered with Connection: close and
// the connection is closed; one with the token is kept alive.
func TestTCPRefusalClosesTheConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback TCP")
	}
	addr := l.Addr().String()
	l.Close()
	_, home := testDaemon(t, Options{HTTPAddr: addr})
	tok, err := os.ReadFile(home + "/" + TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, auth string
		status     int
		closed     bool
	}{
		{"no token", "", 403, true},
		{"token", "Authorization: Bearer " + strings.TrimSpace(string(tok)) + "\r\n", 200, false},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /v1/daemon HTTP/1.1\r\nHost: "+addr+"\r\n"+tc.auth+"\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Close != tc.closed {
			t.Errorf("%s: status %d, Connection: close %v; want %d, %v", tc.name, resp.StatusCode, resp.Close, tc.status, tc.closed)
		}
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err = br.ReadByte()
		if gotClosed := err == io.EOF; gotClosed != tc.closed {
			t.Errorf("%s: after the answer, read %v; want closed %v", tc.name, err, tc.closed)
		}
	}
}
