package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
		runs, err := g.newClient(sock).ListRuns(ctx, api.ListOptions{Limit: 100})
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
