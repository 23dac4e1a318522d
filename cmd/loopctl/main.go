// Command loopctl starts, inspects, follows, stops and waits for loopd
// runs. It talks to the daemon over its Unix socket and starts the daemon
// in the background when it is not running. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/loopd/loopd/internal/termtext"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd(os.Stdout, os.Stderr).ExecuteContext(ctx)
	interrupted := ctx.Err() != nil
	stop()
	os.Exit(exitCode(err, interrupted, os.Stderr))
}

// exitCode decides loopctl's exit status once, and prints the error.
func exitCode(err error, interrupted bool, stderr io.Writer) int {
	if interrupted {
		// The user pressed Ctrl+C: the run goes on, it belongs to the daemon.
		fmt.Fprintln(stderr, "loopctl: interrupted (the run goes on in the daemon)")
		return exitInterrupted
	}
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "loopctl:", termtext.QuoteLines(ee.msg))
		}
		return ee.code
	}
	code, msg := classify(err)
	// Errors echo what a repository wrote (a config value, a path): its
	// control characters are shown, not obeyed.
	fmt.Fprintln(stderr, "loopctl:", termtext.QuoteLines(msg))
	return code
}
