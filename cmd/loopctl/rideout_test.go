package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// A daemon that stays away is waited for up to the limit, then the same
// error as a later outage's: unavailable (exit 69), with its hint.
func TestReachRunGivesUpAfterTheLimit(t *testing.T) {
	t.Setenv("LOOPCTL_NO_AUTOSTART", "1")
	g := &globalOptions{Socket: filepath.Join(t.TempDir(), "loopd.sock")}
	began := time.Now()
	_, _, err := g.reachRun(t.Context(), "0123abcd", 1500*time.Millisecond)
	if took := time.Since(began); took < 1500*time.Millisecond || took > 10*time.Second {
		t.Errorf("gave up after %s, want just after the 1.5s limit", took)
	}
	if !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("err = %v, want the daemon unavailable", err)
	}
	if code, msg := classify(err); code != exitUnavailable || !strings.Contains(msg, "LOOPCTL_NO_AUTOSTART") {
		t.Errorf("classify = %d %q, want 69 with the autostart hint", code, msg)
	}
}

// What waiting cannot change is final at once: another user's socket, a
// daemon loopctl started that exited.
func TestRideableRefusesWhatWaitingCannotChange(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{api.ErrUnavailable, true},
		{api.Errorf(api.CodeShutdown, "shutting down"), true},
		{api.Errorf(api.CodeNotFound, "no such run"), false},
		{permissionError("/nonexistent/loopd.sock"), false},
		{&autostartError{api.ErrUnavailable}, false},
	} {
		if got := rideable(tc.err); got != tc.want {
			t.Errorf("rideable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
