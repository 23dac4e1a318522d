package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
)

func newPostmortemCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "postmortem RUN",
		Short: "Print the report written when a run ended (--json: summary.json)",
		Args:  runArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, ref, err := g.runClient(ctx, args[0])
			if err != nil {
				return err
			}
			pm, err := c.Postmortem(ctx, ref)
			if err != nil {
				return err
			}
			if g.JSON {
				_, err := fmt.Fprintf(g.Out, "%s\n", termtext.EscapeJSON(pm.Summary)) // as printJSON
				return err
			}
			_, err = fmt.Fprint(g.Out, termtext.QuoteLines(pm.Markdown))
			return err
		},
	}
}

func newDaemonCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "daemon", Short: "Inspect or stop the daemon; install it as a systemd user service"}
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Show whether the daemon runs, and its pid, version, home and active runs (exit 69 when not running)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sock, err := g.socketPath()
			if err != nil {
				return err
			}
			info, err := api.NewClient(sock).DaemonStatus(cmd.Context())
			if err != nil {
				if isUnavailable(err) {
					if g.JSON {
						_ = printJSON(g.Out, map[string]any{"running": false, "socket": sock})
					}
					return &exitError{code: exitUnavailable, msg: fmt.Sprintf("no daemon is running at %s", sock)}
				}
				return err
			}
			if g.JSON {
				return printJSON(g.Out, info)
			}
			fmt.Fprintf(g.Out, "loopd %s running: pid %d, up %s\n  home    %s\n  socket  %s\n  runs    %d active of %d slots\n",
				info.Version, info.PID, duration(time.Since(info.StartedAt.Time)), info.Home, info.Socket, info.ActiveRuns, info.MaxConcurrent)
			printWorktreeDisk(g.Out, info.Worktrees)
			return nil
		},
	})
	var killSteps bool
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop the daemon; running steps go on and are adopted by the next daemon (--kill-steps stops them too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sock, err := g.socketPath()
			if err != nil {
				return err
			}
			c := api.NewClient(sock)
			info, err := c.Ping(cmd.Context())
			if err != nil {
				if isUnavailable(err) {
					if g.JSON {
						return printJSON(g.Out, map[string]any{"stopped": false, "running": false, "socket": sock})
					}
					fmt.Fprintf(g.Err, "no daemon is running at %s\n", sock)
					return nil
				}
				return err
			}
			if err := c.StopDaemon(cmd.Context(), api.DaemonStopRequest{KillSteps: killSteps}); err != nil {
				return err
			}
			if !awaitGone(cmd.Context(), info.PID) {
				return errors.New("the daemon did not exit within 30s")
			}
			if g.JSON {
				return printJSON(g.Out, map[string]any{"stopped": true, "pid": info.PID, "kill_steps": killSteps})
			}
			fmt.Fprintf(g.Out, "loopd (pid %d) stopped\n", info.PID)
			return nil
		},
	}
	stop.Flags().BoolVar(&killSteps, "kill-steps", false, "also stop running steps (their runs continue when the daemon is next started)")
	cmd.AddCommand(stop, newDaemonInstallCmd(g), newDaemonUninstallCmd(g))
	return cmd
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

func newVersionCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print loopctl's version (and the running daemon's)",
		Long: `Print loopctl's version, and the running daemon's when one answers (this
command never starts a daemon). The version is set when the binaries are built
(scripts/release); a build from a checkout says "dev". The commit the binary
was built from and that commit's date follow, when the build recorded them
(--json: commit, date).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := map[string]any{"loopctl": api.BuildVersion()}
			if c := api.BuildCommit(); c != "" {
				out["commit"] = c
			}
			if d := api.BuildDate(); d != "" {
				out["date"] = d
			}
			if sock, err := g.socketPath(); err == nil {
				if info, err := api.NewClient(sock).Ping(cmd.Context()); err == nil {
					out["loopd"] = info.Version
				}
			}
			if g.JSON {
				return printJSON(g.Out, out)
			}
			fmt.Fprintf(g.Out, "loopctl %s\n", api.VersionLine())
			if v, ok := out["loopd"]; ok {
				fmt.Fprintf(g.Out, "loopd   %s (running)\n", v)
			}
			return nil
		},
	}
}
