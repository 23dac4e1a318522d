package main

// `loopctl dashboard` prints a one-time login URL for the daemon's web
// dashboard (and opens it with --open). It starts nothing: the dashboard is
// served by `loopd --http`.

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
)

// dashboardOptions are the flags and argument of `loopctl dashboard`.
type dashboardOptions struct {
	*globalOptions
	Open bool
	Run  string
	// Browser opens a file or URL; default: $BROWSER, else xdg-open.
	Browser func(target string) error
}

func newDashboardCmd(g *globalOptions) *cobra.Command {
	o := &dashboardOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "dashboard [RUN]",
		Short: "Print a one-time login link to the web dashboard (loopd --http)",
		Long: `Print a link that logs this browser in to loopd's web dashboard and opens
the runs page, or RUN's page. The link works once and expires after a
minute; it sets a session cookie. --open hands the browser a private file
that holds the link, never the link itself: a program's arguments are
visible to every user of the machine. The dashboard is served by the daemon's
HTTP listener: start the daemon with loopd --http 127.0.0.1:7777 (or
LOOPD_HTTP=127.0.0.1:7777). See docs/dashboard.md.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Run = args[0]
			}
			return o.run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.Open, "open", false, "also open the link in a browser ($BROWSER, else xdg-open)")
	return cmd
}

func (o *dashboardOptions) run(ctx context.Context) error {
	req := api.DashboardLoginRequest{}
	if o.Run != "" {
		ref, err := o.ref(o.Run)
		if err != nil {
			return err
		}
		req.Run, req.Workspace = ref.Ref, ref.Workspace
	}
	c, err := o.client(ctx)
	if err != nil {
		return err
	}
	login, err := c.DashboardLogin(ctx, req)
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(o.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(login); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.Out, "%s\n", login.URL)
		fmt.Fprintf(o.Err, "open this link within %.0f seconds (it works once) to log in to the dashboard\n",
			max(time.Until(login.ExpiresAt.Time), 0).Seconds())
	}
	if o.Open {
		open := o.Browser
		if open == nil {
			open = browser
		}
		page, err := writeLoginPage(login.URL)
		if err == nil {
			err = open(page)
		}
		if err != nil {
			fmt.Fprintf(o.Err, "could not open a browser (%v); open the link above by hand\n", err)
		}
	}
	return nil
}

// loginPageDir prefixes the private directories of login pages.
const loginPageDir = "loopctl-dashboard-"

// writeLoginPage writes a page that opens url into a new private
// directory (0700, the page 0600) and returns the page's path.
//
// The browser is given this path, never the URL: a process's arguments are
// readable by every user on the machine (/proc/PID/cmdline), and a process
// polling them would redeem the one-time code first. The page is useless
// once the code is used or expired; each call removes the pages of earlier
// calls older than staleLoginPage.
func writeLoginPage(url string) (string, error) {
	removeStaleLoginPages(os.TempDir(), time.Now().Add(-staleLoginPage))
	dir, err := os.MkdirTemp("", loginPageDir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := loginPage.Execute(&b, url); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "login.html")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return path, nil
}

// staleLoginPage is the age past which a login page is removed: well past
// any login code's life.
const staleLoginPage = 10 * time.Minute

// removeStaleLoginPages removes this user's login page directories in tmp
// last changed before cutoff.
func removeStaleLoginPages(tmp string, cutoff time.Time) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, loginPageDir+"*"))
	for _, d := range dirs {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() || !fi.ModTime().Before(cutoff) {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue // another user's: not ours to remove
		}
		_ = os.RemoveAll(d)
	}
}

// loginPage navigates to the login URL at once; the link is for a browser
// that does not follow a refresh.
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0;url={{.}}">
<title>loopd · logging in</title>
</head>
<body><p><a href="{{.}}">Open the loopd dashboard</a></p></body>
</html>
`))

// browser opens target with $BROWSER, else xdg-open, without waiting for
// it.
func browser(target string) error {
	name := os.Getenv("BROWSER")
	if name == "" {
		name = "xdg-open"
	}
	cmd := exec.Command(name, target)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reap it; the browser outlives loopctl
	return nil
}
