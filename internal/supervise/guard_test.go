package supervise

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A guarded step runs while its worker's deadline is ahead, and its whole
// group is killed once the deadline passes: what a frozen or dead fleet
// worker relies on (nothing of the worker needs to run for it).
func TestGuardKillsTheGroupOnceTheDeadlinePasses(t *testing.T) {
	dir := t.TempDir()
	deadline := filepath.Join(dir, "lease-deadline")
	writeDeadline := func(at time.Time) {
		t.Helper()
		tmp := deadline + ".tmp"
		if err := os.WriteFile(tmp, []byte(strconv.FormatInt(at.Unix(), 10)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, deadline); err != nil {
			t.Fatal(err)
		}
	}
	writeDeadline(time.Now().Add(time.Hour))
	spec := specIn(dir, `sleep 300 & echo started >"$STEP_DIR/started"; wait`)
	spec.Guard = deadline
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Terminate(time.Second)
	waitFile(t, filepath.Join(dir, "started"))
	// Past three polls of the guard with the deadline ahead: still running.
	select {
	case <-p.Done():
		t.Fatalf("the guarded step ended while its deadline was an hour away: %v", p.Exit())
	case <-time.After(3 * time.Second):
	}
	writeDeadline(time.Now().Add(-time.Second))
	ex := waitDone(t, p)
	if ex.Signal != 9 || ex.Recorded {
		t.Fatalf("exit = %+v, want killed by SIGKILL with nothing recorded", ex)
	}
	eventually(t, "the step's group gone", func() bool { return !groupHasLiveMembers(p.Pid) })
}

// A step without a guard never reads a deadline: the embedded daemon's
// wrapper is unchanged.
func TestNoGuardWithoutADeadlineFile(t *testing.T) {
	if guarded("/x") == wrapper {
		t.Fatal("the guarded wrapper is the plain one")
	}
	dir := t.TempDir()
	p, err := Start(specIn(dir, "true"))
	if err != nil {
		t.Fatal(err)
	}
	if ex := waitDone(t, p); ex.Code != 0 || !ex.Recorded {
		t.Fatalf("exit = %+v", ex)
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not appear", path)
}
