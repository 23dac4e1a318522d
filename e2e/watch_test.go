package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// syncBuffer is a bytes.Buffer that a running process writes while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// watch starts `loopctl watch` in the background, its stdout a pipe (not
// a terminal, so the plain mode), and returns a function that waits for
// it to exit.
func (e *env) watch(args ...string) (stdout *syncBuffer, wait func() result) {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "loopctl"), append([]string{"watch"}, args...)...)
	cmd.Dir = e.ws
	cmd.Env = e.environ()
	var errb syncBuffer
	stdout = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, &errb
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	e.t.Cleanup(func() { _ = cmd.Process.Kill() })
	return stdout, func() result {
		e.t.Helper()
		var err error
		select {
		case err = <-exited:
		case <-time.After(120 * time.Second):
			_ = cmd.Process.Kill()
			e.t.Fatalf("loopctl watch did not exit when the run ended\nstdout: %s\nstderr: %s", stdout, errb.String())
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			e.t.Fatalf("loopctl watch: %v", err)
		}
		return result{stdout.String(), errb.String(), code}
	}
}

// lineIndex is the index of the first line containing every part, or -1.
func lineIndex(lines []string, parts ...string) int {
	for i, l := range lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return i
		}
	}
	return -1
}

func TestWatchFollowsARunLiveToCompletion(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	// The first agent step waits for a file: the watcher attaches while
	// the run is live, and sees the rest happen.
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=2", "FAKE_WAIT_FILE=go", "FAKE_WAIT_ITERATION=1"), verifyDone)
	id := e.start("make the widget work")
	e.runningStep(id, 1)
	out, wait := e.watch(id[:8]) // a unique prefix names the run
	eventually(t, "watch to print the running step", 30*time.Second, func() bool {
		return strings.Contains(out.String(), "STEP_STARTED")
	})
	if strings.Contains(out.String(), "STEP_FINISHED") {
		t.Fatalf("the step finished before it was released:\n%s", out)
	}
	e.release("go")
	r := wait()
	if r.code != 0 {
		t.Fatalf("watch exit %d, want 0 (COMPLETED)\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "\x1b") {
		t.Errorf("plain output holds escape codes: %q", r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	// Every step, in order, with its outcome, then the terminal event,
	// then the one-line outcome, last.
	prev := -1
	for _, want := range [][]string{
		{"RUN_STARTED"},
		{"STEP_STARTED", "#1 implementation, iteration 1"},
		{"STEP_FINISHED", "#1 implementation SUCCEEDED"},
		{"STEP_FINISHED", "#2 verification FAILED"},
		{"STEP_STARTED", "#3 implementation, iteration 2"},
		{"STEP_FINISHED", "#4 verification SUCCEEDED"},
		{"RUN_COMPLETED", "completed:promise+verify"},
	} {
		i := lineIndex(lines, want...)
		if i <= prev {
			t.Fatalf("no line with %q after line %d:\n%s", want, prev+1, r.stdout)
		}
		prev = i
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "run "+id[:12]+" COMPLETED: completed:promise+verify") {
		t.Errorf("last line = %q, want the run's outcome", last)
	}

	// --json, on the ended run: its events as NDJSON, and the same code.
	// The postmortem is written after the run ended: wait for its event so
	// that both listings below are complete.
	eventually(t, "the postmortem", 30*time.Second, func() bool { return countType(e.events(id), "POSTMORTEM_WRITTEN") == 1 })
	jr := e.loopctl("watch", id, "--json")
	if jr.code != 0 {
		t.Fatalf("watch --json exit %d: %s", jr.code, jr.stderr)
	}
	var types []string
	for l := range strings.SplitSeq(strings.TrimSpace(jr.stdout), "\n") {
		var ev api.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("watch --json line %q: %v", l, err)
		}
		types = append(types, ev.Type)
	}
	// A followed stream ends with the run's terminal event.
	want := eventTypes(upToTerminal(e.events(id)))
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Errorf("watch --json events %v\nwant the run's events up to its end %v", types, want)
	}
}

func TestWatchExitsWithTheAbortedRunsCode(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent(), verifyDone, "max_iterations=2", "max_consecutive_verification_failures=0")
	id := e.start("never finishes")
	r := e.loopctl("watch", "last")
	if r.code != 2 {
		t.Fatalf("watch exit %d, want 2 (ABORTED)\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, want := range [][]string{
		{"STEP_FINISHED", "#2 verification FAILED"},
		{"STEP_FINISHED", "#4 verification FAILED"},
		{"CONDITION_PROGRESSED", "100%"},
		{"RUN_ABORTED", "max_iterations:2"},
	} {
		if lineIndex(lines, want...) < 0 {
			t.Errorf("no line with %q:\n%s", want, r.stdout)
		}
	}
	if lineIndex(lines, "STEP_STARTED", "#5") >= 0 {
		t.Errorf("a step after the limit:\n%s", r.stdout)
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "run "+id[:12]+" ABORTED: max_iterations:2") {
		t.Errorf("last line = %q, want the run's outcome", last)
	}
	if r := e.loopctl("watch", "nosuchrun"); r.code != 66 {
		t.Errorf("watch of an unknown run: exit %d, want 66", r.code)
	}
}

// Runs survive a daemon restart, and so does a watcher: it reconnects
// after the last event it printed, printing none twice.
func TestWatchOutlivesADaemonRestart(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1", "FAKE_WAIT_FILE=go"), "completion=promise")
	id := e.start("goal")
	e.runningStep(id, 1)
	out, wait := e.watch(id)
	eventually(t, "watch to print the running step", 30*time.Second, func() bool {
		return strings.Contains(out.String(), "STEP_STARTED")
	})
	e.stopDaemon()
	e.startDaemon()
	e.release("go")
	r := wait()
	if r.code != 0 {
		t.Fatalf("watch exit %d, want 0\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, typ := range []string{"RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "RUN_COMPLETED"} {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, "  "+typ+" ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d %s lines, want 1:\n%s", n, typ, r.stdout)
		}
	}
	if lineIndex(lines, "STEP_FINISHED", "#1 implementation SUCCEEDED") < 0 {
		t.Errorf("the adopted step's end is missing:\n%s", r.stdout)
	}
}
