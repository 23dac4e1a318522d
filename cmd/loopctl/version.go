package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
)

type versionOptions struct{ *globalOptions }

func newVersionCmd(g *globalOptions) *cobra.Command {
	o := &versionOptions{globalOptions: g}
	return &cobra.Command{
		Use:   "version",
		Short: "Print loopctl's version (and the running daemon's)",
		Long: `Print loopctl's version, and the running daemon's when one answers (this
command never starts a daemon). The version is set when the binaries are built
(scripts/release); a build from a checkout says "dev". The commit the binary
was built from and that commit's date follow, when the build recorded them
(--json: commit, date).`,
		Args: cobra.NoArgs,
		RunE: o.run,
	}
}

func (o *versionOptions) run(cmd *cobra.Command, _ []string) error {
	out := map[string]any{"loopctl": api.BuildVersion()}
	if c := api.BuildCommit(); c != "" {
		out["commit"] = c
	}
	if d := api.BuildDate(); d != "" {
		out["date"] = d
	}
	if sock, err := o.socketPath(); err == nil {
		if info, err := o.newClient(sock).Ping(cmd.Context()); err == nil {
			out["loopd"] = info.Version
		}
	}
	if o.JSON {
		return printJSON(o.Out, out)
	}
	fmt.Fprintf(o.Out, "loopctl %s\n", api.VersionLine())
	if v, ok := out["loopd"]; ok {
		fmt.Fprintf(o.Out, "loopd   %s (running)\n", v)
	}
	return nil
}
