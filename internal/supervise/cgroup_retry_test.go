package supervise

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A step whose start in its cgroup is refused (clone3 failing: a seccomp
// filter, an old kernel, a cgroup that cannot take another process) starts
// without one; it never fails with "exec: already started".
func TestStartWithoutTheCgroupWhenItsStartFails(t *testing.T) {
	dir := t.TempDir()
	old := newStepCgroup
	defer func() { newStepCgroup = old }()
	newStepCgroup = func(string) (string, int) {
		// Not a cgroup directory: CLONE_INTO_CGROUP refuses it.
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return dir + "/no-cgroup", fd
	}
	p, err := Start(specIn(dir, "echo started"))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if ex := waitDone(t, p); ex.Code != 0 || !ex.Recorded {
		t.Errorf("exit %+v, want 0 recorded", ex)
	}
	if _, err := os.Stat(dir + "/no-cgroup"); err == nil {
		t.Error("the cgroup of the failed start was left behind")
	}
}

// The step cgroups' parent is looked up once, not at every step: when the
// daemon is moved to another cgroup and its old one removed, the next step
// is made under the new one (and not left without a cgroup).
func TestStepCgroupFollowsTheDaemonToAnotherCgroup(t *testing.T) {
	probe := "loopd-probe-" + strconv.Itoa(os.Getpid())
	if _, fd := newCgroup(probe); fd < 0 {
		t.Skip("no writable cgroup v2 hierarchy here")
	} else {
		unix.Close(fd)
		os.Remove(filepath.Join(cgroupMount(), cgroupOf("self"), cgroupName(probe)))
	}
	home := filepath.Join(cgroupMount(), cgroupOf("self"))
	moveTo := func(dir string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			t.Fatalf("move the test into %s: %v", dir, err)
		}
	}
	a, b := filepath.Join(home, "loopd-test-a"), filepath.Join(home, "loopd-test-b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		moveTo(home)
		os.Remove(a)
		os.Remove(b)
		cgroupParent(true)
	})
	stepIn := func(want string) {
		t.Helper()
		p, err := Start(specIn(t.TempDir(), "true"))
		if err != nil {
			t.Fatal(err)
		}
		if got := filepath.Dir(p.cgroup); got != want {
			t.Errorf("the step's cgroup is %s, want one in %s", p.cgroup, want)
		}
		if ex := waitDone(t, p); ex.Code != 0 {
			t.Errorf("exit %+v", ex)
		}
	}
	moveTo(a)
	cgroupParent(true) // as a daemon started in a
	stepIn(a)
	moveTo(b)
	if err := os.Remove(a); err != nil {
		t.Fatalf("remove the daemon's old cgroup: %v", err)
	}
	stepIn(b)
}

// The next step's cgroup is made while the step before it runs, and
// that step starts in it; one that no step takes is removed.
func TestTheNextStepsCgroupIsMadeAhead(t *testing.T) {
	probe := "loopd-probe-" + strconv.Itoa(os.Getpid())
	if _, fd := newCgroup(probe); fd < 0 {
		t.Skip("no writable cgroup v2 hierarchy here")
	} else {
		unix.Close(fd)
		os.Remove(filepath.Join(cgroupMount(), cgroupOf("self"), cgroupName(probe)))
	}
	dir := t.TempDir()
	first := specIn(dir, "true")
	first.Gated = true
	first.Next = first.Tag + "-next"
	p, err := Start(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Open(); err != nil {
		t.Fatal(err)
	}
	p.PrepareNext()
	waitDone(t, p)
	want := filepath.Join(filepath.Dir(p.cgroup), cgroupName(first.Next))
	if _, err := os.Stat(want); err != nil {
		t.Fatalf("the next step's cgroup was not made ahead: %v", err)
	}
	second := specIn(t.TempDir(), "true")
	second.Tag = first.Next
	q, err := Start(second)
	if err != nil {
		t.Fatal(err)
	}
	prepared.mu.Lock()
	_, left := prepared.m[first.Next]
	prepared.mu.Unlock()
	if q.cgroup != want || left {
		t.Errorf("the next step runs in %q (the one made for it, %s, still waiting: %v)", q.cgroup, want, left)
	}
	if ex := waitDone(t, q); ex.Code != 0 {
		t.Errorf("exit %+v", ex)
	}
	if _, err := os.Stat(want); !os.IsNotExist(err) {
		t.Errorf("the step's cgroup %s was not removed after it: %v", want, err)
	}

	// Made for a step that never comes: removed after preparedTTL.
	old := preparedTTL
	preparedTTL = time.Millisecond
	t.Cleanup(func() { preparedTTL = old })
	prepareCgroup(first.Tag + "-never")
	never := filepath.Join(filepath.Dir(p.cgroup), cgroupName(first.Tag+"-never"))
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, err := os.Stat(never); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cgroup %s of a step that never came is still there", never)
		}
		time.Sleep(time.Millisecond)
	}
}
