package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
)

// addCompletions teaches the shell completion (loopctl completion
// bash|zsh|fish, cobra's) what loopctl's arguments are: run ids and "last"
// for every RUN argument, config keys for --set, statuses for --status.
func addCompletions(root *cobra.Command, g *globalOptions) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if (strings.Contains(c.Use, " RUN") || strings.Contains(c.Use, " [RUN]")) && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = completeRuns(g)
		}
		if c.Flags().Lookup("set") != nil {
			_ = c.RegisterFlagCompletionFunc("set", completeSet)
		}
		if c.Flags().Lookup("status") != nil {
			_ = c.RegisterFlagCompletionFunc("status", completeStatus)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeRuns offers "last" and the ids of recent runs, with their
// status and name. It asks a running daemon only: completing a word never
// starts one.
func completeRuns(g *globalOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out := []cobra.Completion{cobra.CompletionWithDesc("last", "the newest run in this workspace")}
		sock, err := g.socketPath()
		if err != nil {
			return out, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		runs, err := api.NewClient(sock).ListRuns(ctx, api.ListOptions{Limit: 100})
		if err != nil {
			return out, cobra.ShellCompDirectiveNoFileComp
		}
		for _, r := range runs {
			if !strings.HasPrefix(r.ID, toComplete) {
				continue
			}
			desc := string(r.Status)
			if r.Name != "" {
				desc += " " + r.Name
			} else if g := firstLine(r.Goal); g != "" {
				desc += " " + truncate(g, 40)
			}
			out = append(out, cobra.CompletionWithDesc(r.ID, desc))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeSet offers "key=" for every config key.
func completeSet(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if strings.Contains(toComplete, "=") {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, k := range config.KeyNames() {
		if !strings.HasSuffix(k, ".") {
			k += "="
		}
		if strings.HasPrefix(k, toComplete) {
			out = append(out, k)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

func completeStatus(_ *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	for _, s := range []api.RunStatus{api.RunPending, api.RunRunning, api.RunPaused, api.RunWaiting,
		api.RunCompleted, api.RunFailed, api.RunAborted, api.RunInterrupted} {
		out = append(out, string(s))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func newManCmd(g *globalOptions) *cobra.Command {
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
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return fmt.Errorf("create %s: %w", args[0], err)
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true // pages that do not change with the day they were made
			header := &doc.GenManHeader{Title: "LOOPCTL", Section: "1", Source: "loopd " + api.BuildVersion(), Manual: "loopd manual"}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("write man pages: %w", err)
			}
			fmt.Fprintf(g.Err, "wrote the man pages into %s\n", args[0])
			return nil
		},
	}
}
