// Package prcommand runs a land's pr_command: the user's own command (gh pr
// create, glab mr create, …) that opens a pull request for a branch loopd
// just pushed. The daemon's push (internal/landing) and loopctl's push of a
// fleet run from the user's clone (cmd/loopctl) both run it through Run, so
// it sees the same variables, bounds and outcome either way.
package prcommand

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/procgroup"
)

// Timeout bounds pr_command: gh pr create takes seconds, and a command
// waiting for input that never comes must not hold the land forever.
const Timeout = 10 * time.Minute

// urlRE finds a URL in pr_command's output: gh pr create prints the pull
// request's.
var urlRE = regexp.MustCompile(`https?://[^\s<>"'` + "`" + `]+`)

// outputShown bounds how much of pr_command's output a land prints as
// progress; all of it is in the log.
const outputShown = 4 << 10

// Spec is one run of pr_command.
type Spec struct {
	Command string // the shell command
	Source  string // where it was read from, for the progress line
	Dir     string // where it runs: the run's workspace, or the user's clone
	Env     []string
	// What it is told, as LOOP_* variables.
	RunID, Workspace, Branch, BaseBranch, Title, BodyFile string
	Push                                                  *api.PushResult
	LogPath                                               string // its output, truncated first
	Progress                                              func(string)
}

// Run runs s.Command with /bin/sh in a process group of its own that the
// timeout or ctx's end kills whole, its output to s.LogPath. It returns how
// it went and the first URL it printed.
func Run(ctx context.Context, s Spec) (*api.PRCommandResult, string) {
	out := &api.PRCommandResult{ExitCode: -1, LogPath: s.LogPath}
	logf, err := os.OpenFile(s.LogPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		out.Error = "pr_command not run: " + err.Error()
		return out, ""
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s.Command)
	cmd.Dir = s.Dir
	remoteName := s.Push.Remote
	if remoteName == "" {
		remoteName = s.Push.URL
	}
	cmd.Env = append(s.Env, "LOOP_RUN_ID="+s.RunID, "LOOP_WORKSPACE="+s.Workspace,
		"LOOP_BRANCH="+s.Branch, "LOOP_BASE_BRANCH="+s.BaseBranch, "LOOP_TITLE="+s.Title,
		"LOOP_BODY_FILE="+s.BodyFile, "LOOP_REMOTE="+remoteName, "LOOP_REMOTE_URL="+s.Push.URL, "LOOP_COMMIT="+s.Push.Commit)
	cmd.Stdout, cmd.Stderr = logf, logf
	procgroup.Set(cmd)
	cmd.WaitDelay = time.Second
	s.Progress("running pr_command (from " + s.Source + "; output: " + s.LogPath + ")")
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		out.ExitCode = 0
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		out.Error = fmt.Sprintf("pr_command timed out after %s and was stopped", Timeout)
	case ctx.Err() != nil:
		out.Error = "pr_command was stopped: the land was interrupted"
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		out.ExitCode, out.Error = exit.ExitCode(), fmt.Sprintf("pr_command exited %d", exit.ExitCode())
	default:
		out.Error = "pr_command: " + err.Error()
	}
	head, _ := readHead(s.LogPath, 64<<10)
	url := strings.TrimRight(urlRE.FindString(head), ".,;:)]}")
	shown := head[:min(len(head), outputShown)]
	for line := range strings.SplitSeq(strings.TrimRight(shown, "\n"), "\n") {
		if line != "" {
			s.Progress("pr_command: " + line)
		}
	}
	return out, url
}

// readHead is the first n bytes of a file, as valid UTF-8.
func readHead(path string, n int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, n)
	k, _ := f.Read(b)
	return strings.ToValidUTF8(string(b[:k]), ""), nil
}
