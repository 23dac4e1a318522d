package main

// `loopctl dashboard` prints a one-time login URL for the daemon's web
// dashboard (and opens it with --open). It starts nothing: the dashboard is
// served by `loopd --http`.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
)

// dashboardOptions are the flags and argument of `loopctl dashboard`.
type dashboardOptions struct {
	*globalOptions
	Open bool
	Run  string
	// Browser opens a URL; default: $BROWSER, else xdg-open.
	Browser func(url string) error
}

func newDashboardCmd(g *globalOptions) *cobra.Command {
	o := &dashboardOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "dashboard [RUN]",
		Short: "Print a one-time login link to the web dashboard (loopd --http)",
		Long: `Print a link that logs this browser in to loopd's web dashboard and opens
the runs page, or RUN's page. The link works once and expires after a
minute; it sets a session cookie. The dashboard is served by the daemon's
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
		if err := open(login.URL); err != nil {
			fmt.Fprintf(o.Err, "could not open a browser (%v); open the link above by hand\n", err)
		}
	}
	return nil
}

// browser opens url with $BROWSER, else xdg-open, without waiting for it.
func browser(url string) error {
	name := os.Getenv("BROWSER")
	if name == "" {
		name = "xdg-open"
	}
	cmd := exec.Command(name, url)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reap it; the browser outlives loopctl
	return nil
}
