package main

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// exitCode maps every kind of failure to the exit code docs/reference.md
// lists, and prints its message once.
func TestExitCode(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		interrupted bool
		code        int
		msg         string
	}{
		{"ok", nil, false, exitOK, ""},
		{"interrupted", errors.New("context canceled"), true, exitInterrupted, "loopctl: interrupted (the run goes on in the daemon)\n"},
		{"chosen", &exitError{code: 3}, false, 3, ""},
		{"chosen with message", &exitError{code: exitTimeout, msg: "not ended"}, false, exitTimeout, "loopctl: not ended\n"},
		{"not found", &api.Error{Code: api.CodeNotFound, Message: "no run x"}, false, exitNotFound, "loopctl: no run x\n"},
		{"ambiguous", &api.Error{Code: api.CodeAmbiguous, Message: "ab matches 2"}, false, exitUsage, "loopctl: ab matches 2\n"},
		{"too large", &api.Error{Code: api.CodeTooLarge, Message: "too big"}, false, exitUsage, "loopctl: too big\n"},
		{"forbidden", &api.Error{Code: api.CodeForbidden, Message: "not yours"}, false, exitUnavailable, "loopctl: not yours\n"},
		{"storage", &api.Error{Code: api.CodeUnavailable, Message: "disk full"}, false, exitUnavailable, "loopctl: disk full\n"},
		{"internal", &api.Error{Code: api.CodeInternal, Message: "boom"}, false, exitInternal, "loopctl: boom\n"},
		{"no answer", fmt.Errorf("%w: frozen", api.ErrNoAnswer), false, exitUnavailable,
			"loopctl: daemon unavailable: no answer: frozen\n  check it with `ps` and its log (LOOPD_HOME/loopd.log); `kill -CONT` a stopped daemon\n"},
		{"unavailable", fmt.Errorf("%w: gone", api.ErrUnavailable), false, exitUnavailable, "loopctl: daemon unavailable: gone\n"},
		{"cobra usage", errors.New(`unknown command "x" for "loopctl"`), false, exitUsage, "loopctl: unknown command \"x\" for \"loopctl\"\n  see `loopctl --help`\n"},
		{"other", errors.New("disk on fire"), false, exitInternal, "loopctl: disk on fire\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("LOOPCTL_NO_AUTOSTART", "")
			var b bytes.Buffer
			if code := exitCode(tt.err, tt.interrupted, &b); code != tt.code || b.String() != tt.msg {
				t.Errorf("exitCode = %d, printed %q; want %d, %q", code, b.String(), tt.code, tt.msg)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	loopctl(t, nil, "frobnicate").expect(t, exitUsage, nil, `loopctl: unknown command "frobnicate" for "loopctl"`, "see `loopctl --help`")
	loopctl(t, nil, "list", "--bogus").expect(t, exitUsage, nil, "loopctl: unknown flag: --bogus\n")
	loopctl(t, nil, "status", "a", "b").expect(t, exitUsage, nil, "loopctl status needs exactly one RUN")
	// cobra's flag groups: flags that exclude each other.
	loopctl(t, nil, "trust", "--show", "--revoke").expect(t, exitUsage, nil, "[revoke show] were all set", "see `loopctl --help`")
}

// With autostart off and no daemon, every command that needs one says how
// to start it and exits 69.
func TestNoDaemon(t *testing.T) {
	for _, args := range [][]string{{"status", runID}, {"list"}, {"logs", runID}, {"trust"}, {"clean", "--ended"}, {"dashboard"}} {
		loopctl(t, nil, args...).expect(t, exitUnavailable, nil, "LOOPCTL_NO_AUTOSTART=1)\n  start it with `loopd`, or unset LOOPCTL_NO_AUTOSTART")
	}
}
