package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/fakemodel"
)

// TestRealClaudeSharedUsageLimit: two runs of the real Claude Code CLI
// share one (fake) subscription. The first hits its usage limit; the
// second, started after, waits for the same reset without sending the
// model API a single request, names the run it shares the limit with, and
// keeps waiting across a daemon kill -9.
func TestRealClaudeSharedUsageLimit(t *testing.T) {
	e, a, srv := newRealEnv(t, "claude")
	a.subscription()
	e.writeFile(".env", strings.Join(a.vars, "\n")+"\n", 0o600)
	a.preset(e)
	reset := time.Now().Add(90 * time.Minute).Truncate(time.Second)
	srv.SetDefault(fakemodel.Turn{Status: 429, ResetsAt: reset})
	first := e.start("Finish the work.")
	eventually(t, "the first run to WAIT usage_limit", 60*time.Second, func() bool { return countWaits(e.events(first), "usage_limit") > 0 })
	if r := e.status(first); !r.WaitUntil.Equal(reset) {
		t.Fatalf("first run until %v, want %v", r.WaitUntil.Time, reset)
	}
	sent := len(srv.Requests())
	if sent == 0 {
		t.Fatal("the first run sent no request")
	}

	// A second workspace with the same credentials (the same .env: HOME,
	// token) and the same preset.
	ws2 := t.TempDir()
	if out, err := exec.Command("git", "-C", ws2, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	e.writeFileIn(ws2, ".env", strings.Join(a.vars, "\n")+"\n")
	e.writeFileIn(ws2, ".loop/config", strings.Join([]string{"agent=claude", "model=" + a.model, "completion=promise",
		"step_timeout=2m", "idle_timeout=1m"}, "\n")+"\n")
	second := e.start("-C", ws2, "Finish the other work.")
	var r api.Run
	eventually(t, "the second run to WAIT usage_limit", 30*time.Second, func() bool {
		r = e.status(second)
		return r.Status == api.RunWaiting
	})
	if r.Reason != "usage_limit" || !r.WaitUntil.Equal(reset) || !strings.Contains(r.Description, "shares the usage limit of run "+first[:8]) {
		t.Fatalf("second run: %s %q until %v: %s", r.Status, r.Reason, r.WaitUntil.Time, r.Description)
	}
	if out := e.must("status", second); !strings.Contains(out, first[:8]) {
		t.Errorf("status does not name the run it shares the limit with:\n%s", out)
	}
	if n := len(srv.Requests()); n != sent {
		t.Fatalf("the second run sent %d request(s) to the model API before the reset", n-sent)
	}
	if steps := e.steps(second); len(steps) != 0 {
		t.Fatalf("the second run ran %d step(s): %+v", len(steps), steps)
	}

	// Persisted: a daemon killed and started again keeps both waits, and
	// sends nothing.
	e.killDaemon()
	e.startDaemon("--api-backoff", "1s")
	if r := e.status(second); r.Status != api.RunWaiting || !r.WaitUntil.Equal(reset) {
		t.Fatalf("after kill -9: %s until %v", r.Status, r.WaitUntil.Time)
	}
	// The planner's check is what holds it: resumed by hand before the
	// reset, the second run goes straight back to waiting, still without a
	// request.
	e.must("resume", second)
	eventually(t, "the resumed run to WAIT again", 30*time.Second, func() bool {
		return countWaits(e.events(second), "usage_limit") >= 2
	})
	if n := len(srv.Requests()); n != sent {
		t.Fatalf("after a resume the second run sent %d request(s) before the reset", n-sent)
	}
	if r := e.status(second); r.Status != api.RunWaiting || !r.WaitUntil.Equal(reset) {
		t.Fatalf("resumed: %s until %v", r.Status, r.WaitUntil.Time)
	}
	e.must("stop", first, "--now")
	e.must("stop", second, "--now")
}
