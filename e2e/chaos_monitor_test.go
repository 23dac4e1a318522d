package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The chaos monitor's own check, against real processes carrying step
// tags: two steps of one run alive at once are reported; a step's wrapper
// waiting at its gate (fd 3, a pipe) is not a step alive; nor is a step
// process that ended before the pass was done.
func TestChaosMonitorSeesTwoStepsAlive(t *testing.T) {
	run := "mon" + strconv.Itoa(os.Getpid())
	// A process whose argv carries a step's tag as a whole argument, as a
	// step's wrapper does; "; :" keeps sh from exec'ing sleep in its place.
	step := func(seq int, gate bool) *exec.Cmd {
		cmd := exec.Command("sh", "-c", "sleep 60; :", "loopd-step:"+run+":"+strconv.Itoa(seq))
		if gate {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.ExtraFiles = []*os.File{r} // fd 3, never written: it waits
			t.Cleanup(func() { r.Close(); w.Close() })
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	sample := func() []string {
		m := newMonitor()
		m.watch(run, t.TempDir())
		m.sample("now")
		return m.violations()
	}

	first := step(1, false)
	step(3, true)
	if v := sample(); len(v) != 0 {
		t.Fatalf("a step alive and the next one waiting at its gate: %v; want no violation", v)
	}
	step(2, false)
	v := sample()
	if len(v) != 1 || !strings.Contains(v[0], "2 steps alive at once") {
		t.Fatalf("two steps alive: %v; want one violation naming them", v)
	}
	_ = first.Process.Kill()
	_ = first.Wait()
	if v := sample(); len(v) != 0 {
		t.Fatalf("the first step ended: %v; want no violation", v)
	}
}
