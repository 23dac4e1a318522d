package supervise

import (
	"os"
	"testing"

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
