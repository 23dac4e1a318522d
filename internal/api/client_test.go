package api

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// serve answers HTTP on a Unix socket in a temporary directory with h.
func serve(t *testing.T, h http.Handler) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return NewClient(sock)
}

// frozenDaemon is a daemon that accepts requests and never answers them,
// as one stopped by SIGSTOP, until the test ends.
func frozenDaemon(t *testing.T) *Client {
	t.Helper()
	release := make(chan struct{})
	c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release) })
	return c
}

// A daemon that accepts and never answers (frozen by SIGSTOP) makes an
// ordinary request fail with ErrNoAnswer — an ErrUnavailable — once the
// client's timeout has passed, not hang.
func TestRequestTimeoutIsNoAnswer(t *testing.T) {
	c := frozenDaemon(t)
	c.SetTimeout(100 * time.Millisecond)
	_, err := c.GetRun(t.Context(), RunRef{Ref: "abc"}, false)
	if !errors.Is(err, ErrNoAnswer) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrNoAnswer", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v passes for the caller's own deadline", err)
	}
}

// The caller's own deadline stays the caller's: it is not reported as a
// daemon that did not answer.
func TestCallerDeadlineIsNotNoAnswer(t *testing.T) {
	c := frozenDaemon(t)
	c.SetTimeout(time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := c.GetRun(ctx, RunRef{Ref: "abc"}, false)
	if errors.Is(err, ErrNoAnswer) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's DeadlineExceeded", err)
	}
}

// Wait's long poll is allowed its server-side time on top of the
// ordinary timeout: a wait that is answered later than that timeout (but
// within the poll) succeeds.
func TestWaitOutlastsTheOrdinaryTimeout(t *testing.T) {
	c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		_ = json.NewEncoder(w).Encode(Run{ID: "abc", Status: RunCompleted})
	}))
	c.SetTimeout(50 * time.Millisecond)
	run, err := c.Wait(t.Context(), RunRef{Ref: "abc"})
	if err != nil || run.Status != RunCompleted {
		t.Fatalf("Wait = %+v, %v", run, err)
	}
}
