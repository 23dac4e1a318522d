package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/daemonconf"
)

// loopdLocked is loopd's exit code when another daemon holds its home.
const loopdLocked = 75

func isUnavailable(err error) bool { return errors.Is(err, api.ErrUnavailable) }

// autostart starts loopd in the background, like the Gradle or Bazel
// daemons, and waits until it answers. Two loopctl racing to start it are
// safe: the daemon's lock lets one win and the other exits at once, and
// both clients then talk to the winner.
func autostart(ctx context.Context, c *api.Client) error {
	bin, err := findLoopd()
	if err != nil {
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	home, err := api.Home()
	if err != nil {
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	// The daemon reads its settings (LOOPD_HOME/daemon.conf: its
	// dashboard's address, how many runs at once) itself, so that one
	// started here after a crash comes back as the user configured it.
	// They are checked here first: a bad file is the user's to fix, said
	// at once with its file, line and key (exit 64), not as a daemon that
	// "exited" with the reason in its log.
	if _, err := daemonconf.Load(home); err != nil {
		return &exitError{code: exitUsage, msg: "cannot start loopd: " + err.Error()}
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("%w: create LOOPD_HOME: %v", api.ErrUnavailable, err)
	}
	logPath := filepath.Join(home, "loopd.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%w: open %s: %v", api.ErrUnavailable, logPath, err)
	}
	defer logf.Close()
	// The socket is always passed, absolute: the daemon runs in "/", where
	// a relative LOOPD_SOCKET would name another file.
	args := []string{"--home", home, "--socket", c.Socket()}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	// Its own session: the daemon outlives this terminal and loopctl.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: start %s: %v", api.ErrUnavailable, bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.Ping(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			exited = nil
			// Exit 75: another daemon holds the lock (a racing loopctl
			// started it); it answers as soon as it listens, so keep
			// waiting for it. Any other exit: it could not start, and
			// its reason is in the log.
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == loopdLocked {
				continue
			}
			return fmt.Errorf("%w: loopd exited (%v): %s", api.ErrUnavailable, err, lastLines(logPath, 5))
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%w: loopd did not answer on %s within 10s; see %s", api.ErrUnavailable, c.Socket(), logPath)
}

// findLoopd looks for loopd next to loopctl, then on PATH.
func findLoopd() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "loopd")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("loopd")
	if err != nil {
		return "", errors.New("loopd is not installed next to loopctl or on PATH (go install ./cmd/...)")
	}
	return p, nil
}

func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
