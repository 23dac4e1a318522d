package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// bgLoopctl runs a long-lived loopctl command and collects its output.
type bgLoopctl struct {
	cmd    *exec.Cmd
	out    syncBuffer // written by exec's copier while the test reads it
	stderr bytes.Buffer
	err    error // from Wait (the exit, or a failed read of the output), once done is closed
	done   chan struct{}
}

func (e *env) background(args ...string) *bgLoopctl {
	e.t.Helper()
	f := &bgLoopctl{cmd: exec.Command(filepath.Join(binDir, "loopctl"), args...), done: make(chan struct{})}
	f.cmd.Dir, f.cmd.Env, f.cmd.Stdout, f.cmd.Stderr = e.ws, e.environ(), &f.out, &f.stderr
	if err := f.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		defer close(f.done)
		f.err = f.cmd.Wait() // returns once the output is read to its end
	}()
	e.t.Cleanup(func() { _ = f.cmd.Process.Kill(); <-f.done })
	return f
}

func (f *bgLoopctl) String() string { return f.out.String() }

// logs --follow goes on through a pause: it ends when the run ends, so the
// steps after resume are in its output.
func TestLogsFollowOutlivesAPause(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=1", "FAKE_DONE_AT=2"),
		"verify_command=test -f done.txt")
	id := e.start("goal")
	e.runningStep(id, 1)
	e.must("pause", id)
	e.release("go-1")
	eventually(t, "PAUSED after the first step", 30*time.Second, func() bool {
		r := e.status(id)
		return r.Status == api.RunPaused && r.CurrentStep == nil
	})
	// The follower reads the paused run's only step to its end, finds no
	// next step, and must wait for one rather than end.
	f := e.background("logs", id, "--follow")
	eventually(t, "the first step's output", 10*time.Second, func() bool {
		return strings.Contains(f.String(), "Iteration 1: I changed the code.")
	})
	e.must("resume", id)
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d, want 0 (COMPLETED)", code)
	}
	select {
	case <-f.done:
	case <-time.After(30 * time.Second):
		t.Fatal("logs --follow did not end with the run")
	}
	out := f.String()
	for _, want := range []string{"==> #1 implementation (iteration 1) <==", "==> #3 implementation (iteration 2) <==", "==> #4 verification (iteration 2) <=="} {
		if !strings.Contains(out, want) {
			t.Errorf("followed logs lack %q (did the follower end at the pause?):\n%s", want, out)
		}
	}
}

// Shell completion offers the daemon's run ids for RUN arguments and the
// config keys for --set; `loopctl man DIR` writes a page per command.
func TestCompletionAndManPages(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"), verifyDone)
	id := e.start("goal", "--name", "completed-one")
	e.wait(id)
	out := e.must("__complete", "status", "")
	if !strings.Contains(out, id+"\tCOMPLETED completed-one") || !strings.Contains(out, "last\t") {
		t.Errorf("completing a RUN offered:\n%s", out)
	}
	if out := e.must("__complete", "logs", id[:3]); !strings.Contains(out, id) {
		t.Errorf("completing a RUN prefix offered:\n%s", out)
	}
	out = e.must("__complete", "resume", id, "--set", "max_co")
	for _, want := range []string{"max_cost=", "max_consecutive_verification_failures="} {
		if !strings.Contains(out, want) {
			t.Errorf("completing --set offered no %s:\n%s", want, out)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out := e.must("completion", shell); !strings.Contains(out, "loopctl") || len(out) < 1000 {
			t.Errorf("completion %s printed %d bytes", shell, len(out))
		}
	}
	dir := t.TempDir()
	e.must("man", dir)
	for _, page := range []string{"loopctl.1", "loopctl-start.1", "loopctl-daemon-install.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil || !strings.Contains(string(b), ".TH \"LOOPCTL\" \"1\"") {
			t.Errorf("man page %s: %v\n%.200s", page, err, b)
		}
	}
}

// logs --follow rides out a daemon restart: it resumes exactly where it
// was, so what it printed is the run's whole output, once. (With --json,
// whose chunks cannot be resumed, it says the daemon stopped and exits 69.)
func TestLogsFollowRidesOutADaemonRestart(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=1", "FAKE_DONE_AT=2"), verifyDone)
	id := e.start("goal")
	e.runningStep(id, 1)
	text := e.background("logs", id, "--follow")
	js := e.background("logs", id, "--follow", "--json")
	eventually(t, "the followers to stream the running step", 20*time.Second, func() bool {
		return strings.Contains(text.String(), "working on iteration 1") && strings.Contains(js.String(), "working on iteration 1")
	})
	e.stopDaemon()
	select {
	case <-js.done:
		ee, ok := js.err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 69 || !strings.Contains(js.stderr.String(), "the daemon stopped while following") {
			t.Errorf("logs --follow --json after the daemon stopped: %v\nstderr: %s", js.err, js.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Error("logs --follow --json did not end when the daemon stopped")
	}
	e.startDaemon()
	e.release("go-1")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	select {
	case <-text.done:
	case <-time.After(60 * time.Second):
		t.Fatal("logs --follow did not end with the run")
	}
	if text.err != nil {
		t.Fatalf("logs --follow: %v\nstderr: %s", text.err, text.stderr.String())
	}
	if whole := e.must("logs", id); text.String() != whole {
		t.Errorf("followed across the restart:\n%s\nwant the run's output, once:\n%s", text.String(), whole)
	}
	if !strings.Contains(text.String(), "==> #4 verification (iteration 2) <==") {
		t.Errorf("the follower missed the steps after the restart:\n%s", text.String())
	}
}
