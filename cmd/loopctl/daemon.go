package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/daemonconf"
	"github.com/loopd/loopd/internal/termtext"
)

func newDaemonCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "daemon", Short: "Inspect or stop the daemon; install it as a systemd user service"}
	cmd.AddCommand(newDaemonStatusCmd(g), newDaemonStopCmd(g), newDaemonInstallCmd(g), newDaemonUninstallCmd(g))
	return cmd
}

type daemonStatusOptions struct{ *globalOptions }

func newDaemonStatusCmd(g *globalOptions) *cobra.Command {
	o := &daemonStatusOptions{globalOptions: g}
	return &cobra.Command{
		Use:   "status",
		Short: "Show whether the daemon runs, and its pid, version, home, active runs and dashboard address (exit 69 when not running)",
		Args:  cobra.NoArgs,
		RunE:  o.run,
	}
}

func (o *daemonStatusOptions) run(cmd *cobra.Command, _ []string) error {
	sock, err := o.socketPath()
	if err != nil {
		return err
	}
	info, err := o.newClient(sock).DaemonStatus(cmd.Context())
	if err != nil {
		if peer := (*api.PeerError)(nil); errors.As(err, &peer) {
			// Another user's process serves the socket: say so, not "no daemon".
			return &exitError{code: exitUnavailable, msg: peer.Error()}
		}
		if isUnavailable(err) {
			if o.JSON {
				_ = printJSON(o.Out, map[string]any{"running": false, "socket": sock})
			}
			return &exitError{code: exitUnavailable, msg: fmt.Sprintf("no daemon is running at %s", sock)}
		}
		return err
	}
	if o.JSON {
		return printJSON(o.Out, info)
	}
	fmt.Fprintf(o.Out, "loopd %s running: pid %d, up %s\n  home    %s\n  socket  %s\n  runs    %d active of %d slots\n",
		info.Version, info.PID, duration(time.Since(info.StartedAt.Time)), info.Home, info.Socket, info.ActiveRuns, info.MaxConcurrent)
	printFleet(o.Out, info)
	printDashboard(o.Out, info)
	printWorktreeDisk(o.Out, info.Worktrees)
	return nil
}

// printFleet adds a fleet node's store, worker and leases to `daemon
// status` (docs/fleet.md); the embedded daemon has none.
func printFleet(w io.Writer, info api.DaemonInfo) {
	if info.Store == "" {
		return
	}
	fmt.Fprintf(w, "  store   %s\n", termtext.Quote(info.Store))
	if info.Worker == "" {
		fmt.Fprintln(w, "  worker  none: an API-only node (--worker=false)")
		return
	}
	fmt.Fprintf(w, "  worker  %s, holding %d run leases\n", termtext.Quote(info.Worker), len(info.Leases))
}

// printDashboard adds the TCP listener and the dashboard to `daemon
// status`, or how to get them: without the line a user cannot tell a
// daemon that never had --http from one whose dashboard they lost.
func printDashboard(w io.Writer, info api.DaemonInfo) {
	switch {
	case info.Dashboard != "":
		fmt.Fprintf(w, "  http    %s, dashboard %s (a login link: loopctl dashboard)\n", info.HTTP, info.Dashboard)
	case info.HTTP != "":
		fmt.Fprintf(w, "  http    %s (API only, bearer token in %s; no dashboard on this address)\n", info.HTTP, filepath.Join(info.Home, "http.token"))
	default:
		fmt.Fprintf(w, "  http    none: no dashboard (set http = 127.0.0.1:7777 in %s, then loopctl daemon stop)\n", daemonconf.Path(info.Home))
	}
}

type daemonStopOptions struct {
	*globalOptions
	KillSteps bool
}

func newDaemonStopCmd(g *globalOptions) *cobra.Command {
	o := &daemonStopOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the daemon; running steps go on and are adopted by the next daemon (--kill-steps stops them too)",
		Args:  cobra.NoArgs,
		RunE:  o.run,
	}
	cmd.Flags().BoolVar(&o.KillSteps, "kill-steps", false, "also stop running steps (their runs continue when the daemon is next started)")
	return cmd
}

func (o *daemonStopOptions) run(cmd *cobra.Command, _ []string) error {
	sock, err := o.socketPath()
	if err != nil {
		return err
	}
	c := o.newClient(sock)
	info, err := c.Ping(cmd.Context())
	if err != nil {
		if peer := (*api.PeerError)(nil); errors.As(err, &peer) {
			return &exitError{code: exitUnavailable, msg: peer.Error()}
		}
		if isUnavailable(err) {
			if o.JSON {
				return printJSON(o.Out, map[string]any{"stopped": false, "running": false, "socket": sock})
			}
			fmt.Fprintf(o.Err, "no daemon is running at %s\n", sock)
			return nil
		}
		return err
	}
	if err := c.StopDaemon(cmd.Context(), api.DaemonStopRequest{KillSteps: o.KillSteps}); err != nil {
		return err
	}
	if !awaitGone(cmd.Context(), info.PID) {
		return errors.New("the daemon did not exit within 30s")
	}
	if o.JSON {
		return printJSON(o.Out, map[string]any{"stopped": true, "pid": info.PID, "kill_steps": o.KillSteps})
	}
	fmt.Fprintf(o.Out, "loopd (pid %d) stopped\n", info.PID)
	return nil
}

// awaitGone waits until process pid has exited, for at most 30s (less if
// ctx ends first), and reports whether it did: a daemon asked to stop has
// released its home (lock, socket) only once its process is gone.
func awaitGone(ctx context.Context, pid int) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for alive(pid) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(syscallZero) == nil
}

// syscallZero probes a process without signalling it.
const syscallZero = syscall.Signal(0)

// printWorktreeDisk adds the run worktrees' disk use to `daemon status`.
func printWorktreeDisk(w io.Writer, d *api.WorktreeDisk) {
	if d == nil {
		return
	}
	size := bytesHuman(d.Bytes)
	if !d.Complete {
		size = "at least " + size + " (measure cut short on a large tree)"
	}
	fmt.Fprintf(w, "  disk    %d run worktree(s), %s\n", d.Count, size)
}

func bytesHuman(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
