package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// list: `loopctl list` of the newest 100 runs, on a home holding runs×steps
// persisted steps, against `loopctl daemon status` (GET /v1/daemon) in the
// same daemon, interleaved; the ratio is the measure (target <= 3).
func (b *bench) list(runs, steps, rounds int) error {
	if rounds < 2 {
		// The first round warms the caches and is not counted.
		return fmt.Errorf("-list-rounds %d: needs at least 2 (the first is a warm-up)", rounds)
	}
	t0 := time.Now()
	home, _, remove, err := generatedHome(runs, steps, 0)
	if err != nil {
		return err
	}
	defer remove()
	fmt.Printf("generated %d runs, %d steps in %s\n", runs, runs*steps, time.Since(t0).Round(time.Second))
	start := time.Now()
	d, err := b.startDaemon(home, "--log-level", "info")
	if err != nil {
		return err
	}
	defer d.stop()
	// The generated runs have no recorded aggregates (like runs from
	// before migration 0006): the daemon records them after it starts.
	answered := time.Since(start)
	for {
		log, _ := os.ReadFile(filepath.Join(home, "bench-daemon.log"))
		if strings.Contains(string(log), "recorded the aggregates of older runs") {
			break
		}
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("the daemon did not record the aggregates of the generated runs")
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("daemon answered after %s; aggregates of the %d older runs recorded after %s\n",
		answered.Round(time.Millisecond), runs, time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	var statusT, listT []time.Duration
	for i := range rounds {
		s := time.Now()
		if _, err := d.client.Ping(ctx); err != nil {
			return err
		}
		st := time.Since(s)
		s = time.Now()
		got, err := d.client.ListRuns(ctx, api.ListOptions{Limit: 100})
		if err != nil {
			return err
		}
		lt := time.Since(s)
		if len(got) != min(runs, 100) || got[0].Steps != steps {
			return fmt.Errorf("list returned %d runs, the first with %d steps", len(got), got[0].Steps)
		}
		if i > 0 { // the first round warms the caches
			statusT, listT = append(statusT, st), append(listT, lt)
		}
	}
	fmt.Println(summarize("API: GET /v1/daemon", statusT))
	fmt.Println(summarize("API: GET /v1/runs?limit=100", listT))
	// The same through the real loopctl, as a user runs them.
	var cliStatus, cliList []time.Duration
	env := append(os.Environ(), "LOOPD_HOME="+d.home, "LOOPCTL_NO_AUTOSTART=1")
	for i := range rounds {
		st, err := timeCmd(env, filepath.Join(b.bin, "loopctl"), "daemon", "status")
		if err != nil {
			return err
		}
		lt, err := timeCmd(env, filepath.Join(b.bin, "loopctl"), "list", "--all-workspaces", "--limit", "100")
		if err != nil {
			return err
		}
		if i > 0 {
			cliStatus, cliList = append(cliStatus, st), append(cliList, lt)
		}
	}
	fmt.Println(summarize("loopctl daemon status", cliStatus))
	fmt.Println(summarize("loopctl list --all-workspaces --limit 100", cliList))
	ratio := func(a, b []time.Duration) (time.Duration, time.Duration, float64) {
		slices.Sort(a)
		slices.Sort(b)
		pa, pb := percentile(a, 0.5), percentile(b, 0.5)
		return pa, pb, float64(pb) / float64(pa)
	}
	ps, pl, r := ratio(statusT, listT)
	cs, cl, cr := ratio(cliStatus, cliList)
	fmt.Printf("RESULT list of 100 runs with %d steps in all (target <= 3× daemon status): loopctl %s = %.1f× loopctl daemon status (%s); API %s = %.1f× GET /v1/daemon (%s)\n",
		runs*steps, cl.Round(100*time.Microsecond), cr, cs.Round(100*time.Microsecond),
		pl.Round(10*time.Microsecond), r, ps.Round(10*time.Microsecond))
	return nil
}

// timeCmd runs a command to its end and returns how long it took.
func timeCmd(env []string, name string, args ...string) (time.Duration, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	s := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%s %v: %v\n%s", name, args, err, out)
	}
	return time.Since(s), nil
}

// scale: R runs at once (--max-concurrent-runs R), each an agent that
// notes the time when it starts and when it ends and sleeps in between,
// for a few iterations. A step's delay is the time from the previous
// step's end (noted by its own command, before its shell exits) to the
// next step's start: what the daemon (and the machine's process
// creation) adds between two steps. Also the daemon's peak RSS.
func (b *bench) scale(runs, iters int, sleep time.Duration) error {
	d, err := b.startDaemon("", "--max-concurrent-runs", strconv.Itoa(runs))
	if err != nil {
		return err
	}
	defer d.stop()
	ctx := context.Background()
	agent := fmt.Sprintf("date +%%s%%N >> .t; sleep %g; date +%%s%%N >> .t", sleep.Seconds())
	var wss, ids []string
	defer func() {
		for _, ws := range wss {
			os.RemoveAll(ws)
		}
	}()
	t0 := time.Now()
	for range runs {
		ws, err := os.MkdirTemp("", "lbws")
		if err != nil {
			return err
		}
		wss = append(wss, ws)
		// Flags, not a .loop/config: what the user types needs no trust.
		run, err := d.client.CreateRun(ctx, api.CreateRunRequest{Workspace: ws, Goal: "scale", Set: []string{
			"agent=command", "agent_command=" + agent, "max_iterations=" + strconv.Itoa(iters),
			"max_consecutive_implementation_failures=0", "idle_timeout=0"}})
		if err != nil {
			return err
		}
		ids = append(ids, run.ID)
	}
	fmt.Printf("created %d runs in %s\n", runs, time.Since(t0).Round(time.Millisecond))
	var mu sync.Mutex
	peak := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			cur, _ := rss(d.cmd.Process.Pid)
			mu.Lock()
			peak = max(peak, cur)
			mu.Unlock()
		}
	})
	for _, id := range ids {
		if _, err := d.client.Wait(ctx, api.RunRef{Ref: id}); err != nil {
			return err
		}
	}
	took := time.Since(t0)
	close(stop)
	wg.Wait()
	_, hwm := rss(d.cmd.Process.Pid)
	var delays []time.Duration
	for i, ws := range wss {
		b, err := os.ReadFile(filepath.Join(ws, ".t"))
		if err != nil {
			return err
		}
		var ts []int64
		for f := range strings.FieldsSeq(string(b)) {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %v", ws, err)
			}
			ts = append(ts, n)
		}
		if len(ts) != 2*iters {
			r, _ := d.client.GetRun(ctx, api.RunRef{Ref: ids[i]}, false)
			steps, _ := d.client.Steps(ctx, api.RunRef{Ref: ids[i]})
			var what []string
			for _, st := range steps {
				what = append(what, fmt.Sprintf("#%d %s %q", st.Seq, st.Status, st.Error))
			}
			return fmt.Errorf("%s: %d timestamps, want %d; run %s %s %s: %s; steps %s", ws, len(ts), 2*iters, r.ID, r.Status, r.Reason,
				r.Description, strings.Join(what, ", "))
		}
		for i := 2; i < len(ts); i += 2 {
			delays = append(delays, time.Duration(ts[i]-ts[i-1]))
		}
	}
	fmt.Printf("%d runs × %d steps of %s in %s\n", runs, iters, sleep, took.Round(time.Millisecond))
	fmt.Println(summarize("delay between steps", delays))
	slices.Sort(delays)
	fmt.Printf("RESULT %d concurrent runs: step delay p50 %s p99 %s max %s (target max <= 50ms); daemon RSS peak %d MB (sampled %d MB) (target < 100 MB)\n",
		runs, percentile(delays, 0.5).Round(100*time.Microsecond), percentile(delays, 0.99).Round(100*time.Microsecond),
		delays[len(delays)-1].Round(100*time.Microsecond), hwm>>10, peak>>10)
	return nil
}
