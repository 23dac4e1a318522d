package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// blockRunDirs replaces LOOPD_HOME/runs with a file, so that no run
// directory can be created: an error that never goes away.
func (e *env) blockRunDirs() {
	e.t.Helper()
	runs := filepath.Join(e.home, "runs")
	if err := os.RemoveAll(runs); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(runs, []byte("not a directory\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// A runner error that never goes away ends the run ABORTED fatal:internal
// with the error in its description, instead of RUNNING and retrying
// forever.
func TestPersistentRunnerErrorAborts(t *testing.T) {
	e := newEnv(t)
	e.startDaemon("--retry-backoff", "50ms")
	e.blockRunDirs()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"))
	id := e.start("goal")
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d, want 2 (ABORTED)", code)
	}
	st := e.status(id)
	if st.Status != api.RunAborted || st.Reason != "fatal:internal" {
		t.Errorf("status %s reason %q, want ABORTED fatal:internal", st.Status, st.Reason)
	}
	if !strings.Contains(st.Description, "not a directory") || !strings.Contains(st.Description, "5 times in a row") {
		t.Errorf("description does not carry the error: %q", st.Description)
	}
	if n := len(e.invocations()); n != 0 {
		t.Errorf("the agent ran %d times", n)
	}
	if n := countType(e.events(id), "RUN_ABORTED"); n != 1 {
		t.Errorf("%d RUN_ABORTED events", n)
	}
}

// stop --now and pause apply to a run whose runner keeps failing, even
// while it waits to retry (here for an hour).
func TestRequestsApplyToFailingRun(t *testing.T) {
	e := newEnv(t)
	e.startDaemon("--retry-backoff", "1h")
	e.blockRunDirs()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"))

	id := e.start("goal")
	failed := func() bool { return strings.Count(e.daemonLog(), "run loop failed") >= 1 }
	eventually(t, "the runner's first failure in the daemon log", 20*time.Second, failed)
	e.must("pause", id)
	eventually(t, "the run PAUSED", 20*time.Second, func() bool { return e.status(id).Status == api.RunPaused })

	e.must("resume", id)
	eventually(t, "the runner's second failure", 20*time.Second, func() bool {
		return strings.Count(e.daemonLog(), "run loop failed") >= 2
	})
	e.must("stop", id)
	if code := e.wait(id); code != 3 {
		t.Fatalf("wait exit %d, want 3 (INTERRUPTED)", code)
	}
	st := e.status(id)
	if st.Reason != "user_stop" || !strings.Contains(st.Description, "not a directory") {
		t.Errorf("reason %q description %q", st.Reason, st.Description)
	}

	next := e.start("goal")
	eventually(t, "the second run's runner to fail", 20*time.Second, func() bool {
		return strings.Count(e.daemonLog(), "run loop failed") >= 3
	})
	e.must("stop", next, "--now")
	if code := e.wait(next); code != 3 {
		t.Fatalf("stop --now: wait exit %d, want 3 (INTERRUPTED)", code)
	}
}

// loopctl against a daemon frozen by SIGSTOP: an ordinary call exits 69
// with a message that says the daemon did not answer, instead of hanging
// forever, and starts no second daemon.
func TestFrozenDaemonStatusTimesOut(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"))
	id := e.start("goal")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	if err := e.daemon.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer e.daemon.Process.Signal(syscall.SIGCONT)
	// Autostart allowed: it must not try to start another daemon.
	r := e.loopctlEnv([]string{"LOOPCTL_NO_AUTOSTART=0"}, "status", id)
	if r.code != 69 || !strings.Contains(r.stderr, "did not answer within") {
		t.Errorf("status against a stopped daemon: exit %d\n%s", r.code, r.stderr)
	}
	// Count daemons only: a step's wrapper shell has LOOPD_HOME too (an
	// abandoned gated step may still be exiting).
	var daemons []int
	for _, pid := range processesWithEnv("LOOPD_HOME=" + e.home) {
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil && filepath.Base(exe) == "loopd" {
			daemons = append(daemons, pid)
		}
	}
	if len(daemons) != 1 {
		t.Errorf("%d daemons for this home, want 1: %s", len(daemons), describePids(daemons))
	}
	_ = e.daemon.Process.Signal(syscall.SIGCONT)
	if st := e.status(id); st.Status != api.RunCompleted {
		t.Errorf("after SIGCONT: %s", st.Status)
	}
}

// Bad input that used to get through is refused at start with exit 64,
// naming the problem, and creates nothing: a NUL byte in a config value
// (it failed every step with "invalid argument"), a prompt file larger
// than the request limit (it was copied into every report). A relative
// --prompt-file is found against -C DIR.
func TestBadInputRefusedAtStart(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()

	e.writeFile(".loop/config", "agent=command\nagent_command=my-agent\x00 --fast\n", 0o644)
	r := e.loopctl("start", "goal")
	if r.code != 64 || !strings.Contains(r.stderr, ".loop/config:2: agent_command: value contains a NUL byte") {
		t.Errorf("NUL in a config value: exit %d\n%s", r.code, r.stderr)
	}

	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"))
	e.writeFile("BIG.md", strings.Repeat("x", 1<<20+1), 0o644)
	r = e.loopctl("start", "--prompt-file", "BIG.md")
	if r.code != 64 || !strings.Contains(r.stderr, "larger than 1024 KiB") {
		t.Errorf("oversize prompt file: exit %d\n%s", r.code, r.stderr)
	}
	if out := e.must("list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("bad input created runs: %s", out)
	}

	other := t.TempDir()
	if err := os.MkdirAll(filepath.Join(other, ".loop"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, ".loop", "config"), []byte("agent=command\nagent_command=true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "GOAL.md"), []byte("the goal in -C\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := e.start("-C", other, "--prompt-file", "GOAL.md")
	if st := e.status(id); st.Goal != "the goal in -C" {
		t.Errorf("goal %q: the relative --prompt-file was not found against -C", st.Goal)
	}
}

// A daemon frozen (SIGSTOP) past a step's limits, while the step ends by
// itself: the step's own record decides. It SUCCEEDED, it ended when it
// recorded its exit (before the daemon woke), and the freeze does not
// count toward max_duration: the run goes on to complete in iteration 2.
func TestFrozenDaemonKeepsTheStepsOwnEnd(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=1", "FAKE_DONE_AT=2"), "max_duration=4s", "idle_timeout=3s")
	id := e.start("goal")
	step := e.runningStep(id, 1)

	if err := e.daemon.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	e.release("go-1")
	exits := filepath.Join(e.home, "runs", id, "exits")
	eventually(t, "the step to record its exit", 20*time.Second, func() bool {
		b, _ := os.ReadFile(exits)
		return strings.Contains(string(b), ":1 exit 0")
	})
	// Keep the daemon frozen until the run's max_duration and the step's
	// idle_timeout have both passed on the wall clock.
	started := step.StartedAt.Time
	eventually(t, "max_duration to pass on the wall clock", 20*time.Second, func() bool {
		return time.Since(started) > 5*time.Second
	})
	woke := time.Now()
	if err := e.daemon.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d, want 0: %+v", code, e.status(id))
	}
	got := e.steps(id)[0]
	if got.Status != api.StepSucceeded {
		t.Errorf("step %s (%s), want SUCCEEDED", got.Status, got.Error)
	}
	if got.EndedAt.IsZero() || !got.EndedAt.Before(woke) {
		t.Errorf("step ended at %v, after the daemon woke at %v: the freeze was counted", got.EndedAt, woke)
	}
}
