package main

import (
	"errors"
	"os"

	"github.com/loopd/loopd/internal/api"
)

// fleetURL is LOOPD_URL: a fleet's API node, reached over HTTPS with the
// bearer token in LOOPD_TOKEN instead of the user's own daemon's socket.
// --socket still names a socket explicitly.
func (g *globalOptions) fleetURL() string {
	if g.Socket != "" || g.dial != nil {
		return ""
	}
	return os.Getenv("LOOPD_URL")
}

// fleetClient is the client of LOOPD_URL, made once; a URL or token that
// cannot work is a usage error (64) naming the problem, before anything
// is sent.
func (g *globalOptions) fleetClient() (*api.Client, error) {
	if g.remote != nil || g.remoteErr != nil {
		return g.remote, g.remoteErr
	}
	c, err := api.NewClientURL(g.fleetURL(), os.Getenv("LOOPD_TOKEN"))
	if err != nil {
		g.remoteErr = usageErrorf("%v", err)
		return nil, g.remoteErr
	}
	g.remote = c
	return c, nil
}

// refusedToken explains a 403 from an API node reached through LOOPD_URL.
func refusedToken(c *api.Client, err error) error {
	if c == nil || !c.Remote() || !api.IsCode(err, api.CodeForbidden) {
		return err
	}
	var ae *api.Error
	if !errors.As(err, &ae) {
		return err
	}
	return &exitError{code: exitUnavailable, msg: ae.Error() + "\n  " + c.Socket() + " refused LOOPD_TOKEN: " +
		"use its LOOPD_HOME/http.token or a token from `loopctl token create NAME` (one that was not revoked)"}
}
