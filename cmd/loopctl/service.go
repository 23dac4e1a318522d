package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/daemonconf"
)

// unitName is the systemd user unit that runs loopd.
const unitName = "loopd.service"

// serviceOptions are the flags and the world of daemon install/uninstall.
type serviceOptions struct {
	*globalOptions
	Print bool

	// systemd reports whether a systemd user manager can be driven, and
	// systemctl runs `systemctl --user ARGS…`; both are replaced in tests.
	systemd   func() bool
	systemctl func(ctx context.Context, args ...string) error
}

func newServiceOptions(g *globalOptions) *serviceOptions {
	return &serviceOptions{globalOptions: g, systemd: systemdAvailable, systemctl: runSystemctl}
}

func newDaemonInstallCmd(g *globalOptions) *cobra.Command { return installCmd(newServiceOptions(g)) }

func newDaemonUninstallCmd(g *globalOptions) *cobra.Command {
	return uninstallCmd(newServiceOptions(g))
}

func installCmd(o *serviceOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Run loopd as a systemd user service that restarts it when it fails (--print: only print the unit)",
		Long: `Write the systemd user unit ~/.config/systemd/user/loopd.service, which runs this
loopd with your LOOPD_HOME and PATH and restarts it when it fails (loopd reads
its settings, such as the dashboard's address, from LOOPD_HOME/daemon.conf, as
it does whoever starts it; a bad setting is refused here), then reload
systemd and enable and start it (a daemon already running outside systemd is
stopped first; its steps go on and the service's daemon adopts them). Without a
systemd user manager, the file is written and the commands to run are printed.

loopctl finds the service's daemon as usual (LOOPD_HOME/loopd.sock). For loops
that outlive your login session, run: loginctl enable-linger "$USER".`,
		Args: cobra.NoArgs,
		RunE: o.install,
	}
	cmd.Flags().BoolVar(&o.Print, "print", false, "print the unit and change nothing")
	return cmd
}

func uninstallCmd(o *serviceOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "uninstall",
		Short: "Stop and remove the systemd user service written by daemon install",
		Long: `Disable and stop the loopd.service user unit and remove its file. Running steps
are not killed: the next daemon (started by loopctl as usual) adopts them.`,
		Args: cobra.NoArgs,
		RunE: o.uninstall,
	}
}

// unitConfig is what the unit file says.
type unitConfig struct {
	Loopd string // absolute path of loopd
	Home  string // LOOPD_HOME
	Path  string // PATH for the daemon and its steps

	// Settings is LOOPD_HOME/daemon.conf, which loopd reads at every
	// start. The unit names it rather than copying its settings into
	// flags: flags would win over the file, and a later edit of it would
	// silently not apply to the service.
	Settings *daemonconf.File
}

// renderUnit writes the unit file.
//
//   - KillMode=process: systemd stops only loopd itself. Steps run in their
//     own sessions but inside the service's cgroup; the default
//     (control-group) would kill every running agent at each restart,
//     which loopd promises never to do — the next daemon adopts them.
//   - Delegate=yes: loopd puts each step in a cgroup of its own below the
//     service's (so that stop --now and timeouts kill everything a step
//     started); delegation tells systemd that subtree is loopd's to manage.
//   - Restart=on-failure with RestartPreventExitStatus=64: a crash or a
//     failed start is retried; a usage error (64) is not, since retrying
//     cannot help. 75 (the home's lock is held) is retried: after a crash
//     the holder may be a child of the dead daemon that outlasted the
//     daemon's own wait for it, and a service that gave up on 75 stayed
//     down until someone noticed. A live daemon holding the lock is
//     retried every RestartSec until it is gone, and then the service
//     takes over.
//   - PATH is the installing shell's: the user manager's default PATH lacks
//     ~/.local/bin, ~/go/bin and the like, where agents and tools live.
func renderUnit(c unitConfig) string {
	var b strings.Builder
	b.WriteString("# Written by loopctl daemon install; remove with loopctl daemon uninstall.\n")
	if c.Settings != nil {
		now := "none set now"
		if c.Settings.Summary() != "" {
			now = "now: " + c.Settings.Summary()
		}
		fmt.Fprintf(&b, "# loopd reads its settings from %s at every start (%s);\n"+
			"# after editing it: systemctl --user restart loopd\n", c.Settings.Path, now)
	}
	fmt.Fprintf(&b, `[Unit]
Description=loopd: runs autonomous coding-agent loops

[Service]
Type=simple
Environment=%s
Environment=%s
ExecStart=%s --home %s
Restart=on-failure
RestartSec=2s
RestartPreventExitStatus=64
KillMode=process
Delegate=yes
TimeoutStopSec=30s

[Install]
WantedBy=default.target
`, unitQuote("LOOPD_HOME="+c.Home), unitQuote("PATH="+c.Path), unitQuote(c.Loopd), unitQuote(c.Home))
	return b.String()
}

// unitQuote quotes a word for a unit file: bare when it needs nothing,
// else in double quotes with \" and \\ escaped; '%' (a specifier) is
// always doubled.
func unitQuote(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;$") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// unitPath is where the user unit lives: $XDG_CONFIG_HOME/systemd/user,
// else ~/.config/systemd/user.
func unitPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("locate ~/.config: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "systemd", "user", unitName), nil
}

func (o *serviceOptions) unit() (unitConfig, error) {
	bin, err := findLoopd()
	if err != nil {
		return unitConfig{}, err
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return unitConfig{}, err
	}
	home, err := api.Home()
	if err != nil {
		return unitConfig{}, err
	}
	settings, err := daemonconf.Load(home)
	if err != nil {
		return unitConfig{}, usageErrorf("%v", err)
	}
	return unitConfig{Loopd: bin, Home: home, Path: os.Getenv("PATH"), Settings: settings}, nil
}

func (o *serviceOptions) install(cmd *cobra.Command, _ []string) error {
	if o.Socket != "" || os.Getenv("LOOPD_SOCKET") != "" {
		return usageErrorf("daemon install uses the socket in LOOPD_HOME; unset LOOPD_SOCKET and --socket")
	}
	c, err := o.unit()
	if err != nil {
		return err
	}
	text := renderUnit(c)
	o.warnEnvironment(c)
	if o.Print {
		_, err := fmt.Fprint(o.Out, text)
		return err
	}
	path, err := unitPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	result := map[string]any{"unit": path, "loopd": c.Loopd, "home": c.Home, "settings": c.Settings.Path, "enabled": false}
	fmt.Fprintf(o.Err, "wrote %s (loopd %s, LOOPD_HOME %s)\n", path, c.Loopd, c.Home)
	if !o.systemd() {
		fmt.Fprintf(o.Err, "no systemd user manager here; where there is one, run:\n"+
			"  systemctl --user daemon-reload\n  systemctl --user enable --now %s\n"+
			"and for loops that outlive your login session:\n  loginctl enable-linger \"$USER\"\n", unitName)
		return o.finish(result)
	}
	ctx := cmd.Context()
	if err := o.stopUnmanaged(ctx); err != nil {
		return err
	}
	for _, args := range [][]string{{"daemon-reload"}, {"enable", "--now", unitName}} {
		if err := o.systemctl(ctx, args...); err != nil {
			return fmt.Errorf("systemctl --user %s: %w", strings.Join(args, " "), err)
		}
	}
	result["enabled"] = true
	fmt.Fprintf(o.Err, "enabled and started %s; loopctl talks to it as usual\n"+
		"for loops that outlive your login session: loginctl enable-linger \"$USER\"\n", unitName)
	return o.finish(result)
}

// warnEnvironment names the LOOPD_* settings of this shell that the unit
// does not carry: a daemon loopctl starts from here inherits them, the
// service's would not, and the difference would show only as a missing
// dashboard after the switch.
func (o *serviceOptions) warnEnvironment(c unitConfig) {
	for _, s := range daemonconf.Settings {
		if v := os.Getenv(s.Env); s.Env != "" && v != "" {
			fmt.Fprintf(o.Err, "warning: %s=%s is set in this shell, but the service does not inherit it; "+
				"to keep it, add %s = %s to %s\n", s.Env, s.Redact(v), s.Key, config.QuoteValue(s.Redact(v)), c.Settings.Path)
		}
	}
}

// stopUnmanaged stops a daemon that answers on the home's socket before
// systemd starts its own (which would otherwise exit 75: the lock is
// held). Its steps go on; the service's daemon adopts them.
func (o *serviceOptions) stopUnmanaged(ctx context.Context) error {
	// The daemon of this home, never LOOPD_URL's API node: the service
	// is this machine's.
	sock, err := o.socketPath()
	if o.fleetURL() != "" {
		sock, err = api.SocketPath()
	}
	if err != nil {
		return err
	}
	c := api.NewClient(sock)
	if o.dial != nil {
		c = o.newClient(sock)
	}
	info, err := c.Ping(ctx)
	if err != nil {
		return nil
	}
	fmt.Fprintf(o.Err, "stopping the running loopd (pid %d) so that systemd runs it; its steps go on\n", info.PID)
	if err := c.StopDaemon(ctx, api.DaemonStopRequest{}); err != nil {
		return err
	}
	if !awaitGone(ctx, info.PID) {
		return errors.New("the running daemon did not exit within 30s")
	}
	return nil
}

func (o *serviceOptions) uninstall(cmd *cobra.Command, _ []string) error {
	path, err := unitPath()
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(o.Err, "%s is not installed (%s does not exist)\n", unitName, path)
		return o.finish(map[string]any{"unit": path, "removed": false})
	}
	if o.systemd() {
		if err := o.systemctl(cmd.Context(), "disable", "--now", unitName); err != nil {
			return fmt.Errorf("systemctl --user disable --now %s: %w", unitName, err)
		}
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	if o.systemd() {
		if err := o.systemctl(cmd.Context(), "daemon-reload"); err != nil {
			return fmt.Errorf("systemctl --user daemon-reload: %w", err)
		}
		fmt.Fprintf(o.Err, "stopped, disabled and removed %s\n", path)
	} else {
		fmt.Fprintf(o.Err, "removed %s; where systemd runs it, also run:\n  systemctl --user disable --now %s\n", path, unitName)
	}
	return o.finish(map[string]any{"unit": path, "removed": true})
}

func (o *serviceOptions) finish(result map[string]any) error {
	if o.JSON {
		return printJSON(o.Out, result)
	}
	return nil
}

// systemdAvailable reports whether systemd runs this machine (sd_booted:
// /run/systemd/system exists) and systemctl is installed.
func systemdAvailable() bool {
	if fi, err := os.Stat("/run/systemd/system"); err != nil || !fi.IsDir() {
		return false
	}
	_, err := exec.LookPath("systemctl")
	return err == nil
}

func runSystemctl(ctx context.Context, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "systemctl", append([]string{"--user"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}
