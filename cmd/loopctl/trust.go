package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/termtext"
)

type trustOptions struct {
	*globalOptions
	Revoke bool
	Show   bool
	Tasks  string
}

func newTrustCmd(g *globalOptions) *cobra.Command {
	o := &trustOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "trust [-C DIR] [--show | --revoke]",
		Short: "Review and trust the commands and environment a workspace's files set",
		Long: `A workspace's .loop/config, its stop file's custom_script conditions and
its env file (.env) name commands and environment that loopd would run; the
agents' own project files (.claude/settings.json, .mcp.json,
.gemini/settings.json, .codex/config.toml…) name hooks and MCP servers the
agent CLI runs by itself. loopd runs them only once you have trusted their
exact content, like direnv allow: loopctl start refuses a workspace whose
files are new or changed since.

trust prints every command, every other setting of .loop/config with its
value, and every environment variable name these files set (never an env
value), then records their content hashes for you in the
daemon's database. Files you name yourself (--set, --stop-file, your
~/.config/loop/config) need no trust. --revoke forgets what was trusted.

--tasks FILE judges a backlog's task list too (loopctl start --tasks FILE): a
list that names commands (a task's verify_command or set) is trusted like
.loop/config.

--show prints the same and records nothing, with the full command line
loopd runs for each agent preset (agent=claude runs Claude Code with
--dangerously-skip-permissions): read it before you trust.`,
		Example: `  loopctl trust --show
  loopctl trust
  loopctl trust -C ~/src/cloned-repo
  loopctl trust --tasks tasks.json
  loopctl trust --revoke`,
		Args: cobra.NoArgs,
		RunE: o.run,
	}
	cmd.Flags().BoolVar(&o.Revoke, "revoke", false, "forget the workspace's trusted files")
	cmd.Flags().BoolVar(&o.Show, "show", false, "print what would be trusted and each agent's command line; record nothing")
	cmd.Flags().StringVar(&o.Tasks, "tasks", "", "a backlog's task list to trust with the workspace's files (loopctl start --tasks FILE)")
	cmd.MarkFlagsMutuallyExclusive("revoke", "show")
	cmd.MarkFlagsMutuallyExclusive("revoke", "tasks")
	return cmd
}

func (o *trustOptions) run(cmd *cobra.Command, _ []string) error {
	ws, err := o.workspace()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	c, err := o.client(ctx)
	if err != nil {
		return err
	}
	if o.Revoke {
		rep, err := c.Revoke(ctx, ws)
		if err != nil {
			return err
		}
		if o.JSON {
			return printJSON(o.Out, rep)
		}
		if len(rep.Revoked) == 0 {
			fmt.Fprintf(o.Out, "nothing was trusted in %s\n", termtext.Quote(rep.Workspace))
			return nil
		}
		fmt.Fprintf(o.Out, "no longer trusted in %s:\n", termtext.Quote(rep.Workspace))
		for _, p := range rep.Revoked {
			fmt.Fprintf(o.Out, "  %s\n", termtext.Quote(relTo(rep.Workspace, p)))
		}
		return nil
	}
	req := api.TrustRequest{Workspace: ws, Show: o.Show}
	if o.Tasks != "" {
		// Relative to -C DIR when given, like start's flags.
		p := o.Tasks
		if o.Dir != "" && !filepath.IsAbs(p) {
			p = filepath.Join(o.Dir, p)
		}
		if req.TasksFile, err = filepath.Abs(p); err != nil {
			return usageErrorf("%v", err)
		}
	}
	if o.fleetURL() != "" {
		// The API node cannot see the clone: it judges, and trusts, the
		// files as committed at HEAD, which is what a run started from
		// here is made of.
		if o.Tasks != "" {
			return usageErrorf("--tasks: a backlog's task list cannot be trusted through LOOPD_URL yet: backlog runs start on your own daemon (unset LOOPD_URL)")
		}
		head, err := git.Cmd{Dir: ws}.Output(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
		if err != nil || head == "" {
			return usageErrorf("%s: not a git clone with a commit: through LOOPD_URL a workspace's files are read from its commits", termtext.Quote(ws))
		}
		snap, warnings, err := fleetSnapshot(ctx, ws, head, nil)
		if err != nil {
			return err
		}
		for _, w := range warnings {
			fmt.Fprintf(o.Err, "warning: %s\n", termtext.Quote(w))
		}
		req.Snapshot, req.Workspace = snap, canonicalIn(ws, ws)
		if !o.JSON {
			fmt.Fprintf(o.Err, "the files as committed at %s (HEAD), which is what a run started from here is made of\n", head[:12])
		}
	}
	rep, err := c.Trust(ctx, req)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(o.Out, rep)
	}
	printTrust(o.Out, rep)
	return nil
}

// printTrust shows what the user just trusted: per file, its state before
// and everything it makes loopd run or put in the environment. Every value
// is the repository's bytes, quoted: a command that hides behind "\x1b[2K\r"
// must be seen, not erased by the terminal.
func printTrust(w io.Writer, rep api.TrustReport) {
	if !rep.Recorded {
		defer printAgents(w, rep)
	}
	if len(rep.Files) == 0 {
		fmt.Fprintf(w, "nothing to trust in %s: no file there names commands or environment\n", termtext.Quote(rep.Workspace))
		return
	}
	if rep.Recorded {
		fmt.Fprintf(w, "trusted in %s — loopd will run what these files set:\n", termtext.Quote(rep.Workspace))
	} else {
		fmt.Fprintf(w, "would be trusted in %s — loopd would run what these files set:\n", termtext.Quote(rep.Workspace))
	}
	for _, f := range rep.Files {
		state := "new"
		switch f.Status {
		case "changed":
			state = "changed since trusted at " + f.PreviouslyTrustedAt.UTC().Format("2006-01-02 15:04:05Z")
		case "trusted":
			state = "unchanged"
		}
		fmt.Fprintf(w, "\n%s  (%s, sha256 %s)\n", termtext.Quote(relTo(rep.Workspace, f.Path)), state, f.SHA256[:12])
		for _, ch := range f.Changes {
			fmt.Fprintf(w, "  changed: %s\n", termtext.Quote(ch))
		}
		if f.Agent != "" {
			// Not loopd's: the agent CLI obeys it on its own (hooks at
			// startup, MCP servers), before the model says a word.
			fmt.Fprintf(w, "  read by the %s agent CLI, which runs what it names\n", termtext.Quote(f.Agent))
		}
		if f.Parent {
			fmt.Fprintf(w, "  read from a parent directory of the workspace: the agent CLI looks for it up to /\n")
		}
		for _, c := range f.Commands {
			fmt.Fprintf(w, "  command  %s: %s\n", termtext.Quote(c.Key), termtext.Quote(c.Command))
		}
		if len(f.Env) > 0 {
			fmt.Fprintf(w, "  environment: %s\n", termtext.Quote(strings.Join(f.Env, " ")))
		}
		// Variables that choose the program or the server: their value is
		// the danger (PATH=./bin:…), and it is no secret.
		for _, v := range f.EnvShown {
			fmt.Fprintf(w, "  environment  %s=%s\n", termtext.Quote(v.Key), termtext.Quote(v.Value))
		}
		if len(f.Settings) > 0 {
			fmt.Fprintf(w, "  settings: %s\n", termtext.Quote(strings.Join(f.Settings, " ")))
		}
		if len(f.Files) > 0 {
			fmt.Fprintf(w, "  files: %s\n", termtext.Quote(strings.Join(f.Files, " ")))
		}
		// Each setting's value: where the prompt comes from and where
		// notifications go are as much the file's doing as its commands.
		for _, v := range f.Values {
			fmt.Fprintf(w, "  setting  %s=%s\n", termtext.Quote(v.Key), termtext.Quote(v.Value))
		}
	}
}

// printAgents ends `trust --show`: the agents' command lines (the model
// a start must give shows as GIVEN-AT-START), and that nothing was
// recorded.
func printAgents(w io.Writer, rep api.TrustReport) {
	fmt.Fprintf(w, "\nagent command lines (run in the workspace with its environment):\n")
	for _, a := range rep.Agents {
		mark := ""
		if a.Default {
			mark = "  (the workspace's agent)"
		}
		fmt.Fprintf(w, "  agent=%s%s\n    %s\n", termtext.Quote(a.Agent), mark, termtext.Quote(a.Command))
	}
	if len(rep.Files) > 0 {
		fmt.Fprintf(w, "\nnothing was recorded: `loopctl trust` trusts these files\n")
	} else {
		fmt.Fprintf(w, "\nnothing was recorded\n")
	}
}

// relTo shows path relative to the workspace when it is inside it.
func relTo(ws, path string) string {
	if rel, err := filepath.Rel(ws, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// trustHint adds to a refused start how to trust the workspace: `loopctl
// trust`, with -C when the workspace is not the one of the current
// directory, and --tasks FILE when the start named a task list.
func trustHint(err error, g *globalOptions, tasks ...string) error {
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeUntrusted {
		return err
	}
	hint := "loopctl trust"
	if g.Dir != "" {
		hint += " -C " + shellWord(g.Dir)
	}
	for _, t := range tasks {
		if t != "" {
			hint += " --tasks " + shellWord(t)
		}
	}
	return &exitError{code: exitUsage, msg: ae.Error() + "\n  review what they run and trust them: " + hint + "\n  then start again"}
}

// shellWord quotes s for a shell command line when it needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./~+@%:,=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
