package stop

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loopd/loopd/internal/procgroup"
)

const (
	// scriptOutputMax bounds what is kept of a script's stdout and stderr each; the
	// rest is read and dropped so the script never blocks on a full pipe.
	scriptOutputMax = 64 << 10
	// scriptWaitDelay bounds the wait for a script's pipes after it exited or was
	// killed, in case a background child of its kept them open.
	scriptWaitDelay = 250 * time.Millisecond
)

// runScript runs a custom_script: <workspace>/<script> args… in the workspace with
// Context.Env, in its own process group, which is killed when ctx ends. It is met when
// the script exits 0; its trimmed stdout is the detail.
func runScript(ctx context.Context, c *Context, s CustomScript) outcome {
	if ctx.Err() != nil {
		return interrupted(ctx)
	}
	if c.Workspace == "" {
		return failed("no workspace")
	}
	rel := filepath.FromSlash(s.Script)
	if s.Script == "" || !filepath.IsLocal(rel) {
		return failed("script %q must be a relative path inside the workspace", s.Script)
	}
	file := filepath.Join(c.Workspace, rel)
	switch info, err := os.Stat(file); {
	case errors.Is(err, fs.ErrNotExist):
		return failed("script %q not found in the workspace", s.Script)
	case err != nil:
		return failed("script %q: %v", s.Script, err)
	case info.IsDir():
		return failed("script %q is a directory", s.Script)
	}

	cmd := exec.CommandContext(ctx, file, s.Args...)
	cmd.Dir = c.Workspace
	cmd.Env = c.Env
	var stdout, stderr boundedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = scriptWaitDelay
	procgroup.Set(cmd)

	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() && ctx.Err() == nil {
		err = nil // exited 0; only a leftover child held the pipes
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		out := strings.TrimSpace(stdout.String())
		if out == "" {
			out = "Script succeeded"
		}
		return metOutcome(truncate(out, maxDetail))
	case ctx.Err() != nil:
		return interrupted(ctx)
	case errors.As(err, &exitErr):
		detail := "exit status " + strconv.Itoa(exitErr.ExitCode())
		if exitErr.ExitCode() < 0 {
			detail = exitErr.String()
		}
		if line := lastLine(stderr.String()); line != "" {
			detail += ": " + truncate(line, 200)
		}
		return outcome{detail: detail}
	default:
		return failed("run script %q: %v", s.Script, err)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// boundedBuffer keeps the first scriptOutputMax bytes written to it and drops the rest,
// reporting every write as complete.
type boundedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := scriptOutputMax - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
