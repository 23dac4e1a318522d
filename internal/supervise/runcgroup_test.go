package supervise

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// needCgroups skips a test where step cgroups cannot be made.
func needCgroups(t *testing.T) {
	t.Helper()
	probe := "loopd-probe-" + strconv.Itoa(os.Getpid())
	_, fd := newCgroup(probe)
	if fd < 0 {
		t.Skip("no writable cgroup v2 hierarchy here")
	}
	syscallClose(fd)
	os.Remove(filepath.Join(cgroupMount(), cgroupOf("self"), cgroupName(probe)))
}

// runSpec is a gated step of a run with a scheduler's tag.
func runSpec(dir, run string, seq int, commands ...string) Spec {
	s := specIn(dir, commands...)
	s.Gated = true
	s.Tag = fmt.Sprintf("loopd-step:%s:%d", run, seq)
	s.Next = fmt.Sprintf("loopd-step:%s:%d", run, seq+1)
	return s
}

func startOpened(t *testing.T, spec Spec) *Process {
	t.Helper()
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Open(); err != nil {
		t.Fatal(err)
	}
	p.PrepareNext()
	return p
}

// A run's next step runs in the cgroup of the step before it when that
// step left nothing behind: while the next step runs, its cgroup holds its
// processes and nothing else, and a restarted daemon finds that cgroup
// from the step's leader although it is named after the step that made
// it. A step that left processes behind has them killed with its cgroup,
// which is then not handed on (a process cloned into a cgroup that was
// killed is killed too, on this kernel): the step after it starts, and
// runs, in a new one.
func TestARunsStepsShareOneCgroupOneAfterTheOther(t *testing.T) {
	needCgroups(t)
	run := fmt.Sprintf("share%d-%d", os.Getpid(), time.Now().UnixNano())
	p := startOpened(t, runSpec(t.TempDir(), run, 1, "true"))
	if ex := waitDone(t, p); ex.Code != 0 {
		t.Fatalf("first step: %+v", ex)
	}
	if p.cgroup == "" {
		t.Fatal("the first step ran without a cgroup")
	}
	if _, err := os.Stat(p.cgroup); err != nil {
		t.Fatalf("the first step's cgroup was not kept for the next: %v", err)
	}

	// The second step leaves processes behind, one without its tag in a
	// session of its own (only its cgroup holds it).
	dir := t.TempDir()
	second := runSpec(dir, run, 2, escaper+"\nwhile [ ! -f release ]; do sleep 0.01; done")
	q := startOpened(t, second)
	if q.cgroup != p.cgroup {
		t.Errorf("the second step runs in %q, want the first step's %q", q.cgroup, p.cgroup)
	}
	if got := stepCgroup(q.Pid, second.Tag); got != p.cgroup {
		t.Errorf("the second step's cgroup as a restarted daemon finds it: %q, want %q", got, p.cgroup)
	}
	eventually(t, "escapers started", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "step.log"))
		return strings.Contains(string(b), "started")
	})
	tagged := []byte(TagEnv + "=" + second.Tag + "\x00")
	pids := readPids(t, filepath.Join(dir, "escaped.pids"))
	bare := pids[len(pids)-1]
	for _, pid := range cgroupPids(q.cgroup) {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err == nil && !bytes.Contains(env, tagged) && pid != bare {
			t.Errorf("process %d in the second step's cgroup is not the second step's", pid)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if ex := waitDone(t, q); ex.Code != 0 {
		t.Errorf("second step: %+v", ex)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d the second step left is alive once the step is done", pid)
			killIfAlive(pid)
		}
	}
	if _, err := os.Stat(q.cgroup); !os.IsNotExist(err) {
		t.Errorf("the killed cgroup %s was not removed: %v", q.cgroup, err)
	}

	third := runSpec(t.TempDir(), run, 3, "true")
	third.Next = "" // the run's last step
	r := startOpened(t, third)
	if want := filepath.Join(filepath.Dir(p.cgroup), cgroupName(third.Tag)); r.cgroup != want {
		t.Errorf("the third step runs in %q, want a new cgroup %s", r.cgroup, want)
	}
	if ex := waitDone(t, r); ex.Code != 0 || !ex.Recorded {
		t.Errorf("third step: %+v, want exit 0 recorded", ex)
	}
	if _, err := os.Stat(r.cgroup); !os.IsNotExist(err) {
		t.Errorf("the run's cgroup %s was not removed after its last step: %v", r.cgroup, err)
	}
}

// A cgroup kept for a next step that never comes (the run ended or
// stopped) is removed after preparedTTL.
func TestAHandedOnCgroupNotTakenIsRemoved(t *testing.T) {
	needCgroups(t)
	old := preparedTTL
	preparedTTL = 10 * time.Millisecond
	t.Cleanup(func() { preparedTTL = old })
	run := fmt.Sprintf("unused%d-%d", os.Getpid(), time.Now().UnixNano())
	p := startOpened(t, runSpec(t.TempDir(), run, 1, "true"))
	waitDone(t, p)
	if p.cgroup == "" {
		t.Fatal("the step ran without a cgroup")
	}
	eventually(t, "the unused cgroup to be removed", func() bool {
		_, err := os.Stat(p.cgroup)
		return os.IsNotExist(err)
	})
}

// A step abandoned at its gate does not hand its cgroup on: it ran
// nothing, and its step is started again under the same tag.
func TestAnAbandonedStepKeepsNoCgroup(t *testing.T) {
	needCgroups(t)
	run := fmt.Sprintf("abandon%d-%d", os.Getpid(), time.Now().UnixNano())
	spec := runSpec(t.TempDir(), run, 1, "true")
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	p.Abandon()
	prepared.mu.Lock()
	_, kept := prepared.m[spec.Next]
	prepared.mu.Unlock()
	if kept {
		t.Error("an abandoned step handed its cgroup on")
	}
	if _, err := os.Stat(p.cgroup); !os.IsNotExist(err) {
		t.Errorf("the abandoned step's cgroup %s is still there: %v", p.cgroup, err)
	}
}

// When the cgroup kept for a step was removed meanwhile (another daemon's
// PruneCgroups removes empty ones), the step is started in a new one.
func TestAStepWhoseKeptCgroupWasRemovedGetsANewOne(t *testing.T) {
	needCgroups(t)
	run := fmt.Sprintf("pruned%d-%d", os.Getpid(), time.Now().UnixNano())
	p := startOpened(t, runSpec(t.TempDir(), run, 1, "true"))
	waitDone(t, p)
	if err := os.Remove(p.cgroup); err != nil {
		t.Fatal(err)
	}
	second := runSpec(t.TempDir(), run, 2, "true")
	second.Next = ""
	q := startOpened(t, second)
	want := filepath.Join(filepath.Dir(p.cgroup), cgroupName(second.Tag))
	if q.cgroup != want {
		t.Errorf("the step runs in %q, want a new cgroup %s", q.cgroup, want)
	}
	if ex := waitDone(t, q); ex.Code != 0 {
		t.Errorf("exit %+v", ex)
	}
}

// What a step left behind while no daemon watched is swept from its
// run's cgroup, named after an earlier step: the one process only the
// cgroup holds (no tag, a session of its own, its parent gone) too.
func TestSweepFindsTheRunsCgroup(t *testing.T) {
	needCgroups(t)
	run := fmt.Sprintf("sweep%d-%d", os.Getpid(), time.Now().UnixNano())
	p := startOpened(t, runSpec(t.TempDir(), run, 1, "true"))
	waitDone(t, p)
	dir := t.TempDir()
	started := time.Now()
	second := runSpec(dir, run, 2, escaper+"\nwhile [ ! -f release ]; do sleep 0.01; done")
	q := startOpened(t, second)
	if q.cgroup != p.cgroup {
		t.Fatalf("the second step runs in %q, not the run's %q", q.cgroup, p.cgroup)
	}
	eventually(t, "escapers started", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "step.log"))
		return strings.Contains(string(b), "started")
	})
	// As if its daemon had died: the step's end kills nothing of its
	// cgroup (only what its tag and parentage find).
	q.mu.Lock()
	q.cgroup = ""
	q.mu.Unlock()
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitDone(t, q)
	pids := readPids(t, filepath.Join(dir, "escaped.pids"))
	bare := pids[len(pids)-1]
	if !alive(bare) {
		t.Fatal("the process only the cgroup holds died with its step: the test shows nothing")
	}
	Sweep(second.Tag, started)
	checkNothingLeft(t, dir, pids, true)
	if _, err := os.Stat(p.cgroup); !os.IsNotExist(err) {
		t.Errorf("the swept cgroup %s is still there: %v", p.cgroup, err)
	}
}

// Which cgroup names can be a step's: its own, or its run's (and epoch's)
// made by an earlier step; never another run's, even one whose id starts
// the same, nor another epoch's.
func TestRunCgroupNames(t *testing.T) {
	tests := []struct {
		name, tag string
		want      bool
	}{
		{"loopd-step-R-5", "loopd-step:R:5", true},
		{"loopd-step-R-3", "loopd-step:R:5", true},
		{"loopd-step-R-x-3", "loopd-step:R:5", false},
		{"loopd-step-R-1-3", "loopd-step:R:5", false},
		{"loopd-step-R-1-3", "loopd-step:R-1:5", true},
		{"loopd-step-RR-3", "loopd-step:R:5", false},
		{"loopd-step-R-", "loopd-step:R:5", false},
		{"loopd-step-R-3-e2", "loopd-step:R:5:e2", true},
		{"loopd-step-R-3-e3", "loopd-step:R:5:e2", false},
		{"loopd-step-R-3-e2", "loopd-step:R:5", false},
		{"loopd-step-R-3", "loopd-step:R:5:e2", false},
		{cgroupName("loopd-step:test:/tmp/x"), "loopd-step:test:/tmp/x", true},
		{cgroupName("loopd-step:test:/tmp/y"), "loopd-step:test:/tmp/x", false},
	}
	for _, tt := range tests {
		if got := runCgroup(tt.name, tt.tag); got != tt.want {
			t.Errorf("runCgroup(%q, %q) = %v, want %v", tt.name, tt.tag, got, tt.want)
		}
	}
	for _, tt := range []struct{ tag, head, tail string }{
		{"loopd-step:R:5", "loopd-step:R", ""},
		{"loopd-step:R:5:e12", "loopd-step:R", "e12"},
		{"a:1:e2", "a", "e2"},
		{"x:e5", "", ""},
		{"loopd-step:test:/tmp/x", "", ""},
		{"loopd-step:R:5:e", "", ""},
		{"loopd-step:R:", "", ""},
	} {
		head, tail, ok := splitTag(tt.tag)
		if head != tt.head || tail != tt.tail || ok != (tt.head != "") {
			t.Errorf("splitTag(%q) = %q, %q, %v; want %q, %q", tt.tag, head, tail, ok, tt.head, tt.tail)
		}
	}
	if !sameRun("loopd-step:R:1", "loopd-step:R:2") || !sameRun("loopd-step:R:1:e4", "loopd-step:R:9:e4") {
		t.Error("the steps of one run are not of one run")
	}
	if sameRun("loopd-step:R:1", "loopd-step:S:2") || sameRun("loopd-step:R:1:e1", "loopd-step:R:2:e2") ||
		sameRun("loopd-step:test:/a", "loopd-step:test:/a-next") {
		t.Error("steps of different runs or epochs are of one run")
	}
}

// A step whose cgroup directory an earlier attempt left behind, killed
// (its daemon died after cgroup.kill, before removing it), runs: a process
// cloned into a cgroup that was ever killed is killed at once on this
// kernel, so the directory is made anew.
func TestAStepRunsWhereAKilledCgroupWasLeft(t *testing.T) {
	needCgroups(t)
	spec := specIn(t.TempDir(), "true")
	dir := filepath.Join(cgroupMount(), cgroupOf("self"), cgroupName(spec.Tag))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	if !killCgroup(dir) {
		t.Fatal("cgroup.kill cannot be written")
	}
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	if ex := waitDone(t, p); ex.Code != 0 || !ex.Recorded {
		t.Errorf("exit %+v, want 0 recorded", ex)
	}
}

// A step's cgroup left by an earlier attempt that cannot be removed (what
// was killed in it has not left it yet) is never used again: had it been
// killed, every process cloned into it would die at once on this kernel.
// The step runs without a cgroup instead.
func TestNewCgroupDoesNotReuseOneItCannotRemove(t *testing.T) {
	needCgroups(t)
	tag := "loopd-step:busy" + strconv.Itoa(os.Getpid()) + ":1"
	dir, fd := newCgroup(tag)
	if fd < 0 {
		t.Fatal("no cgroup made")
	}
	syscallClose(fd)
	busy := exec.Command("sleep", "60")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = busy.Process.Kill()
		_ = busy.Wait()
		os.Remove(dir)
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(busy.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if again, fd := newCgroup(tag); again != "" || fd >= 0 {
		if fd >= 0 {
			syscallClose(fd)
		}
		t.Fatalf("newCgroup = %q: reused a cgroup it could not remove", again)
	}
}
