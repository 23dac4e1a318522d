package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
)

// A Client made with NewClientDial sends its requests over the
// connections dial opens, and classifies a failed dial as it does one to
// the socket: ErrUnavailable, naming the socket, with the cause kept.
func TestNewClientDial(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/runs/abc" || r.URL.Query().Get("workspace") != "/w" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"id":"abcdef","status":"RUNNING"}`))
	}))
	defer srv.Close()
	dials := 0
	c := NewClientDial("/nowhere.sock", func(ctx context.Context) (net.Conn, error) {
		dials++
		var d net.Dialer
		return d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
	})
	run, err := c.GetRun(t.Context(), RunRef{Ref: "abc", Workspace: "/w"}, false)
	if err != nil || run.ID != "abcdef" || run.Status != RunRunning || dials != 1 {
		t.Fatalf("GetRun = %+v, %v after %d dials", run, err, dials)
	}
	if c.Socket() != "/nowhere.sock" {
		t.Errorf("Socket() = %q", c.Socket())
	}

	refused := NewClientDial("/gone.sock", func(context.Context) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}
	})
	_, err = refused.Ping(t.Context())
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), "/gone.sock") {
		t.Errorf("a refused dial: %v, want ErrUnavailable naming /gone.sock", err)
	}
}
