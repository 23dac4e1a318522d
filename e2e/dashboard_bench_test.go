package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loopd/loopd/internal/api"
)

// BenchmarkDashboardFirstRender measures, in headless chromium, the time to
// first contentful paint of the runs page with 100 runs and of a run's
// page, against the daemon's smallest page (a refused login: no script, no
// style) loaded in the same browser as the baseline. Pages load over
// loopback from the real loopd.
//
//	go test ./e2e -run '^$' -bench DashboardFirstRender -benchtime 20x
func BenchmarkDashboardFirstRender(b *testing.B) {
	home, err := os.MkdirTemp("", "lh")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(home) })
	ws := b.TempDir()
	environ := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LOOPD_HOME=" + home, "LOOPCTL_NO_AUTOSTART=1"}
	daemon := exec.Command(filepath.Join(binDir, "loopd"), "--http", "127.0.0.1:0", "--max-concurrent-runs", "8")
	daemon.Env = environ
	if err := daemon.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = daemon.Process.Signal(syscall.SIGTERM); _ = daemon.Wait() })
	loopctl := func(args ...string) string {
		for {
			cmd := exec.Command(filepath.Join(binDir, "loopctl"), args...)
			cmd.Env = environ
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 69 { // the daemon is still starting
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if err != nil {
				b.Fatalf("loopctl %v: %v\n%s", args, err, errb.String())
			}
			return strings.TrimSpace(out.String())
		}
	}
	agent, _ := filepath.Abs("testdata/agents/claude.sh")
	var last string
	for i := range 100 {
		dir := filepath.Join(ws, fmt.Sprintf("ws%03d", i))
		if err := os.MkdirAll(filepath.Join(dir, ".loop"), 0o755); err != nil {
			b.Fatal(err)
		}
		_ = os.WriteFile(filepath.Join(dir, ".loop/config"), []byte("agent=command\nagent_command="+agent+"\nmax_cost=5\n"), 0o644)
		_ = os.WriteFile(filepath.Join(dir, ".env"), []byte("FAKE_DONE_AT=1\n"), 0o600)
		loopctl("trust", "-C", dir)
		last = loopctl("start", "-C", dir, fmt.Sprintf("goal number %d: make the parser handle quoted fields", i))
	}
	loopctl("wait", last, "--timeout", "120s")
	var login api.DashboardLogin
	if err := json.Unmarshal([]byte(loopctl("dashboard", "--json")), &login); err != nil {
		b.Fatal(err)
	}
	br := newBrowser(b)
	br.run("log in", chromedp.Navigate(login.URL), chromedp.WaitVisible(`body[data-page="runs"]`, chromedp.ByQuery))
	base := strings.Split(login.URL, "/login")[0]
	pages := []struct{ name, path, ready string }{
		{"baseline", "/login?code=none", "#refused"},
		{"runs", "/", "#run-" + last},
		{"run", "/runs/" + last, "#it-1"},
	}
	fcp := make([]float64, len(pages))
	for b.Loop() {
		for i, p := range pages {
			var ms float64
			br.run("load "+p.name, chromedp.Navigate(base+p.path), chromedp.WaitVisible(p.ready, chromedp.ByQuery),
				chromedp.Poll(`(() => { const e = performance.getEntriesByName("first-contentful-paint")[0]; return e ? e.startTime : 0; })()`,
					&ms, chromedp.WithPollingTimeout(10*time.Second)))
			fcp[i] += ms
		}
	}
	n := float64(b.N)
	b.ReportMetric(fcp[0]/n, "baseline-fcp-ms")
	b.ReportMetric(fcp[1]/n, "runs100-fcp-ms")
	b.ReportMetric(fcp[2]/n, "run-fcp-ms")
	b.ReportMetric(fcp[1]/fcp[0], "runs100/baseline")
	b.ReportMetric(fcp[2]/fcp[0], "run/baseline")
}
