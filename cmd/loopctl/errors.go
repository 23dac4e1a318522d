package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/loopd/loopd/internal/api"
)

// Exit codes (docs/reference.md, "loopctl exit codes").
const (
	exitOK          = 0
	exitUsage       = 64  // bad flags, arguments or input; a refusal that changed nothing (`land`, a second in-place `start`, `start` of an agent whose program is not on the PATH, `signal` of a run with no user_signal condition, `answer` of a run not waiting for one, `resume` of a run whose worktree is gone; `resume --onto-base` of a run that ran in place, has not ended, has landed, has no base branch or worktree, or has nothing to merge; `start` through LOOPD_URL of a HEAD that is not on origin; `land`, `resume` or `pause` of a backlog's task run); a bad LOOPD_URL or an empty LOOPD_TOKEN
	exitNotFound    = 66  // no such run
	exitUnavailable = 69  // the daemon (or LOOPD_URL's API node) is not reachable, refuses this user or token, or does not answer within 10s
	exitInternal    = 70  // a daemon-side or unexpected failure; `land --push` whose push was made but whose pr_command failed
	exitTimeout     = 124 // `wait --timeout` elapsed; the run goes on
	exitInterrupted = 130 // Ctrl+C: loopctl stopped, the run did not
)

// exitError carries a chosen exit code; msg, if any, is printed.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// classify maps an error to its exit code and message.
func classify(err error) (int, string) {
	var ae *api.Error
	switch {
	case errors.Is(err, api.ErrNoAnswer):
		return exitUnavailable, err.Error() + "\n  check it with `ps` and its log (LOOPD_HOME/loopd.log); `kill -CONT` a stopped daemon"
	case errors.Is(err, api.ErrUnavailable):
		// A fleet's API node (LOOPD_URL, named by its URL in err) is
		// never started by loopctl: the autostart hint is not for it.
		if os.Getenv("LOOPCTL_NO_AUTOSTART") == "1" && !strings.Contains(err.Error(), "://") {
			return exitUnavailable, err.Error() + "\n  start it with `loopd`, or unset LOOPCTL_NO_AUTOSTART to let loopctl start it"
		}
		return exitUnavailable, err.Error()
	case errors.As(err, &ae):
		switch ae.Code {
		case api.CodeNotFound:
			return exitNotFound, ae.Error()
		case api.CodeBadRequest, api.CodeAmbiguous, api.CodeConflict, api.CodeTooLarge, api.CodeUntrusted:
			return exitUsage, ae.Error()
		case api.CodeForbidden, api.CodeShutdown, api.CodeUnavailable:
			return exitUnavailable, ae.Error()
		}
		return exitInternal, ae.Error()
	case isCobraUsage(err):
		return exitUsage, err.Error() + "\n  see `loopctl --help`"
	}
	return exitInternal, err.Error()
}

// isCobraUsage recognises the usage errors cobra itself returns.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires at most", "bad flag syntax",
		"if any flags in the group", "at least one of the flags in the group"} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
