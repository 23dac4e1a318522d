package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// baseline measures what verify_baseline costs a run: the same one-iteration
// run (an agent that promises, a verification of a small Python unittest
// suite) with and without it, in alternating rounds, against the
// verification command run alone. The difference is one more verification
// and one more step's overhead, paid once per run, not per step.
func (b *bench) baselineCost(rounds int) error {
	d, err := b.startDaemon("")
	if err != nil {
		return err
	}
	defer d.stop()
	ws, err := workspace()
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	verify := "true"
	if _, err := exec.LookPath("python3"); err == nil {
		var tests string
		for i := range 5 {
			tests += fmt.Sprintf("    def test_%d(self):\n        self.assertEqual(%d, %d)\n\n", i, i, i)
		}
		if err := os.WriteFile(filepath.Join(ws, "test_calc.py"), []byte("import unittest\n\n\nclass T(unittest.TestCase):\n"+tests), 0o644); err != nil {
			return err
		}
		verify = "python3 -m unittest -q test_calc"
	}
	sets := []string{"agent=command", "agent_command=printf '%s\\n' '<promise>COMPLETE</promise>'",
		"verify_command=" + verify, "completion=promise,verify", "max_iterations=3"}
	ctx := context.Background()
	run := func(on bool) (time.Duration, time.Duration, error) {
		t0 := time.Now()
		r, err := d.client.CreateRun(ctx, api.CreateRunRequest{Workspace: ws, Goal: "bench",
			Set: append(slices.Clone(sets), "verify_baseline="+strconv.FormatBool(on))})
		if err != nil {
			return 0, 0, err
		}
		final, err := d.client.Wait(ctx, api.RunRef{Ref: r.ID})
		if err != nil {
			return 0, 0, err
		}
		took := time.Since(t0)
		want := 2
		if on {
			want = 3
		}
		if final.Status != api.RunCompleted || final.Steps != want {
			return 0, 0, fmt.Errorf("run ended %s %q after %d steps, want COMPLETED after %d", final.Status, final.Reason, final.Steps, want)
		}
		var step time.Duration
		if on {
			steps, err := d.client.Steps(ctx, api.RunRef{Ref: r.ID})
			if err != nil {
				return 0, 0, err
			}
			step = time.Duration(steps[0].DurationMS) * time.Millisecond
		}
		return took, step, nil
	}
	var off, on, delta, steps, alone []time.Duration
	for range rounds {
		t0 := time.Now()
		c := exec.Command("sh", "-c", verify)
		c.Dir = ws
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("%s alone: %v %s", verify, err, out)
		}
		alone = append(alone, time.Since(t0))
		a, _, err := run(false)
		if err != nil {
			return err
		}
		bt, st, err := run(true)
		if err != nil {
			return err
		}
		off, on, delta, steps = append(off, a), append(on, bt), append(delta, bt-a), append(steps, st)
	}
	fmt.Println(summarize("the verification alone ("+verify+")", alone))
	fmt.Println(summarize("a one-iteration run without verify_baseline", off))
	fmt.Println(summarize("the same run with verify_baseline", on))
	fmt.Println(summarize("the baseline step's recorded duration", steps))
	slices.Sort(delta)
	fmt.Printf("RESULT verify_baseline adds per run (median of %d paired rounds): %s\n", rounds, delta[len(delta)/2].Round(100*time.Microsecond))
	return nil
}
