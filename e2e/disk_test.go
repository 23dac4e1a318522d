package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"database/sql"

	_ "modernc.org/sqlite"

	"github.com/loopd/loopd/internal/api"
)

// mountHome puts LOOPD_HOME on its own tmpfs (root only) so a test can
// fill it or make it read-only. Its cleanup stops everything first.
func (e *env) mountHome(opts string) {
	e.t.Helper()
	if os.Getuid() != 0 {
		e.t.Skip("needs root to mount a small file system for LOOPD_HOME")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", e.home).CombinedOutput(); err != nil {
		e.t.Skipf("cannot mount tmpfs: %v %s", err, out)
	}
	e.t.Cleanup(func() {
		e.reapDaemon()
		for _, pid := range processesMentioning(e.home) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
		if out, err := exec.Command("umount", e.home).CombinedOutput(); err != nil {
			_ = exec.Command("umount", "-l", e.home).Run()
			e.t.Logf("umount: %v %s", err, out)
		}
	})
}

func integrity(t *testing.T, dbPath string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// A full disk stops loopd from recording anything, with a clear error,
// loses nothing committed, and keeps the outcome of the step it holds:
// when space is freed the run goes on by itself, without re-running the
// agent.
func TestDiskFull(t *testing.T) {
	e := newEnv(t)
	e.mountHome("size=24m,mode=0700")
	e.logDir = t.TempDir() // the daemon's log must not be on the full disk: it is the marker
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=2", "FAKE_DONE_AT=3"), verifyDone)
	id := e.start("goal")
	e.runningStep(id, 3)
	before := e.counters(id)

	filler := filepath.Join(e.home, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	f.Close()

	// New work is refused with a message that says what is wrong (in
	// another workspace: this one has its active in-place run; with an
	// agent that is on the PATH, so that start's agent check passes and the
	// disk is what refuses it).
	r := e.loopctl("start", "another goal", "-C", t.TempDir(), "--set", "agent=command", "--set", "agent_command=true")
	if r.code != 69 || !strings.Contains(r.stderr, "out of disk space") {
		t.Errorf("start on a full disk: exit %d, %s", r.code, r.stderr)
	}
	// Reads still work, and what was committed is there.
	if got := e.counters(id); got != before {
		t.Errorf("counters changed while the disk was full:\n%+v\n%+v", before, got)
	}
	// The parked agent finishes while nothing can be recorded.
	e.release("go-2")
	eventually(t, "the daemon to fail to record the step's end, saying the disk is full", 30*time.Second, func() bool {
		log := e.daemonLog()
		return strings.Contains(log, "cannot record to the database") && strings.Contains(log, "out of disk space")
	})
	if st := e.status(id); st.Status != api.RunRunning {
		t.Errorf("run %s while the disk is full", st.Status)
	}

	os.Remove(filler)
	if code := e.wait(id); code != 0 {
		t.Fatalf("after freeing space: wait exit %d", code)
	}
	steps := e.steps(id)
	for _, s := range steps {
		if s.Status == api.StepInterrupted {
			t.Errorf("step %d INTERRUPTED: the daemon knew its outcome and must have kept it", s.Seq)
		}
	}
	if n := len(e.invocations()); n != 3 {
		t.Errorf("the agent ran %d times, want 3 (no re-run after the disk filled)", n)
	}
	if res := integrity(t, filepath.Join(e.home, "loopd.db")); res != "ok" {
		t.Errorf("integrity_check: %s", res)
	}
}

// A LOOPD_HOME that became read-only: the daemon refuses to start with a
// message that names the problem, and the history is intact once it is
// writable again.
func TestReadOnlyHome(t *testing.T) {
	e := newEnv(t)
	e.mountHome("size=16m,mode=0700")
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"))
	id := e.start("goal")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	e.stopDaemon()
	if out, err := exec.Command("mount", "-o", "remount,ro", e.home).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v %s", err, out)
	}
	cmd := exec.Command(filepath.Join(binDir, "loopd"))
	cmd.Env = e.environ()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "read-only file system") {
		t.Errorf("loopd on a read-only home: %v\n%s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "remount,rw", e.home).CombinedOutput(); err != nil {
		t.Fatalf("remount rw: %v %s", err, out)
	}
	e.startDaemon()
	if r := e.status(id); r.Status != api.RunCompleted {
		t.Errorf("after the home is writable again: %s", r.Status)
	}
}

// A step whose log cannot be created fails, with the reason, instead of
// running without one or being taken for a lost outcome and run again
// forever (as a full disk would otherwise make it). Here the agent puts a
// directory where the next step's log goes, in place of the log that the
// next step's process, started while the agent runs, has created (the
// agent waits for it, up to 5 s).
func TestStepLogThatCannotBeCreated(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command",
		`agent_command=if [ "$LOOP_ITERATION" = 1 ]; then log="`+e.home+`/runs/$LOOP_RUN_ID/0002-verification.log"; `+
			`i=0; while [ ! -e "$log" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; rm -f "$log"; mkdir "$log"; fi; touch done.txt`,
		verifyDone, "completion=verify")
	id := e.start("goal")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d: %+v", code, e.status(id))
	}
	steps := e.steps(id)
	if len(steps) != 4 {
		t.Fatalf("%d steps, want 4 (the verification without a log failed, the next iteration passed): %+v", len(steps), steps)
	}
	s := steps[1]
	if s.Status != api.StepFailed || !strings.Contains(s.Error, "could not create the step's log") || !strings.Contains(s.Error, s.LogPath) {
		t.Errorf("step 2: %s %q; want FAILED, saying its log %s could not be created", s.Status, s.Error, s.LogPath)
	}
	if s.Tests != nil {
		t.Errorf("step 2 ran its tests: %+v", *s.Tests)
	}
}

// fill fills the file system of LOOPD_HOME to the last byte (a small
// tmpfs from mountHome) and returns the filler file to remove.
func (e *env) fill() string {
	e.t.Helper()
	filler := filepath.Join(e.home, "filler")
	f, err := os.Create(filler)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int{64 << 10, 4 << 10, 1} {
		chunk := make([]byte, size)
		for {
			if _, err := f.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					e.t.Fatalf("fill: %v", err)
				}
				break
			}
		}
	}
	return filler
}

// A step that finishes while the disk is full and no daemon watches (it
// was killed) keeps its outcome: the next daemon records it instead of
// marking it INTERRUPTED and running the agent of that iteration again.
func TestDiskFullCrashKeepsTheStepsOutcome(t *testing.T) {
	e := newEnv(t)
	e.mountHome("size=24m,mode=0700")
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=1", "FAKE_DONE_AT=2"))
	id := e.start("goal")
	step := e.runningStep(id, 1)
	filler := e.fill()
	e.killDaemon()

	e.release("go-1")
	eventually(t, "the agent of iteration 1 to end", 30*time.Second, func() bool {
		return !processAlive(step.Pid)
	})
	b, _ := os.ReadFile(filepath.Join(e.home, "runs", id, "exits"))
	if !strings.Contains(string(b), ":1 exit ") {
		t.Fatalf("the step's exit status is not in the exits file:\n%q", b)
	}

	os.Remove(filler)
	e.startDaemon()
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	first := e.steps(id)[0]
	if first.Status == api.StepInterrupted {
		t.Errorf("step 1 INTERRUPTED (%s): its outcome was recorded and must have been kept", first.Error)
	}
	runs := 0
	for _, inv := range e.invocations() {
		if strings.HasPrefix(inv, "1 ") {
			runs++
		}
	}
	if runs != 1 {
		t.Errorf("the agent of iteration 1 ran %d times, want 1:\n%v", runs, e.invocations())
	}
}

func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// An agent that fails because LOOPD_HOME filled up (it cannot write its
// output) is not counted as a failure: the step is INTERRUPTED, the run
// waits (disk_full) instead of starting the next step into the full disk,
// and it goes on by itself once space is freed.
func TestDiskFullFailureIsNotCounted(t *testing.T) {
	e := newEnv(t)
	e.mountHome("size=24m,mode=0700")
	e.logDir = t.TempDir() // the daemon's log must not be on the full disk: it is the marker
	e.startDaemon()
	// The first time, the agent waits for the file go; every time, it
	// writes far more than a page of output (on the full disk the write
	// fails and it exits 1, as a real agent does), then promises.
	e.config("agent=command", "completion=promise", "max_consecutive_implementation_failures=1",
		`agent_command=sh -c 'if [ ! -f waited ]; then touch waited; while [ ! -f go ]; do sleep 0.05; done; fi; `+
			`head -c 200000 /dev/zero | tr "\0" x || exit 1; echo; echo "<promise>COMPLETE</promise>"'`)
	id := e.start("goal")
	e.runningStep(id, 1)
	filler := e.fill()
	e.release("go")
	eventually(t, "the daemon to find the step failed for the full disk", 30*time.Second, func() bool {
		return strings.Contains(e.daemonLog(), "step failed while LOOPD_HOME was out of disk space")
	})
	os.Remove(filler)
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d, want 0 (the disk's failure must not end the run): %+v", code, e.status(id))
	}
	steps := e.steps(id)
	if steps[0].Status != api.StepInterrupted || !strings.Contains(steps[0].Error, "out of disk space") {
		t.Errorf("step 1: %s %q, want INTERRUPTED for the full disk", steps[0].Status, steps[0].Error)
	}
	for _, s := range steps {
		if s.Status == api.StepFailed {
			t.Errorf("step %d FAILED (%s): a full disk is not the agent's failure", s.Seq, s.Error)
		}
	}
}
