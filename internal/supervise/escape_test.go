package supervise

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid %q in %s", f, path)
		}
		pids = append(pids, pid)
	}
	return pids
}

// escaper starts processes that leave the step's process group: one in a
// session of its own (as Claude's Bash tool and Gemini's shell tool start
// commands), one that also clears its environment (and so its tag), and a
// plain background job. It writes their pids to escaped.pids, the one
// without an environment's last.
const escaper = `setsid sleep 1000 & echo $! >> escaped.pids
sleep 1000 & echo $! >> escaped.pids
setsid env -i /bin/sh -c 'echo $$ >> bare.pid; exec sleep 1000' &
while [ ! -s bare.pid ]; do sleep 0.01; done
cat bare.pid >> escaped.pids
echo started`

// modes runs a test with the step's cgroup and with the fallback without
// one (tag and parentage).
func modes(t *testing.T, test func(t *testing.T, withCgroup bool)) {
	modesOf(t, false, test)
}

// subreaperModes is modes and, for steps started by the test process, the
// fallback as the daemon runs it: as the child subreaper of its steps,
// finding their processes below its children (ownedProcesses).
func subreaperModes(t *testing.T, test func(t *testing.T, withCgroup bool)) {
	modesOf(t, true, test)
}

func modesOf(t *testing.T, subreaper bool, test func(t *testing.T, withCgroup bool)) {
	if subreaper {
		t.Run("cgroup=false,subreaper", func(t *testing.T) {
			beSubreaper(t)
			useCgroups = false
			t.Cleanup(func() { useCgroups = true })
			test(t, false)
		})
	}
	for _, withCgroup := range []bool{true, false} {
		t.Run(fmt.Sprintf("cgroup=%v", withCgroup), func(t *testing.T) {
			if withCgroup {
				if _, fd := newCgroup("loopd-probe-" + strconv.Itoa(os.Getpid())); fd < 0 {
					t.Skip("no writable cgroup v2 hierarchy here")
				} else {
					syscallClose(fd)
					os.Remove(filepath.Join(cgroupMount(), cgroupOf("self"), cgroupName("loopd-probe-"+strconv.Itoa(os.Getpid()))))
				}
			} else {
				useCgroups = false
				t.Cleanup(func() { useCgroups = true })
			}
			test(t, withCgroup)
		})
	}
}

func checkNothingLeft(t *testing.T, dir string, pids []int, cgroupLeavesNone bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i, pid := range pids {
		if i == len(pids)-1 && !cgroupLeavesNone {
			break
		}
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i, pid := range pids {
		if i == len(pids)-1 && !cgroupLeavesNone {
			// Without a cgroup, a process that cleared its environment
			// in a session of its own is beyond reach once its parent
			// is gone: the documented limit of the fallback.
			killIfAlive(pid)
			continue
		}
		if alive(pid) {
			t.Errorf("process %d (escaper #%d) survived the step", pid, i)
			killIfAlive(pid)
		}
	}
}

func killIfAlive(pid int) {
	if alive(pid) {
		_ = syscallKill(pid)
	}
}

// stop --now and timeouts (Terminate) leave nothing of the step running,
// including what moved to its own session.
func TestTerminateKillsEscapedProcesses(t *testing.T) {
	subreaperModes(t, func(t *testing.T, withCgroup bool) {
		dir := t.TempDir()
		p, err := Start(specIn(dir, escaper+"\ntrap '' TERM; while :; do sleep 0.05; done"))
		if err != nil {
			t.Fatal(err)
		}
		if withCgroup && p.cgroup == "" {
			t.Fatal("the step has no cgroup although one could be created")
		}
		eventually(t, "escapers started", func() bool {
			b, _ := os.ReadFile(filepath.Join(dir, "step.log"))
			return strings.Contains(string(b), "started")
		})
		pids := readPids(t, filepath.Join(dir, "escaped.pids"))
		p.Terminate(200 * time.Millisecond)
		checkNothingLeft(t, dir, pids, withCgroup)
		if withCgroup {
			if _, err := os.Stat(p.cgroup); !os.IsNotExist(err) {
				t.Errorf("the step's cgroup %s was not removed: %v", p.cgroup, err)
			}
		}
	})
}

// A step whose agent ends (or crashes) leaves nothing behind either.
func TestStepEndKillsEscapedProcesses(t *testing.T) {
	subreaperModes(t, func(t *testing.T, withCgroup bool) {
		dir := t.TempDir()
		p, err := Start(specIn(dir, escaper+"\nkill -9 $$"))
		if err != nil {
			t.Fatal(err)
		}
		ex := waitDone(t, p)
		if ex.Signal == 0 && ex.Code == 0 {
			t.Errorf("exit %+v: the crash was not seen", ex)
		}
		checkNothingLeft(t, dir, readPids(t, filepath.Join(dir, "escaped.pids")), withCgroup)
	})
}

// beSubreaper makes the test process the child subreaper of what it
// starts, as the daemon is, until the test ends (the other tests adopt
// steps as a restarted daemon would: not as their subreaper). The reaper
// goroutine is not started: the tests reap what they start.
func beSubreaper(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skip(err)
	}
	if !canListChildren() {
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		t.Skip("/proc does not list children here")
	}
	isSubreaper.Store(true)
	t.Cleanup(func() {
		isSubreaper.Store(false)
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	})
}

// The end of one step kills its own escaped processes, never another
// step's, though both steps' orphans are children of the same subreaper.
func TestStepEndSparesOtherSteps(t *testing.T) {
	subreaperModes(t, func(t *testing.T, withCgroup bool) {
		other, ending := t.TempDir(), t.TempDir()
		// The ending step starts first and waits, so the other step's
		// processes are younger than it: only what marks them as another
		// step's (tag, session, group, cgroup) tells them apart.
		p, err := Start(specIn(ending, "while [ ! -f release ]; do sleep 0.01; done\n"+escaper+"\nkill -9 $$"))
		if err != nil {
			t.Fatal(err)
		}
		// The other step's escapers are started by a shell that exits:
		// orphans, re-parented to the subreaper like the ending step's.
		if err := os.WriteFile(filepath.Join(other, "escape.sh"), []byte(escaper), 0o600); err != nil {
			t.Fatal(err)
		}
		q, err := Start(specIn(other, "sh ./escape.sh; while :; do sleep 0.05; done"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			q.Terminate(100 * time.Millisecond)
			killEach(readPids(t, filepath.Join(other, "escaped.pids")))
		}()
		eventually(t, "the other step's escapers started", func() bool {
			b, _ := os.ReadFile(filepath.Join(other, "step.log"))
			return strings.Contains(string(b), "started")
		})
		if err := os.WriteFile(filepath.Join(ending, "release"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		waitDone(t, p)
		checkNothingLeft(t, ending, readPids(t, filepath.Join(ending, "escaped.pids")), withCgroup)
		for i, pid := range readPids(t, filepath.Join(other, "escaped.pids")) {
			if !alive(pid) {
				t.Errorf("the other step's escaped process %d (#%d) was killed", pid, i)
			}
		}
	})
}

func killEach(pids []int) {
	for _, pid := range pids {
		killIfAlive(pid)
	}
}

func syscallKill(pid int) error { return unix.Kill(pid, unix.SIGKILL) }
func syscallClose(fd int)       { unix.Close(fd) }

// A restarted daemon kills everything of an adopted step too: it finds the
// step's cgroup from the leader's /proc/<pid>/cgroup and its other
// processes by their tag.
func TestAdoptedTerminateKillsEscapedProcesses(t *testing.T) {
	modes(t, func(t *testing.T, withCgroup bool) {
		dir := t.TempDir()
		env := []string{}
		if !withCgroup {
			env = append(env, "LOOPD_SUPERVISE_TEST_NO_CGROUP=1")
		}
		id := startDetached(t, dir, escaper+"\ntrap '' TERM; while :; do sleep 0.05; done", env...)
		eventually(t, "escapers started", func() bool {
			b, _ := os.ReadFile(filepath.Join(dir, "step.log"))
			return strings.Contains(string(b), "started")
		})
		p, err := Adopt(id, specIn(dir).Tag, filepath.Join(dir, "exits"))
		if err != nil {
			t.Fatal(err)
		}
		if withCgroup == (p.cgroup == "") {
			t.Fatalf("adopted step's cgroup %q, want one: %v", p.cgroup, withCgroup)
		}
		p.Terminate(200 * time.Millisecond)
		checkNothingLeft(t, dir, readPids(t, filepath.Join(dir, "escaped.pids")), withCgroup)
	})
}

// What a step left behind when it ended while no daemon watched is swept
// by the next daemon.
func TestSweepKillsLeftovers(t *testing.T) {
	modes(t, func(t *testing.T, withCgroup bool) {
		dir := t.TempDir()
		env := []string{}
		if !withCgroup {
			env = append(env, "LOOPD_SUPERVISE_TEST_NO_CGROUP=1")
		}
		// The step ends only once the mini daemon has exited: a daemon
		// that saw it end would have killed its leftovers.
		started := time.Now()
		startDetached(t, dir, escaper+"\nwhile [ ! -f release ]; do sleep 0.01; done", env...)
		if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the step to end", func() bool {
			_, ok := ReadStatus(filepath.Join(dir, "exits"), specIn(dir).Tag)
			return ok
		})
		// The mini daemon exited before its step: the step's end killed
		// nothing, and the escaped processes still run.
		pids := readPids(t, filepath.Join(dir, "escaped.pids"))
		if !alive(pids[0]) {
			t.Fatal("the escaped process died with its step although no daemon watched it")
		}
		Sweep(specIn(dir).Tag, started)
		checkNothingLeft(t, dir, pids, withCgroup)
	})
}

// The empty cgroup of a step whose processes someone else killed is
// removed by PruneCgroups; a live step's is kept.
func TestPruneCgroups(t *testing.T) {
	dead, live := t.TempDir(), t.TempDir()
	pd, err := Start(specIn(dead, "sleep 1000"))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Start(specIn(live, "sleep 1000"))
	if err != nil {
		t.Fatal(err)
	}
	if pd.cgroup == "" {
		t.Skip("no writable cgroup v2 hierarchy here")
	}
	t.Cleanup(func() { pl.Terminate(time.Second) })
	// Killed by someone else: the cgroup is empty but still there (its
	// daemon, this test, removes it only when its waitChild sees the end).
	keep := pd.cgroup
	pd.mu.Lock()
	pd.cgroup = "" // as if its daemon had died: nobody removes it
	pd.mu.Unlock()
	_ = syscallKill(pd.Pid)
	<-pd.Done()
	eventually(t, "the killed step's cgroup to empty", func() bool { return len(cgroupPids(keep)) == 0 })
	if _, err := os.Stat(keep); os.IsNotExist(err) {
		// Another process under the same parent cgroup (a daemon of the
		// e2e tests, another test binary) pruned it meanwhile: make it
		// again, an empty step cgroup being what PruneCgroups removes.
		if err := os.Mkdir(keep, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	PruneCgroups()
	if _, err := os.Stat(keep); !os.IsNotExist(err) {
		t.Errorf("the empty cgroup %s survived PruneCgroups: %v", keep, err)
	}
	if _, err := os.Stat(pl.cgroup); err != nil {
		t.Errorf("the live step's cgroup was removed: %v", err)
	}
}

// A step that cannot be started in its cgroup (clone3 refused: a seccomp
// filter, an old kernel, the cgroup removed meanwhile) is started without
// one.
func TestStartFallsBackWithoutItsCgroup(t *testing.T) {
	dir := t.TempDir()
	removed := ""
	testCgroupHook = func(cg string) { removed = cg; os.Remove(cg) }
	t.Cleanup(func() { testCgroupHook = nil })
	p, err := Start(specIn(dir, "echo ran"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if removed == "" {
		t.Skip("no writable cgroup v2 hierarchy here")
	}
	if ex := waitDone(t, p); ex.Code != 0 || p.cgroup != "" {
		t.Errorf("exit %+v, cgroup %q: want the step run without a cgroup", ex, p.cgroup)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "step.log")); !strings.Contains(string(b), "ran") {
		t.Errorf("log %q", b)
	}
}

// ticksAt places a wall-clock time on /proc's clock: a process started
// after it has a start time at or after it, so Sweep never skips a
// process of the step.
func TestTicksAt(t *testing.T) {
	if ticksAt(time.Time{}) != 0 {
		t.Error("the zero time must select every process")
	}
	before := time.Now()
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	start, err := StartTicks(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if got := ticksAt(before); got == 0 || got > start {
		t.Errorf("ticksAt(before the process) = %d, its start time %d", got, start)
	}
	if got := ticksAt(before.Add(time.Hour)); got <= start {
		t.Errorf("ticksAt(an hour later) = %d, not after the start time %d", got, start)
	}
}
