// Package git runs the user's own git binary for loopd's workspaces: run
// worktrees and branches, the change ledger, landing and cleaning
// (docs/workspaces.md).
//
// loopd uses the git binary rather than a Go implementation so that the
// user's git, configuration and hooks apply exactly as they do in a
// terminal; commits loopd makes skip hooks (--no-verify) and use a loopd
// identity when the user has none. Every command runs with a context and a
// bounded capture of its output.
package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/procgroup"
)

// maxCapture bounds what one git command's output may hold in memory;
// callers that need more (a huge diff) stream it instead.
const maxCapture = 64 << 20

// Error is a git command that failed: its arguments, exit code and what it
// printed on stderr.
type Error struct {
	Args   []string
	Code   int // -1 when git did not run or was killed
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrNotRepository is returned when a directory is not inside a git
// working tree.
var ErrNotRepository = errors.New("not a git repository")

// Cmd describes one git invocation.
type Cmd struct {
	Dir   string   // where git runs (-C is not used, so relative paths are relative to Dir)
	Env   []string // added to a clean copy of the daemon's environment
	Stdin []byte
	// Group runs git in a process group of its own that ctx's end kills
	// whole: a git that talks to a remote has children (ssh, a local
	// remote's receive-pack and its hooks) that hold its output open, and
	// killing git alone would leave Run waiting on them.
	Group bool
}

// Run runs git with args in c.Dir and returns its stdout.
func (c Cmd) Run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = c.Dir
	cmd.Env = append(baseEnv(), c.Env...)
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	var stdout, stderr capped
	stdout.limit, stderr.limit = maxCapture, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if c.Group {
		procgroup.Set(cmd)
		cmd.WaitDelay = time.Second
	}
	err := cmd.Run()
	if err != nil {
		code := -1
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
		return stdout.Bytes(), &Error{Args: args, Code: code, Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// Output runs git and returns its stdout with the trailing newline removed.
func (c Cmd) Output(ctx context.Context, args ...string) (string, error) {
	out, err := c.Run(ctx, args...)
	return strings.TrimRight(string(out), "\n"), err
}

// FleetCredential reports whether the environment variable name reaches
// a fleet's database or API: LOOPD_STORE (a PostgreSQL URL, often with its
// password), LOOPD_TOKEN and libpq's PG* variables (PGPASSWORD, PGPASSFILE,
// …). No agent and no git command of loopd's gets them. A git command
// in a run's worktree runs what the agent could have put there — hooks
// in the shared hooks directory, a clean filter or core.fsmonitor in the
// repository's config — so it must carry nothing the agent may not have.
func FleetCredential(name string) bool {
	return name == "LOOPD_STORE" || name == "LOOPD_TOKEN" || strings.HasPrefix(name, "PG")
}

// baseEnv is the daemon's environment without the variables that would
// point git somewhere else than the directory it runs in (a daemon started
// from inside a git hook would otherwise carry GIT_DIR and GIT_INDEX_FILE
// into every command), without a fleet's credentials (FleetCredential),
// and with prompts disabled: loopd has no terminal.
func baseEnv() []string {
	env := make([]string, 0, len(os.Environ())+2)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
			"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_PREFIX":
			continue
		}
		if FleetCredential(k) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
}

// capped is a bytes.Buffer that keeps at most limit bytes and drops the rest.
type capped struct {
	bytes.Buffer
	limit int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.limit - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// TopLevel returns the top-level directory of the working tree holding dir,
// or ErrNotRepository.
func TopLevel(ctx context.Context, dir string) (string, error) {
	out, err := Cmd{Dir: dir}.Output(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		var ge *Error
		if errors.As(err, &ge) && ge.Code > 0 {
			return "", ErrNotRepository
		}
		return "", err
	}
	return out, nil
}
