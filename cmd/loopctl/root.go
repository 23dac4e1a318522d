package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
)

// globalOptions are the flags every command has.
type globalOptions struct {
	JSON   bool
	Socket string
	Dir    string // -C: the workspace for `last` and for start

	Out, Err io.Writer
}

func newRootCmd(out, errOut io.Writer) *cobra.Command {
	g := &globalOptions{Out: out, Err: errOut}
	root := &cobra.Command{
		Use:   "loopctl",
		Short: "Control loopd, the daemon that runs autonomous coding-agent loops",
		Long: `loopctl starts, inspects, follows, stops and waits for loopd runs.

A run is named by its id, any unique id prefix, or "last" (the newest run in
this workspace). loopctl starts the daemon in the background if it is not
running (set LOOPCTL_NO_AUTOSTART=1 to prevent that).

Exit codes: 0 success; 1 FAILED, 2 ABORTED, 3 INTERRUPTED (wait, start --wait,
watch); 64 usage error; 66 run not found; 69 daemon unavailable;
70 internal error; 124 wait --timeout elapsed; 130 interrupted.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })
	pf := root.PersistentFlags()
	pf.BoolVar(&g.JSON, "json", false, "print stable machine-readable JSON")
	pf.StringVar(&g.Socket, "socket", "", "daemon socket (default $LOOPD_SOCKET, else $LOOPD_HOME/loopd.sock)")
	pf.StringVarP(&g.Dir, "dir", "C", "", "workspace directory (default: the current directory)")
	root.AddCommand(
		newStartCmd(g), newListCmd(g), newStatusCmd(g), newStepsCmd(g), newLogsCmd(g), newEventsCmd(g),
		newWatchCmd(g), newWaitCmd(g), newStopCmd(g), newPauseCmd(g), newResumeCmd(g), newSignalCmd(g),
		newPostmortemCmd(g), newDaemonCmd(g), newVersionCmd(g),
		newTrustCmd(g),
	)
	return root
}

// socketPath resolves where the daemon listens.
func (g *globalOptions) socketPath() (string, error) {
	if g.Socket != "" {
		return filepath.Abs(g.Socket)
	}
	return api.SocketPath()
}

// workspace is the absolute workspace directory (-C, else the cwd).
func (g *globalOptions) workspace() (string, error) {
	dir := g.Dir
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		return "", usageErrorf("workspace %s is not a directory", abs)
	}
	return abs, nil
}

// ref names a run for the API: "last" is resolved in the workspace.
func (g *globalOptions) ref(arg string) (api.RunRef, error) {
	ws, err := g.workspace()
	if err != nil && arg == "last" {
		return api.RunRef{}, err
	}
	return api.RunRef{Ref: arg, Workspace: ws}, nil
}

// client connects to the daemon, starting it if needed (and allowed).
func (g *globalOptions) client(ctx context.Context) (*api.Client, error) {
	sock, err := g.socketPath()
	if err != nil {
		return nil, &exitError{code: exitUnavailable, msg: err.Error()}
	}
	c := api.NewClient(sock)
	if _, err := c.Ping(ctx); err == nil {
		return c, nil
	} else if !isUnavailable(err) || errors.Is(err, api.ErrNoAnswer) {
		return nil, err // a daemon holds the socket: another one cannot help
	}
	if os.Getenv("LOOPCTL_NO_AUTOSTART") == "1" {
		return nil, fmt.Errorf("%w: no daemon at %s (LOOPCTL_NO_AUTOSTART=1)", api.ErrUnavailable, sock)
	}
	if err := autostart(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// runClient names the run given as arg and connects to the daemon: how
// every command that takes a RUN begins.
func (g *globalOptions) runClient(ctx context.Context, arg string) (*api.Client, api.RunRef, error) {
	ref, err := g.ref(arg)
	if err != nil {
		return nil, api.RunRef{}, err
	}
	c, err := g.client(ctx)
	return c, ref, err
}

// runArg is the Args validator of commands that take exactly one RUN.
func runArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageErrorf("%s needs exactly one RUN: a run id, a unique id prefix, or last", cmd.CommandPath())
	}
	return nil
}
