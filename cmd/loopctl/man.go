package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/loopd/loopd/internal/api"
)

type manOptions struct{ *globalOptions }

func newManCmd(g *globalOptions) *cobra.Command {
	o := &manOptions{globalOptions: g}
	return &cobra.Command{
		Use:   "man DIR",
		Short: "Write loopctl's man pages (section 1) into DIR",
		Long: `Write a man page for loopctl and each of its commands into DIR, e.g.
  loopctl man ~/.local/share/man/man1 && man loopctl-start`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("man needs exactly one DIR to write the pages into")
			}
			return nil
		},
		RunE: o.run,
	}
}

func (o *manOptions) run(cmd *cobra.Command, args []string) error {
	if err := os.MkdirAll(args[0], 0o755); err != nil {
		return fmt.Errorf("create %s: %w", args[0], err)
	}
	root := cmd.Root()
	root.DisableAutoGenTag = true // pages that do not change with the day they were made
	header := &doc.GenManHeader{Title: "LOOPCTL", Section: "1", Source: "loopd " + api.BuildVersion(), Manual: "loopd manual"}
	if err := doc.GenManTree(root, header, args[0]); err != nil {
		return fmt.Errorf("write man pages: %w", err)
	}
	fmt.Fprintf(o.Err, "wrote the man pages into %s\n", args[0])
	return nil
}
