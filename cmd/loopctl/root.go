package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/workspace"
)

// globalOptions are the flags every command has.
type globalOptions struct {
	JSON   bool
	Socket string
	Dir    string // -C: the workspace for `last` and for start

	Out, Err io.Writer

	// dial, when set, connects to the daemon instead of its socket: the
	// tests serve the API in-process (net/http/httptest).
	dial api.Dialer

	// remote is the client of LOOPD_URL once made (fleetClient), or why
	// it cannot be.
	remote    *api.Client
	remoteErr error
}

func newRootCmd(out, errOut io.Writer) *cobra.Command {
	return newRoot(&globalOptions{Out: out, Err: errOut})
}

// newRoot is loopctl's command tree over g, which holds the global flags
// once they are parsed.
//
// A command is one file, as in tailscale's cmd/tailscale/cli: NAME.go holds
// its nameOptions (an embedded *globalOptions and its flags), newNameCmd,
// which binds them, and a run method; it is added here, and tested against
// an in-process API (fakeapi_test.go).
func newRoot(g *globalOptions) *cobra.Command {
	out, errOut := g.Out, g.Err
	root := &cobra.Command{
		Use:   "loopctl",
		Short: "Control loopd, the daemon that runs autonomous coding-agent loops",
		Long: `loopctl starts, inspects, follows, stops and waits for loopd runs.

A run is named by its id, any unique id prefix, or "last" (the newest run in
this workspace). loopctl starts the daemon in the background if it is not
running (set LOOPCTL_NO_AUTOSTART=1 to prevent that). With LOOPD_URL and
LOOPD_TOKEN set, it talks to a fleet's API node instead, and starts nothing.

Exit codes: 0 success; 1 FAILED, 2 ABORTED, 3 INTERRUPTED (wait, start --wait,
watch); 64 usage error; 66 run not found; 69 daemon unavailable;
70 internal error; 124 wait --timeout elapsed; 130 interrupted.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       api.VersionLine(),
	}
	root.SetVersionTemplate("loopctl {{.Version}}\n")
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })
	pf := root.PersistentFlags()
	pf.BoolVar(&g.JSON, "json", false, "print stable machine-readable JSON")
	pf.StringVar(&g.Socket, "socket", "", "daemon socket (default $LOOPD_SOCKET, else $LOOPD_HOME/loopd.sock)")
	pf.StringVarP(&g.Dir, "dir", "C", "", "run as if in DIR: the workspace is the nearest ancestor holding .loop/, else the git top-level, else DIR")
	root.AddCommand(
		newStartCmd(g), newListCmd(g), newStatusCmd(g), newStepsCmd(g), newLogsCmd(g), newEventsCmd(g),
		newWatchCmd(g), newWaitCmd(g), newStopCmd(g), newPauseCmd(g), newResumeCmd(g), newSignalCmd(g), newAnswerCmd(g),
		newPostmortemCmd(g), newDaemonCmd(g), newVersionCmd(g),
		newTrustCmd(g),
		newManCmd(g),
		newDiffCmd(g), newLandCmd(g), newCleanCmd(g),
		newDashboardCmd(g),
		newTokenCmd(g),
	)
	addCompletions(root, g)
	return root
}

// socketPath resolves where the daemon listens: --socket, else LOOPD_URL
// (a fleet's API node, checked here), else LOOPD_SOCKET or
// LOOPD_HOME/loopd.sock.
func (g *globalOptions) socketPath() (string, error) {
	if g.Socket != "" {
		return filepath.Abs(g.Socket)
	}
	if u := g.fleetURL(); u != "" {
		c, err := g.fleetClient()
		if err != nil {
			return "", err
		}
		return c.Socket(), nil
	}
	return api.SocketPath()
}

// newClient is a client of the daemon at sock (of LOOPD_URL's API node
// once socketPath accepted it); it does not connect yet.
func (g *globalOptions) newClient(sock string) *api.Client {
	if g.remote != nil {
		return g.remote
	}
	if g.dial != nil {
		return api.NewClientDial(sock, g.dial)
	}
	return api.NewClient(sock)
}

// workspace is the workspace of -C DIR, else of the current directory,
// resolved like git: the nearest ancestor holding .loop/, else the git
// top-level, else the directory (workspace.Resolve). start, last and every
// other command agree on it.
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
	return workspace.Resolve(context.Background(), abs), nil
}

// ref names a run for the API: "last" is resolved in the workspace (an
// id needs none, and resolving one runs git).
func (g *globalOptions) ref(arg string) (api.RunRef, error) {
	if arg != "last" {
		return api.RunRef{Ref: arg}, nil
	}
	ws, err := g.workspace()
	if err != nil {
		return api.RunRef{}, err
	}
	if id, ok := worktreeRun(ws); ok {
		return api.RunRef{Ref: id}, nil
	}
	return api.RunRef{Ref: arg, Workspace: ws}, nil
}

// client connects to the daemon, starting it if needed (and allowed).
func (g *globalOptions) client(ctx context.Context) (*api.Client, error) {
	sock, err := g.socketPath()
	if err != nil {
		if ee := (*exitError)(nil); errors.As(err, &ee) {
			return nil, err
		}
		return nil, &exitError{code: exitUnavailable, msg: err.Error()}
	}
	c := g.newClient(sock)
	if _, err := c.Ping(ctx); err == nil {
		return c, nil
	} else if c.Remote() {
		// A fleet is never started from here: it is reachable or not.
		return nil, refusedToken(c, err)
	} else if !isUnavailable(err) || errors.Is(err, api.ErrNoAnswer) {
		return nil, err // a daemon holds the socket: another one cannot help
	} else if errors.Is(err, fs.ErrPermission) {
		// Someone else's socket (or a directory we cannot enter): a daemon
		// may well be there, and starting our own on that path would fail.
		return nil, permissionError(sock)
	}
	if os.Getenv("LOOPCTL_NO_AUTOSTART") == "1" {
		return nil, fmt.Errorf("%w: no daemon at %s (LOOPCTL_NO_AUTOSTART=1)", api.ErrUnavailable, sock)
	}
	if err := autostart(ctx, c); err != nil {
		return nil, &autostartError{err}
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

// permissionError says what happened when connecting to sock was refused
// by the file system: whose socket (or directory) it is, and how to reach a
// daemon of one's own.
func permissionError(sock string) error {
	whose := "it belongs to another user"
	for p := sock; ; p = filepath.Dir(p) {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			owner := "uid " + strconv.Itoa(int(st.Uid))
			if u, err := user.LookupId(strconv.Itoa(int(st.Uid))); err == nil {
				owner += " (" + u.Username + ")"
			}
			whose = "it belongs to " + owner
			if p != sock {
				whose = "it is in " + p + ", which belongs to " + owner
			}
			break
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return &exitError{code: exitUnavailable, msg: fmt.Sprintf("permission denied on the daemon socket %s: %s, "+
		"and a daemon serves only the user who started it (you are uid %d)\n"+
		"  to use a daemon of your own, unset LOOPD_SOCKET and --socket, or set LOOPD_HOME to a directory you own", sock, whose, os.Getuid())}
}

// control runs a state-changing request and reports the run's new state.
func control(cmd *cobra.Command, g *globalOptions, arg string,
	do func(context.Context, *api.Client, api.RunRef) (api.Run, error), say func(api.Run) string) error {
	ctx := cmd.Context()
	c, ref, err := g.runClient(ctx, arg)
	if err != nil {
		return err
	}
	run, err := do(ctx, c, ref)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, run)
	}
	fmt.Fprintln(g.Out, say(run))
	return nil
}
