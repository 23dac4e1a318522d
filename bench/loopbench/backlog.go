package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// backlog: what the backlog's coordinator adds per task. A backlog of n
// no-op tasks (each a worktree task run of one no-op agent step, nothing
// to land), one at a time, against n separate worktree runs of the same
// step started and waited for one after the other, alternating rounds:
// the ratio is the queue's cost. Then the land queue's throughput: a
// backlog of n independent tasks that each add a file, four task runs at
// a time, every land verified (`true`) on the combination, measured
// from the first TASK_LANDED to the last.
func (b *bench) backlog(n, rounds int) error {
	d, err := b.startDaemon("")
	if err != nil {
		return err
	}
	defer d.stop()
	ctx := context.Background()
	noop := []string{"agent=command", "agent_command=echo '<promise>COMPLETE</promise>'", "completion=promise", "isolation=worktree"}
	var plan strings.Builder
	for i := range n {
		fmt.Fprintf(&plan, "- [ ] no-op task %d\n", i+1)
	}
	var ratios []float64
	for r := range rounds {
		ws, err := gitWorkspace(map[string]string{"PLAN.md": plan.String()})
		if err != nil {
			return err
		}
		t0 := time.Now()
		for range n {
			run, err := d.client.CreateRun(ctx, api.CreateRunRequest{Workspace: ws, Goal: "no-op", Set: noop})
			if err != nil {
				return err
			}
			if final, err := d.client.Wait(ctx, api.RunRef{Ref: run.ID}); err != nil || final.Status != api.RunCompleted {
				return fmt.Errorf("a separate run ended %s %q: %v", final.Status, final.Reason, err)
			}
		}
		separate := time.Since(t0)
		t0 = time.Now()
		run, err := d.client.CreateRun(ctx, api.CreateRunRequest{Workspace: ws, Goal: "no-op", Set: noop, TasksFile: filepath.Join(ws, "PLAN.md")})
		if err != nil {
			return err
		}
		final, err := d.client.Wait(ctx, api.RunRef{Ref: run.ID})
		if err != nil || final.Reason != fmt.Sprintf("completed:tasks:%d", n) {
			return fmt.Errorf("the backlog ended %s %q: %v", final.Status, final.Reason, err)
		}
		backlog := time.Since(t0)
		ratio := backlog.Seconds() / separate.Seconds()
		ratios = append(ratios, ratio)
		fmt.Printf("round %d: %d separate runs %.1f ms each; a backlog of %d tasks %.1f ms per task; ratio %.2f\n",
			r+1, n, ms(separate)/float64(n), n, ms(backlog)/float64(n), ratio)
		os.RemoveAll(ws)
	}
	slices.Sort(ratios)
	fmt.Printf("RESULT backlog of %d no-op tasks ÷ %d separate runs (median of %d): %.2f\n", n, n, rounds, ratios[len(ratios)/2])

	// The land queue: n independent tasks, each adding its own file.
	ws, err := gitWorkspace(map[string]string{"PLAN.md": strings.ReplaceAll(plan.String(), "no-op task", "independent task")})
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	adds := []string{"agent=command", `agent_command=echo "$LOOP_RUN_ID" > "f-$LOOP_RUN_ID.txt"; echo '<promise>COMPLETE</promise>'`,
		"verify_command=true", "completion=promise,verify", "max_parallel_tasks=4"}
	t0 := time.Now()
	run, err := d.client.CreateRun(ctx, api.CreateRunRequest{Workspace: ws, Goal: "add files", Set: adds, TasksFile: filepath.Join(ws, "PLAN.md")})
	if err != nil {
		return err
	}
	final, err := d.client.Wait(ctx, api.RunRef{Ref: run.ID})
	if err != nil || final.Reason != fmt.Sprintf("completed:tasks:%d", n) {
		var why []string
		if bt, terr := d.client.Tasks(ctx, api.RunRef{Ref: run.ID}); terr == nil {
			for _, t := range bt.Tasks {
				if t.State != "done" {
					why = append(why, t.ID+" "+t.State+": "+t.Why)
				}
			}
		}
		return fmt.Errorf("the land-queue backlog ended %s %q: %v %s", final.Status, final.Reason, err, strings.Join(why, "; "))
	}
	total := time.Since(t0)
	var lands []time.Time
	verified := 0
	for ev, err := range d.client.Events(ctx, api.RunRef{Ref: run.ID}, 0, false) {
		if err != nil {
			return err
		}
		if ev.Type == "TASK_LANDED" {
			lands = append(lands, ev.TS.Time)
			var p struct {
				Verified bool `json:"verified"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			if p.Verified {
				verified++
			}
		}
	}
	if len(lands) != n {
		return fmt.Errorf("%d lands recorded, want %d", len(lands), n)
	}
	span := lands[len(lands)-1].Sub(lands[0])
	fmt.Printf("RESULT land queue: %d independent tasks (4 task runs at a time) in %.1f s; %d lands (%d verified) from the first to the last in %.1f s: %.1f lands/s, %.0f ms per land\n",
		n, total.Seconds(), n, verified, span.Seconds(), float64(n-1)/span.Seconds(), ms(span)/float64(n-1))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// gitWorkspace is a workspace that is a git repository on main with files
// (and an empty .loop/config) committed.
func gitWorkspace(files map[string]string) (string, error) {
	ws, err := workspace()
	if err != nil {
		return "", err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	return ws, gitInit(ws)
}
