// Package e2e tests loopd through its real binaries: a real daemon on a
// real SQLite file, real loopctl invocations, real child processes, and
// scripted fake agents that print real-shaped Claude Code stream-json.
// No test talks to an LLM or the network.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage/pgtest"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loopd-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	args := []string{"build", "-o", dir + "/"}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/loopd/loopd/cmd/loopd", "github.com/loopd/loopd/cmd/loopctl")
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		os.Exit(1)
	}
	binDir = dir
	// pgtest stops the PostgreSQL cluster a fleet test started, if any.
	code := pgtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's world: a LOOPD_HOME, a workspace and a daemon.
type env struct {
	t      *testing.T
	home   string
	ws     string
	daemon *exec.Cmd
	logs   []string // daemon log files, one per start
	exited chan struct{}
	logDir string // where daemon logs go; default home (a test that fills home moves them)
	// daemonEnv is added to the daemon's environment (not loopctl's).
	daemonEnv []string
	// path, when set, is the PATH of loopd and loopctl (a real agent CLI's
	// directory first); default the test's own.
	path string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	// A short home: Unix socket paths are limited to ~108 bytes.
	home, err := os.MkdirTemp("", "lh")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, home: home, ws: t.TempDir()}
	t.Cleanup(e.cleanup)
	return e
}

func (e *env) environ(extra ...string) []string {
	path := os.Getenv("PATH")
	if e.path != "" {
		path = e.path
	}
	env := []string{
		"PATH=" + path,
		"HOME=" + e.home, // no user config leaks in from the machine
		"LOOPD_HOME=" + e.home,
		"LOOPCTL_NO_AUTOSTART=1",
		// Race-built binaries otherwise sleep a second at every exit.
		"GORACE=atexit_sleep_ms=0",
	}
	return append(env, extra...)
}

// startDaemon starts loopd and waits until it answers.
func (e *env) startDaemon(args ...string) {
	e.t.Helper()
	dir := e.home
	if e.logDir != "" {
		dir = e.logDir
	}
	logPath := filepath.Join(dir, fmt.Sprintf("daemon-%d.log", len(e.logs)+1))
	logf, err := os.Create(logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "loopd"), append([]string{"--log-level", "debug", "--kill-grace", "1s"}, args...)...)
	cmd.Env = e.environ(e.daemonEnv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	logf.Close()
	e.daemon, e.exited = cmd, make(chan struct{})
	e.logs = append(e.logs, logPath)
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(cmd, e.exited)
	c := api.NewClient(filepath.Join(e.home, "loopd.sock"))
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.Ping(e.t.Context()); err == nil {
			return
		}
		select {
		case <-e.exited:
			e.t.Fatalf("loopd exited at start:\n%s", e.daemonLog())
		case <-time.After(10 * time.Millisecond):
		}
	}
	e.t.Fatalf("loopd did not answer:\n%s", e.daemonLog())
}

// killDaemon kills loopd with SIGKILL, as a crash would.
func (e *env) killDaemon() {
	e.t.Helper()
	_ = e.daemon.Process.Signal(syscall.SIGKILL)
	<-e.exited
	// A child the daemon was forking when it died holds the lock's file
	// description until it execs (close-on-exec): the next daemon can
	// start once the lock is free.
	eventually(e.t, "the killed daemon's lock to be released", 10*time.Second, func() bool {
		f, err := os.OpenFile(filepath.Join(e.home, "loopd.lock"), os.O_RDWR, 0)
		if err != nil {
			return true
		}
		defer f.Close()
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			return false
		}
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return true
	})
}

// stopDaemon sends SIGTERM and waits for a prompt exit.
func (e *env) stopDaemon() {
	e.t.Helper()
	_ = e.daemon.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(20 * time.Second):
		e.t.Fatal("loopd did not exit within 20s of SIGTERM")
	}
}

func (e *env) daemonLog() string {
	var b strings.Builder
	for _, l := range e.logs {
		data, _ := os.ReadFile(l)
		b.Write(data)
	}
	return b.String()
}

// reapDaemon kills the test's daemon unless it has exited already, and
// waits for it.
func (e *env) reapDaemon() {
	if e.daemon == nil {
		return
	}
	select {
	case <-e.exited:
	default:
		_ = e.daemon.Process.Signal(syscall.SIGKILL)
		<-e.exited
	}
}

func (e *env) cleanup() {
	e.reapDaemon()
	// Kill every process of this home, whoever started it: steps (their
	// argv names it) and daemons (autostarted ones too: their
	// environment names it).
	for _, pid := range append(processesMentioning(e.home), processesWithEnv("LOOPD_HOME="+e.home)...) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if e.t.Failed() {
		e.t.Logf("daemon log:\n%s", e.daemonLog())
	}
	os.RemoveAll(e.home)
}

// processesMentioning lists live processes whose argv contains s.
func processesMentioning(s string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		if st, err := os.ReadFile(d + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && bytes.HasPrefix(st[i+2:], []byte("Z")) {
				continue
			}
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// result of a loopctl invocation.
type result struct {
	stdout, stderr string
	code           int
}

// loopctl runs the real loopctl in the workspace.
func (e *env) loopctl(args ...string) result {
	e.t.Helper()
	return e.loopctlEnv(nil, args...)
}

func (e *env) loopctlEnv(extra []string, args ...string) result {
	e.t.Helper()
	return e.loopctlAt(e.ws, extra, args...)
}

// loopctlAt runs loopctl from dir with the environment's variables and
// extra ones.
func (e *env) loopctlAt(dir string, extra []string, args ...string) result {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "loopctl"), args...)
	cmd.Dir = dir
	cmd.Env = e.environ(extra...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("loopctl %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// must runs loopctl and fails the test unless it exits 0.
func (e *env) must(args ...string) string {
	e.t.Helper()
	r := e.loopctl(args...)
	if r.code != 0 {
		e.t.Fatalf("loopctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// start trusts the workspace's files and creates a run; it returns the
// run's id. A workspace's .loop/config, stop file and .env are trusted
// through the real `loopctl trust` (of the -C DIR among args, else the
// test's workspace), as a user would before starting: the daemon's check
// stays what it is.
func (e *env) start(args ...string) string {
	e.t.Helper()
	e.trust(args...)
	return strings.TrimSpace(e.must(append([]string{"start"}, args...)...))
}

// trust runs `loopctl trust` for the workspace a start with args uses.
func (e *env) trust(args ...string) {
	e.t.Helper()
	trust := []string{"trust"}
	for i, a := range args {
		if a == "-C" && i+1 < len(args) {
			trust = append(trust, "-C", args[i+1])
		}
	}
	e.must(trust...)
}

func (e *env) status(id string) api.Run {
	e.t.Helper()
	var r api.Run
	out := e.must("status", id, "--json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatalf("status json: %v\n%s", err, out)
	}
	return r
}

func (e *env) steps(id string) []api.Step {
	e.t.Helper()
	var s []api.Step
	out := e.must("steps", id, "--json")
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		e.t.Fatalf("steps json: %v\n%s", err, out)
	}
	return s
}

func (e *env) events(id string) []api.Event {
	e.t.Helper()
	return parseEvents(e.t, e.must("events", id, "--json"))
}

// parseEvents reads the output of `loopctl events --json`: an event a line.
func parseEvents(t *testing.T, out string) []api.Event {
	t.Helper()
	var evs []api.Event
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event json: %v\n%s", err, line)
		}
		evs = append(evs, ev)
	}
	return evs
}

// wait waits for a run to end and returns loopctl wait's exit code.
func (e *env) wait(id string) int {
	e.t.Helper()
	r := e.loopctl("wait", id, "--timeout", "120s")
	if r.code == 124 || r.code >= 64 {
		e.t.Fatalf("wait %s: exit %d: %s%s", id, r.code, r.stdout, r.stderr)
	}
	return r.code
}

// writeFile writes a workspace file.
func (e *env) writeFile(name, content string, mode os.FileMode) {
	e.t.Helper()
	p := filepath.Join(e.ws, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		e.t.Fatal(err)
	}
}

// config writes .loop/config.
func (e *env) config(lines ...string) {
	e.t.Helper()
	e.writeFile(".loop/config", strings.Join(lines, "\n")+"\n", 0o644)
}

// repoRoot is the top folder of the source tree the tests were built from,
// whatever the working directory.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// scriptedAgent is the path of the scripted Claude stand-in.
func scriptedAgent() string {
	return filepath.Join(repoRoot(), "e2e", "testdata", "agents", "claude.sh")
}

// fakeAgent installs the scripted Claude agent; vars go into .env.
func (e *env) fakeAgent(vars ...string) string {
	e.t.Helper()
	e.writeFile(".env", strings.Join(vars, "\n")+"\n", 0o600)
	return "agent_command=" + scriptedAgent()
}

// invocations reads the fake agent's invocation log: one line per run of
// the agent.
func (e *env) invocations() []string {
	b, _ := os.ReadFile(filepath.Join(e.ws, ".agent-invocations"))
	var out []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

func eventTypes(evs []api.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func countType(evs []api.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func processesInGroup(pgid int) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
