package e2e

// Helpers for tests that run the real agent CLIs (Claude Code, Codex, Gemini
// CLI) at their pinned versions against the scripted fake model API of
// internal/fakemodel. scripts/install-agents installs the CLIs into
// $LOOPD_AGENTS_DIR (default ~/.cache/loopd/agents); scripts/test runs it
// first. A test that needs a CLI which is not installed fails when CI is set
// and is skipped otherwise, naming the script.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/fakemodel"
)

// realCLIs maps a preset to the binary scripts/install-agents installs,
// relative to the agents directory.
var realCLIs = map[string]string{
	"claude": "claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
	"codex":  "codex/node_modules/.bin/codex",
	"gemini": "gemini/node_modules/.bin/gemini",
}

// agentsDir is where scripts/install-agents put the CLIs.
func agentsDir() string {
	if d := os.Getenv("LOOPD_AGENTS_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "loopd", "agents")
}

// requireCLI returns the path of the installed CLI, or skips the test (fails
// it under CI) when it is not installed.
func requireCLI(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(agentsDir(), realCLIs[name])
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
		return p
	}
	msg := fmt.Sprintf("the real %s CLI is not installed in %s: run scripts/install-agents", name, agentsDir())
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// realAgent is one real CLI set up to talk to a fake model API offline.
type realAgent struct {
	name  string
	srv   *fakemodel.Server
	bin   string   // directory holding the CLI under its preset's name
	home  string   // the CLI's private HOME
	vars  []string // environment the CLI needs (KEY=VALUE)
	model string
}

// newRealAgent installs the CLI's name into a private bin directory and
// writes its private HOME and configuration, pointing it at srv. Retries
// inside the CLIs are kept small so API trouble surfaces in seconds.
func newRealAgent(t testing.TB, name string, srv *fakemodel.Server) *realAgent {
	t.Helper()
	cli := requireCLI(t, name)
	root := t.TempDir()
	a := &realAgent{name: name, srv: srv, bin: filepath.Join(root, "bin"), home: filepath.Join(root, "home")}
	for _, d := range []string{a.bin, a.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(cli, filepath.Join(a.bin, name)); err != nil {
		t.Fatal(err)
	}
	a.vars = []string{"HOME=" + a.home, "NO_COLOR=1"}
	switch name {
	case "claude":
		a.model = "claude-sonnet-4-5"
		a.vars = append(a.vars,
			"ANTHROPIC_BASE_URL="+srv.URL(),
			"ANTHROPIC_API_KEY=sk-ant-fake-key",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_AUTOUPDATER=1",
			"DISABLE_TELEMETRY=1",
			"DISABLE_ERROR_REPORTING=1",
			"CLAUDE_CODE_MAX_RETRIES=0",
			"IS_SANDBOX=1", // the tests run as root in containers
		)
	case "codex":
		a.model = "gpt-5.1-codex"
		codexHome := filepath.Join(a.home, ".codex")
		writeTestFile(t, filepath.Join(codexHome, "config.toml"), fmt.Sprintf(`model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "%s/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 60000
`, srv.URL()))
		a.vars = append(a.vars, "CODEX_HOME="+codexHome, "OPENAI_API_KEY=sk-fake-key")
	case "gemini":
		a.model = "gemini-2.5-flash"
		writeTestFile(t, filepath.Join(a.home, ".gemini", "settings.json"), `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false, "maxAttempts": 1},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false}
}
`)
		a.vars = append(a.vars, "GEMINI_API_KEY=fake-gemini-key", "GOOGLE_GEMINI_BASE_URL="+srv.URL())
	default:
		t.Fatalf("no real CLI named %q", name)
	}
	return a
}

// subscription switches Claude Code from an API key to a subscription
// login (CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_API_KEY empty): only then does it
// read the unified rate-limit headers of a usage limit.
func (a *realAgent) subscription() {
	for i, v := range a.vars {
		if strings.HasPrefix(v, "ANTHROPIC_API_KEY=") {
			a.vars[i] = "ANTHROPIC_API_KEY="
		}
	}
	a.vars = append(a.vars, "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-fake-token")
}

// path is a PATH with the CLI first.
func (a *realAgent) path() string { return a.bin + ":" + os.Getenv("PATH") }

// environ is the CLI's whole environment for running it directly.
func (a *realAgent) environ() []string {
	return append([]string{"PATH=" + a.path()}, a.vars...)
}

// presetArgs is the preset's command line for running the CLI directly,
// as loopd's preset would (config.Config.AgentCommandLine).
func (a *realAgent) run(t testing.TB, dir, prompt string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(a.bin, a.name), args...)
	cmd.Dir = dir
	cmd.Env = a.environ()
	cmd.Stdin = strings.NewReader(prompt)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s: %v", a.name, err)
	}
	return out.String(), errb.String(), code
}

// runKilled runs the CLI in its own process group and kills the group with
// SIGKILL once marker exists: a step stopped mid-turn.
func (a *realAgent) runKilled(t testing.TB, dir, prompt, marker string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(a.bin, a.name), args...)
	cmd.Dir = dir
	cmd.Env = a.environ()
	cmd.Stdin = strings.NewReader(prompt)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	eventually(t.(*testing.T), "the tool call to start", 60*time.Second, func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	// The tool's own session may have escaped the group.
	killProcessesIn(dir)
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// killProcessesIn kills every process whose working directory is dir: what
// an agent's tool calls left running there, in whatever session.
func killProcessesIn(dir string) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if cwd, err := os.Readlink(d + "/cwd"); err == nil && cwd == dir {
			if pid, err := strconv.Atoi(filepath.Base(d)); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func writeTestFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
