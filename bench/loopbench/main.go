// Command loopbench measures loopd against its performance targets
// (BENCHMARKS.md) by driving the real loopd binary over its API. Every
// measure is taken against a baseline in the same invocation where one
// exists, because the machines it runs on are shared and noisy.
//
//	loopbench -bin DIR overhead|latency|startup|concurrent|memory|list|scale|baseline|all
//
// bench/run.sh builds the binaries and runs everything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loopd/loopd/internal/api"
)

func main() {
	bin := flag.String("bin", "", "directory holding the loopd binary")
	iterations := flag.Int("iterations", 300, "overhead: iterations of the no-op loop")
	rounds := flag.Int("rounds", 3, "overhead: alternating rounds of baseline and loopd")
	inGit := flag.Bool("git", false, "overhead: the workspace is a git repository of two committed files (each implementation step is recorded in the change ledger)")
	events := flag.Int("events", 1000, "latency: events to time")
	runs := flag.Int("runs", 1000, "startup: persisted runs")
	stepsPerRun := flag.Int("steps", 1000, "startup: persisted steps per run")
	running := flag.Int("running", 10, "startup: runs left RUNNING")
	concurrent := flag.Int("concurrent", 100, "concurrent: runs at once")
	listRuns := flag.Int("list-runs", 100, "list: persisted runs")
	listSteps := flag.Int("list-steps", 10_000, "list: persisted steps per run")
	listRounds := flag.Int("list-rounds", 21, "list: interleaved rounds of daemon status and list")
	scaleRuns := flag.Int("scale-runs", 1000, "scale: runs at once")
	scaleIters := flag.Int("scale-iterations", 3, "scale: steps per run")
	scaleSleep := flag.Duration("scale-sleep", 10*time.Second, "scale: how long each step sleeps")
	backlogTasks := flag.Int("backlog-tasks", 50, "backlog: tasks of the backlog (and separate runs)")
	backlogRounds := flag.Int("backlog-rounds", 1, "backlog: alternating rounds of separate runs and a backlog")
	baselineRounds := flag.Int("baseline-rounds", 21, "baseline: paired runs without and with verify_baseline")
	tmp := flag.String("tmp", "", "directory for LOOPD_HOMEs and workspaces (default $TMPDIR); e.g. /dev/shm to take the disk out of the measure")
	flag.Parse()
	if *tmp != "" {
		os.Setenv("TMPDIR", *tmp)
	}
	if *bin == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: loopbench -bin DIR overhead|latency|startup|concurrent|memory|list|scale|baseline|backlog|all")
		os.Exit(64)
	}
	b := &bench{bin: *bin}
	measures := map[string]func() error{
		"overhead":   func() error { return b.overhead(*iterations, *rounds, *inGit) },
		"latency":    func() error { return b.latency(*events) },
		"startup":    func() error { return b.startup(*runs, *stepsPerRun, *running) },
		"concurrent": func() error { return b.concurrent(*concurrent) },
		"memory":     b.memory,
		"list":       func() error { return b.list(*listRuns, *listSteps, *listRounds) },
		"scale":      func() error { return b.scale(*scaleRuns, *scaleIters, *scaleSleep) },
		"baseline":   func() error { return b.baselineCost(*baselineRounds) },
		"backlog":    func() error { return b.backlog(*backlogTasks, *backlogRounds) },
	}
	order := []string{"overhead", "latency", "startup", "concurrent", "memory", "list", "scale", "baseline", "backlog"}
	if name := flag.Arg(0); name != "all" {
		if _, ok := measures[name]; !ok {
			fmt.Fprintf(os.Stderr, "unknown measure %q\n", name)
			os.Exit(64)
		}
		order = []string{name}
	}
	for _, name := range order {
		fmt.Printf("== %s\n", name)
		if err := measures[name](); err != nil {
			fmt.Fprintf(os.Stderr, "loopbench %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}

type bench struct{ bin string }

// daemon is a loopd started for one measure, in its own home.
type daemon struct {
	home   string
	cmd    *exec.Cmd
	client *api.Client
}

func (b *bench) startDaemon(home string, args ...string) (*daemon, error) {
	if home == "" {
		var err error
		if home, err = os.MkdirTemp("", "lb"); err != nil {
			return nil, err
		}
	}
	logf, err := os.Create(filepath.Join(home, "bench-daemon.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	if prof := os.Getenv("LOOPBENCH_CPUPROFILE"); prof != "" {
		// Profile the daemon of the measure (the last one started wins).
		args = append(args, "--cpuprofile", prof)
	}
	cmd := exec.Command(filepath.Join(b.bin, "loopd"), append([]string{"--home", home, "--log-level", "warn"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "LOOPD_HOME="+home)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{home: home, cmd: cmd, client: api.NewClient(filepath.Join(home, "loopd.sock"))}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := d.client.Ping(context.Background()); err == nil {
			return d, nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	d.stop()
	return nil, errors.New("loopd did not answer")
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
	os.RemoveAll(d.home)
}

// workspace writes a workspace with the given .loop/config lines.
func workspace(lines ...string) (string, error) {
	ws, err := os.MkdirTemp("", "lbws")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(ws, ".loop"), 0o755); err != nil {
		return "", err
	}
	return ws, os.WriteFile(filepath.Join(ws, ".loop", "config"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// rss reads VmRSS and VmHWM of a process, in kB.
func rss(pid int) (cur, peak int) {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmRSS:":
			cur = n
		case "VmHWM:":
			peak = n
		}
	}
	return cur, peak
}

// cpuTime is the CPU time (user and system) process pid has used so far,
// from /proc/<pid>/stat, in clock ticks of 10 ms.
func cpuTime(pid int) time.Duration {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// childrenCPUTime is the CPU time of process pid's children that it has
// waited for (cutime and cstime): for the daemon, its steps' shells and
// its git commands.
func childrenCPUTime(pid int) time.Duration {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0
	}
	cutime, _ := strconv.Atoi(f[13])
	cstime, _ := strconv.Atoi(f[14])
	return time.Duration(cutime+cstime) * 10 * time.Millisecond
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func summarize(name string, ds []time.Duration) string {
	slices.Sort(ds)
	return fmt.Sprintf("%s: n=%d p50=%s p90=%s p99=%s max=%s", name, len(ds),
		percentile(ds, 0.50).Round(10*time.Microsecond), percentile(ds, 0.90).Round(10*time.Microsecond),
		percentile(ds, 0.99).Round(10*time.Microsecond), ds[len(ds)-1].Round(10*time.Microsecond))
}
