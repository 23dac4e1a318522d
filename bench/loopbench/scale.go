package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

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
//
// The baseline, measured next in the same invocation: the same R loops of
// the same steps run by R plain shells, no daemon, each started at the
// same offset as its loopd run's first step (so their steps end in the
// same bursts). Its delays are what the machine itself takes to end one
// shell and start the next with R loops at once; the daemon's overhead is
// the difference.
func (b *bench) scale(runs, iters int, sleep time.Duration) error {
	agent := fmt.Sprintf("date +%%s%%N >> .t; sleep %g; date +%%s%%N >> .t", sleep.Seconds())
	d, err := b.startDaemon("", "--max-concurrent-runs", strconv.Itoa(runs))
	if err != nil {
		return err
	}
	defer d.stop()
	ctx := context.Background()
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
	cpu := cpuTime(d.cmd.Process.Pid)
	gaps, err := stepGaps(d.home)
	if err != nil {
		return err
	}
	var delays []time.Duration
	var firsts []int64
	for i, ws := range wss {
		ds, first, err := stepDelays(ws, iters)
		firsts = append(firsts, first)
		if err != nil {
			r, _ := d.client.GetRun(ctx, api.RunRef{Ref: ids[i]}, false)
			steps, _ := d.client.Steps(ctx, api.RunRef{Ref: ids[i]})
			var what []string
			for _, st := range steps {
				what = append(what, fmt.Sprintf("#%d %s %q", st.Seq, st.Status, st.Error))
			}
			return fmt.Errorf("%v; run %s %s %s: %s; steps %s", err, r.ID, r.Status, r.Reason,
				r.Description, strings.Join(what, ", "))
		}
		delays = append(delays, ds...)
	}
	fmt.Printf("%d runs × %d steps of %s in %s; the daemon used %s of CPU\n", runs, iters, sleep, took.Round(time.Millisecond), cpu)
	d.stop()
	offsets := make([]time.Duration, len(firsts))
	for i, f := range firsts {
		offsets[i] = time.Duration(f - slices.Min(firsts))
	}
	base, err := bareLoops(offsets, iters, agent)
	if err != nil {
		return err
	}
	fmt.Println(summarize("baseline: delay between steps of plain shell loops", base))
	fmt.Println(summarize("loopd: delay between steps", delays))
	fmt.Printf("loopd's own part of them (loopd_step_gap_seconds): %s\n", gaps)
	slices.Sort(delays)
	slices.Sort(base)
	at := func(p float64) (time.Duration, time.Duration) {
		if p == 1 {
			return delays[len(delays)-1], base[len(base)-1]
		}
		return percentile(delays, p), percentile(base, p)
	}
	var parts []string
	for _, q := range []struct {
		name string
		p    float64
	}{{"p50", 0.5}, {"p99", 0.99}, {"max", 1}} {
		l, bl := at(q.p)
		parts = append(parts, fmt.Sprintf("%s %s (baseline %s, overhead %s)", q.name, l.Round(100*time.Microsecond),
			bl.Round(100*time.Microsecond), (l-bl).Round(100*time.Microsecond)))
	}
	fmt.Printf("RESULT %d concurrent runs: step delay %s; the daemon's own gaps: %d of %d over 50ms (target: daemon overhead <= 50ms); daemon RSS peak %d MB (sampled %d MB) (target < 100 MB)\n",
		runs, strings.Join(parts, ", "), gaps.over(0.05), gaps.count, hwm>>10, peak>>10)
	return nil
}

// bareLoops runs the scale workload without loopd: one shell per run,
// started at its offset, running the agent command iters times, each in a
// shell of its own as a step is. It returns the delays between their
// steps.
func bareLoops(offsets []time.Duration, iters int, agent string) ([]time.Duration, error) {
	var wss []string
	defer func() {
		for _, ws := range wss {
			os.RemoveAll(ws)
		}
	}()
	var cmds []*exec.Cmd
	loop := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do /bin/sh -c "$AGENT"; i=$((i+1)); done`, iters)
	t0 := time.Now()
	for _, off := range offsets {
		time.Sleep(time.Until(t0.Add(off)))
		ws, err := os.MkdirTemp("", "lbbare")
		if err != nil {
			return nil, err
		}
		wss = append(wss, ws)
		cmd := exec.Command("/bin/sh", "-c", loop)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "AGENT="+agent)
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			return nil, fmt.Errorf("baseline loop: %v", err)
		}
	}
	var delays []time.Duration
	for _, ws := range wss {
		ds, _, err := stepDelays(ws, iters)
		if err != nil {
			return nil, err
		}
		delays = append(delays, ds...)
	}
	return delays, nil
}

// stepDelays reads the timestamps the steps of one run noted in ws/.t
// (start and end of each) and returns the delays between its steps and
// when its first step started (Unix nanoseconds).
func stepDelays(ws string, iters int) ([]time.Duration, int64, error) {
	b, err := os.ReadFile(filepath.Join(ws, ".t"))
	if err != nil {
		return nil, 0, err
	}
	var ts []int64
	for f := range strings.FieldsSeq(string(b)) {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %v", ws, err)
		}
		ts = append(ts, n)
	}
	if len(ts) != 2*iters {
		return nil, 0, fmt.Errorf("%s: %d timestamps, want %d", ws, len(ts), 2*iters)
	}
	var delays []time.Duration
	for i := 2; i < len(ts); i += 2 {
		delays = append(delays, time.Duration(ts[i]-ts[i-1]))
	}
	return delays, ts[0], nil
}

// gapHistogram is loopd_step_gap_seconds as scraped.
type gapHistogram struct {
	count   uint64
	sum     float64
	buckets []*dto.Bucket
}

// over returns how many gaps were longer than le seconds (le must be one
// of the histogram's bounds).
func (h gapHistogram) over(le float64) uint64 {
	for _, b := range h.buckets {
		if b.GetUpperBound() == le {
			return h.count - b.GetCumulativeCount()
		}
	}
	return h.count
}

func (h gapHistogram) String() string {
	var parts []string
	for _, b := range h.buckets {
		parts = append(parts, fmt.Sprintf("<=%gms %d", b.GetUpperBound()*1000, b.GetCumulativeCount()))
	}
	mean := time.Duration(0)
	if h.count > 0 {
		mean = time.Duration(h.sum / float64(h.count) * float64(time.Second))
	}
	return fmt.Sprintf("n=%d mean=%s; cumulative: %s", h.count, mean.Round(10*time.Microsecond), strings.Join(parts, ", "))
}

// stepGaps scrapes the daemon's /metrics over its socket for the step gap
// histogram.
func stepGaps(home string) (gapHistogram, error) {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(home, "loopd.sock"))
	}}}
	resp, err := c.Get("http://loopd/metrics")
	if err != nil {
		return gapHistogram{}, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return gapHistogram{}, fmt.Errorf("parse /metrics: %w", err)
	}
	f := fams["loopd_step_gap_seconds"]
	if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetHistogram() == nil {
		return gapHistogram{}, fmt.Errorf("/metrics has no loopd_step_gap_seconds histogram")
	}
	h := f.GetMetric()[0].GetHistogram()
	return gapHistogram{count: h.GetSampleCount(), sum: h.GetSampleSum(), buckets: h.GetBucket()}, nil
}
