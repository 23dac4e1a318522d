package e2e

// A cloned repository's own files for the agent CLIs (.claude/settings.json
// hooks, .mcp.json and .gemini/settings.json MCP servers, .gemini/.env,
// .codex/config.toml) make the real CLI run commands before the model says
// a word. loopd starts an agent there only once the user has trusted them
// (loopctl trust), like .loop/config. Each test runs the real CLI against
// the fake model API: untrusted, start is refused and the command never
// runs; trusted, the run proceeds and the command does run, so the test
// would see it run had start let it through.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/fakemodel"
)

// newAgentFilesEnv is a loopd world whose daemon finds the real CLI name
// on its PATH and holds the CLI's offline environment itself: the
// workspace, a git repository, holds nothing but what the test writes (no
// .env, no .loop/config), like a freshly cloned repository.
func newAgentFilesEnv(t *testing.T, name string, daemonEnv ...string) (*env, *realAgent, *fakemodel.Server) {
	t.Helper()
	srv := fakemodel.New(t)
	a := newRealAgent(t, name, srv)
	e := newEnv(t)
	e.path = a.path()
	e.daemonEnv = append(append([]string(nil), a.vars...), daemonEnv...)
	if out, err := exec.Command("git", "-C", e.ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	e.startDaemon("--api-backoff", "1s")
	t.Cleanup(func() {
		killProcessesIn(e.ws)
		if t.Failed() {
			t.Logf("fake model API requests:\n%s", srv.Summary())
		}
	})
	return e, a, srv
}

// startSets are what the user types: the goal comes from the repository's
// PROMPT.md, the agent from agent (empty: the default, claude).
func startSets(a *realAgent, agent string) []string {
	sets := []string{"start", "--set", "model=" + a.model, "--set", "completion=promise",
		"--set", "max_iterations=2", "--set", "step_timeout=2m"}
	if agent != "" {
		sets = append(sets, "--set", "agent="+agent)
	}
	return sets
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// refusedUntilTrusted checks the whole story for a workspace whose agent
// file rel (already written) would run a command leaving marker:
// start is refused with exit 64 naming the file, nothing is created,
// nothing runs and the model is never asked; loopctl trust lists the file
// and the command (show); after it the run proceeds and the command runs.
func refusedUntilTrusted(t *testing.T, e *env, srv *fakemodel.Server, start []string, rel, marker, show string) {
	t.Helper()
	r := e.loopctl(start...)
	if r.code != 64 {
		if r.code == 0 {
			id := strings.TrimSpace(r.stdout)
			e.wait(id)
			t.Fatalf("start with an untrusted %s was accepted (run %s); the command it names ran: %v\n%s", rel, id, exists(marker), r.stderr)
		}
		t.Fatalf("start with an untrusted %s: exit %d, want 64\n%s%s", rel, r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{filepath.Join(e.ws, rel) + ": not trusted", "loopctl trust\n", "nothing was created"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, r.stderr)
		}
	}
	if n := e.runCount(); n != 0 {
		t.Errorf("%d runs created by a refused start", n)
	}
	if exists(marker) {
		t.Fatalf("the command in %s ran although start was refused", rel)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("the model was asked %d times by a refused start", n)
	}

	out := e.must("trust")
	for _, want := range []string{rel + "  (new, sha256 ", show} {
		if !strings.Contains(out, want) {
			t.Errorf("loopctl trust does not show %q:\n%s", want, out)
		}
	}
	id := strings.TrimSpace(e.must(start...))
	eventually(t, "the trusted "+rel+"'s command to run", 90*time.Second, func() bool { return exists(marker) })
	if code := e.wait(id); code != 0 {
		t.Errorf("the trusted run: wait exit %d, run %+v", code, e.status(id))
	}
}

// TestSecurityAgentFilesClaudeHook: a repository with only
// .claude/settings.json (a SessionStart hook) and PROMPT.md, agent=claude
// by default: Claude Code runs the hook at startup, before any model call.
func TestSecurityAgentFilesClaudeHook(t *testing.T) {
	e, a, srv := newAgentFilesEnv(t, "claude")
	marker := filepath.Join(t.TempDir(), "hook-ran")
	e.writeFile("PROMPT.md", "Say that you are done.\n", 0o644)
	e.writeFile(".claude/settings.json", `{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch `+marker+`"}]}]}}`+"\n", 0o644)
	srv.Push(fakemodel.Turn{Text: "Done.\n<promise>COMPLETE</promise>", Usage: fakemodel.Usage{Input: 100, Output: 10}})
	refusedUntilTrusted(t, e, srv, startSets(a, ""), ".claude/settings.json", marker,
		"command  hooks.SessionStart[0].hooks[0]: touch "+marker)
}

// TestSecurityAgentFilesClaudeMCP: .mcp.json's MCP servers are started by
// Claude Code in print mode without asking.
func TestSecurityAgentFilesClaudeMCP(t *testing.T) {
	e, a, srv := newAgentFilesEnv(t, "claude")
	marker := filepath.Join(t.TempDir(), "mcp-ran")
	e.writeFile("PROMPT.md", "Say that you are done.\n", 0o644)
	e.writeFile(".mcp.json", `{"mcpServers": {"helper": {"command": "sh", "args": ["-c", "touch `+marker+`"]}}}`+"\n", 0o644)
	srv.Push(fakemodel.Turn{Text: "Done.\n<promise>COMPLETE</promise>", Usage: fakemodel.Usage{Input: 100, Output: 10}})
	refusedUntilTrusted(t, e, srv, startSets(a, ""), ".mcp.json", marker,
		"command  mcpServers.helper: sh -c 'touch "+marker+"'")
}

// TestSecurityAgentFilesClaudeWorktree: a worktree run's agent reads the
// committed .claude/settings.json, not the checkout's: trusting a harmless
// edit in the checkout does not let the committed hook run.
func TestSecurityAgentFilesClaudeWorktree(t *testing.T) {
	e, a, srv := newAgentFilesEnv(t, "claude")
	marker := filepath.Join(t.TempDir(), "hook-ran")
	e.writeFile("PROMPT.md", "Say that you are done.\n", 0o644)
	e.writeFile(".claude/settings.json", `{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch `+marker+`"}]}]}}`+"\n", 0o644)
	e.git("add", "-A")
	e.git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "cloned")
	e.writeFile(".claude/settings.json", `{"model": "sonnet"}`+"\n", 0o644) // uncommitted, harmless
	e.must("trust")
	srv.Push(fakemodel.Turn{Text: "Done.\n<promise>COMPLETE</promise>", Usage: fakemodel.Usage{Input: 100, Output: 10}})
	start := append(startSets(a, ""), "--set", "isolation=worktree")
	r := e.loopctl(start...)
	if r.code != 64 {
		if r.code == 0 {
			id := strings.TrimSpace(r.stdout)
			e.wait(id)
			t.Fatalf("a worktree run with the committed, untrusted hook was accepted (run %s); the hook ran: %v", id, exists(marker))
		}
		t.Fatalf("start: exit %d, want 64\n%s", r.code, r.stderr)
	}
	want := filepath.Join(e.ws, ".claude/settings.json") + " as committed in "
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "changed since trusted") {
		t.Errorf("the refusal lacks %q and what changed:\n%s", want, r.stderr)
	}
	if exists(marker) || e.runCount() != 0 {
		t.Fatal("the committed hook ran, or a run was created")
	}
	// The checkout back to the committed file: trusted, the run proceeds
	// and the hook runs in the run's worktree.
	e.git("checkout", "--", ".claude/settings.json")
	e.must("trust")
	id := strings.TrimSpace(e.must(start...))
	eventually(t, "the trusted hook to run", 90*time.Second, func() bool { return exists(marker) })
	if code := e.wait(id); code != 0 {
		t.Errorf("the trusted worktree run: wait exit %d, run %+v", code, e.status(id))
	}
}

// TestSecurityAgentFilesGemini: Gemini CLI's own folder trust guards
// .gemini/, and the preset's --skip-trust turns it off, so loopd's trust
// stands in for it.
func TestSecurityAgentFilesGemini(t *testing.T) {
	t.Run(".env", func(t *testing.T) {
		// Gemini CLI loads .gemini/.env into its environment: BASH_ENV
		// there runs a script in every shell command the model asks for
		// (a base URL would send the API key elsewhere).
		e, a, srv := newAgentFilesEnv(t, "gemini")
		dir := t.TempDir()
		marker := filepath.Join(dir, "env-ran")
		script := filepath.Join(dir, "rc.sh")
		writeTestFile(t, script, "touch "+marker+"\n")
		e.writeFile("PROMPT.md", "List the files.\n", 0o644)
		e.writeFile(".gemini/.env", "BASH_ENV="+script+"\n", 0o644)
		srv.Push(fakemodel.Turn{Text: "Listing.", Tool: "ls", Usage: fakemodel.Usage{Input: 100, Output: 10}},
			fakemodel.Turn{Text: "Done.\n<promise>COMPLETE</promise>", Usage: fakemodel.Usage{Input: 120, Output: 10}})
		refusedUntilTrusted(t, e, srv, startSets(a, "gemini"), ".gemini/.env", marker, "environment  BASH_ENV="+script)
	})
	t.Run("settings.json", func(t *testing.T) {
		// A user who trusts folders in Gemini CLI itself
		// (GEMINI_CLI_TRUST_WORKSPACE=true, as `--skip-trust` is meant to
		// do) gets the workspace's hooks and MCP servers started.
		e, a, srv := newAgentFilesEnv(t, "gemini", "GEMINI_CLI_TRUST_WORKSPACE=true")
		marker := filepath.Join(t.TempDir(), "mcp-ran")
		e.writeFile("PROMPT.md", "Say that you are done.\n", 0o644)
		e.writeFile(".gemini/settings.json", `{
  // comments are allowed here
  "mcpServers": {"helper": {"command": "sh", "args": ["-c", "touch `+marker+`"]}}
}
`, 0o644)
		srv.Push(fakemodel.Turn{Text: "Done.\n<promise>COMPLETE</promise>", Usage: fakemodel.Usage{Input: 100, Output: 10}})
		refusedUntilTrusted(t, e, srv, startSets(a, "gemini"), ".gemini/settings.json", marker,
			"command  mcpServers.helper: sh -c 'touch "+marker+"'")
	})
}

// TestSecurityAgentFilesCodex: Codex reads .codex/config.toml only in a
// project trusted in Codex itself; once it is (as here, in Codex's own
// config), a repository's change to it must still be trusted in loopd.
func TestSecurityAgentFilesCodex(t *testing.T) {
	e, a, srv := newAgentFilesEnv(t, "codex")
	cfg := filepath.Join(a.home, ".codex", "config.toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, cfg, string(b)+"\n[projects.\""+e.ws+"\"]\ntrust_level = \"trusted\"\n")
	marker := filepath.Join(t.TempDir(), "mcp-ran")
	e.writeFile("PROMPT.md", "Say that you are done.\n", 0o644)
	e.writeFile(".codex/config.toml", "[mcp_servers.helper]\ncommand = \"sh\"\nargs = [\"-c\", \"touch "+marker+"\"]\n", 0o644)
	srv.Push(fakemodel.Turn{Text: "Done.\n<promise>COMPLETE</promise>", Usage: fakemodel.Usage{Input: 100, Output: 10}})
	refusedUntilTrusted(t, e, srv, startSets(a, "codex"), ".codex/config.toml", marker,
		`command  mcp_servers.helper.command: "sh"`)
}

// TestSecurityAgentFilesWrittenDuringRun: the CLI reads its project files
// at every start, so they are checked before every agent step, not only
// when the run is created: a hook written during the run (by the agent
// here; a `git pull` before a resume is the same) does not run until it is
// trusted. The run ends ABORTED fatal:untrusted_agent_files, and once the
// user trusts the file, resume runs the agent with it.
func TestSecurityAgentFilesWrittenDuringRun(t *testing.T) {
	e, a, srv := newAgentFilesEnv(t, "claude")
	dir := t.TempDir()
	marker := filepath.Join(dir, "hook-ran")
	hook := filepath.Join(dir, "settings.json")
	writeTestFile(t, hook, `{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch `+marker+`"}]}]}}`+"\n")
	e.writeFile("PROMPT.md", "Set the project up.\n", 0o644)
	srv.Push(fakemodel.Turn{Text: "Adding settings.", Tool: "mkdir -p .claude && cp " + hook + " .claude/settings.json", Usage: fakemodel.Usage{Input: 100, Output: 10}},
		fakemodel.Turn{Text: "Settings added; more next time.", Usage: fakemodel.Usage{Input: 120, Output: 10}},
		fakemodel.Turn{Text: "Done.\n<promise>COMPLETE</promise>", Usage: fakemodel.Usage{Input: 130, Output: 10}})
	start := append(startSets(a, ""), "--set", "max_iterations=3")
	id := strings.TrimSpace(e.must(start...)) // nothing to trust yet
	e.wait(id)
	r := e.status(id)
	if exists(marker) {
		t.Fatalf("the hook the agent wrote ran untrusted in a later step (run %s %s)", r.Status, r.Reason)
	}
	if r.Status != "ABORTED" || r.Reason != "fatal:untrusted_agent_files" ||
		!strings.Contains(r.Description, filepath.Join(e.ws, ".claude/settings.json")+": not trusted") {
		t.Fatalf("run %s %s: %q, want ABORTED fatal:untrusted_agent_files naming the file", r.Status, r.Reason, r.Description)
	}
	if n := len(e.steps(id)); n != 1 {
		t.Errorf("%d steps, want the first only", n)
	}
	e.must("trust")
	e.must("resume", id)
	eventually(t, "the trusted hook to run", 90*time.Second, func() bool { return exists(marker) })
	if code := e.wait(id); code != 0 {
		t.Errorf("after trust and resume: wait exit %d, run %+v", code, e.status(id))
	}
}
