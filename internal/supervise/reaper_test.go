package supervise

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// As a child subreaper the daemon reaps the orphans of its steps and
// helpers that die as its children, and never a child os/exec waits for.
func TestReaperReapsOrphansOnly(t *testing.T) {
	if err := BecomeSubreaper(t.Context()); err != nil {
		t.Skip(err)
	}
	// The other tests adopt steps as a restarted daemon would: not as
	// their subreaper.
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	dir := t.TempDir()
	// A child os/exec waits for, already a zombie, in its own process
	// group (as custom_script and notifications run).
	own := exec.Command("/bin/sh", "-c", "exit 7")
	own.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	// Orphans: a helper's background job (same session, the helper's
	// group) and a job that made a session of its own; each writes its pid
	// and exits soon after its parent has gone.
	for _, script := range []string{
		`(sleep 0.2; exit 0) & echo $! > helper.pid`,
		`setsid sh -c 'echo $$ > session.pid; sleep 0.2' &  while [ ! -s session.pid ]; do sleep 0.01; done`,
	} {
		c := exec.Command("/bin/sh", "-c", script)
		c.Dir = dir
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"helper.pid", "session.pid"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		eventually(t, f+" reaped", func() bool { _, ok := readStat(pid); return !ok })
	}
	// The os/exec child was left alone: its status is still there.
	eventually(t, "the helper a zombie", func() bool { pi, ok := readStat(own.Process.Pid); return ok && pi.state == 'Z' })
	reapOrphans()
	if err := own.Wait(); err == nil || own.ProcessState.ExitCode() != 7 {
		t.Errorf("os/exec lost its child's status: %v, %v", err, own.ProcessState)
	}
}

// A step's end never waits for another step's start (with a thousand runs,
// starts are always under way): unregistering a leader takes only the
// map's lock, not the one a start holds across its fork and exec.
func TestLeaderEndDoesNotWaitForStarts(t *testing.T) {
	leaders.starting.RLock() // a start under way
	defer leaders.starting.RUnlock()
	leaders.mu.Lock()
	leaders.pids[-42] = true
	leaders.mu.Unlock()
	done := make(chan struct{})
	go func() {
		unregisterLeader(-42)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("unregisterLeader waited for a start in progress")
	}
	if isLeader(-42) {
		t.Error("still registered")
	}
}

// A children file is no snapshot: while earlier siblings are reaped, a
// plain read can skip live children. readChildrenStable never returns a
// list that misses one: here a shell reaps 400 children while the list of
// its 20 younger ones (the markers) is read over and over.
func TestReadChildrenStableMissesNoChild(t *testing.T) {
	dir := t.TempDir()
	script := `i=0; old=""
while [ $i -lt 400 ]; do sleep 1000 & old="$old $!"; i=$((i+1)); done
i=0; while [ $i -lt 20 ]; do sleep 1000 & echo $! >> markers; i=$((i+1)); done
touch ready
while [ ! -f go ]; do sleep 0.01; done
kill $old; for p in $old; do wait $p; done
touch reaped
while [ ! -f end ]; do sleep 0.01; done
kill $(cat markers)`
	for round := range 3 {
		os.Remove(filepath.Join(dir, "markers"))
		for _, f := range []string{"ready", "go", "reaped", "end"} {
			os.Remove(filepath.Join(dir, f))
		}
		sh := exec.Command("/bin/sh", "-c", script)
		sh.Dir = dir
		if err := sh.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the shell's children started", func() bool {
			_, err := os.Stat(filepath.Join(dir, "ready"))
			return err == nil
		})
		markers := readPids(t, filepath.Join(dir, "markers"))
		file := "/proc/" + strconv.Itoa(sh.Process.Pid) + "/task/" + strconv.Itoa(sh.Process.Pid) + "/children"
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		reads := 0
		for {
			_, err := os.Stat(filepath.Join(dir, "reaped"))
			reaped := err == nil
			pids, ok := readChildrenStable(file)
			if ok {
				reads++
				got := map[int]bool{}
				for _, pid := range pids {
					got[pid] = true
				}
				for _, m := range markers {
					if !got[m] {
						t.Fatalf("round %d: live child %d missing from a stable read of %d children", round, m, len(pids))
					}
				}
			}
			if reaped {
				break
			}
		}
		os.WriteFile(filepath.Join(dir, "end"), nil, 0o600)
		_ = sh.Wait()
		t.Logf("round %d: %d stable reads while the shell reaped", round, reads)
	}
}
