package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// vmKB reads a field of /proc/<pid>/status in kB.
func vmKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// A step printing 100 MB — as lines and as one endless line — is written
// to its log file by the step itself and read back with bounded buffers:
// the daemon's memory does not grow with it, even while a follower
// streams it.
func TestHugeOutputKeepsDaemonMemoryBounded(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command",
		`agent_command=head -c 50000000 /dev/zero | tr '\0' 'x' | fold -w 300; head -c 50000000 /dev/zero | tr '\0' 'y'; echo; echo "<promise>COMPLETE</promise>"`,
		`verify_command=head -c 20000000 /dev/zero | tr '\0' 'z' | fold -w 100; echo "ok  huge"`)
	pid := e.daemon.Process.Pid
	base := vmKB(t, pid, "VmRSS")
	id := e.start("goal")
	follow := e.follow(id) // an events follower, plus a log follower below
	logs := e.loopctl("logs", id, "--follow")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	follow.events(t)
	if len(logs.stdout) < 120_000_000 {
		t.Errorf("logs --follow delivered %d bytes, want all ~120 MB", len(logs.stdout))
	}
	peak := vmKB(t, pid, "VmHWM")
	growth := peak - base
	limit := 40 << 10 // kB
	if raceEnabled {
		limit *= 4 // the race detector's shadow memory
	}
	t.Logf("daemon RSS: %d kB at start, peak %d kB (+%d kB) for 120 MB of output", base, peak, growth)
	if growth > limit {
		t.Errorf("daemon memory grew by %d kB while steps printed 120 MB (limit %d kB)", growth, limit)
	}
}

// 100 runs at once complete with correct results, and list/status answer
// meanwhile.
func TestHundredConcurrentRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("100 runs")
	}
	e := newEnv(t)
	e.startDaemon("--max-concurrent-runs", "100")
	const n = 100
	agent := e.fakeAgent("FAKE_DONE_AT=2")
	ids := make([]string, n)
	for i := range n {
		ws := filepath.Join(e.ws, fmt.Sprintf("ws%03d", i))
		for _, f := range []string{".loop/config", ".env"} {
			src := map[string]string{
				".loop/config": strings.Join([]string{"agent=command", agent, verifyDone}, "\n") + "\n",
				".env":         "FAKE_DONE_AT=2\n",
			}[f]
			if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, f), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ids[i] = e.start("-C", ws, "goal "+strconv.Itoa(i))
	}
	// Clients keep working while the runs execute.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for j := range 10 {
				if r := e.loopctl("status", ids[j*7%n], "--json"); r.code != 0 {
					t.Errorf("status under load: exit %d %s", r.code, r.stderr)
				}
				if r := e.loopctl("list", "--all-workspaces", "--limit", "100", "--json"); r.code != 0 {
					t.Errorf("list under load: exit %d %s", r.code, r.stderr)
				}
			}
		})
	}
	wg.Wait()
	for i, id := range ids {
		if code := e.wait(id); code != 0 {
			t.Errorf("run %d: wait exit %d", i, code)
			continue
		}
	}
	for i, id := range ids {
		r := e.status(id)
		if r.Status != api.RunCompleted || r.Iteration != 2 || r.Steps != 4 || r.Usage.InputTokens != 2000 {
			t.Errorf("run %d = %s, iteration %d, %d steps, %d input tokens", i, r.Status, r.Iteration, r.Steps, r.Usage.InputTokens)
		}
	}
}
