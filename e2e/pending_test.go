package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// A worktree run stopped while PENDING never had a worktree or a branch:
// land says so, not that its branch "no longer exists".
func TestLandOfAWorktreeRunStoppedWhilePending(t *testing.T) {
	e := newEnv(t)
	e.startDaemon("--max-concurrent-runs", "1")
	checkLog := e.landRepo()
	hold := filepath.Join(e.home, "hold")
	e.writeFile(".env", "CHECK_LOG="+checkLog+"\nHOLD="+hold+"\n", 0o600)
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	first := e.start("first")
	eventually(t, "the first agent to hold", 30*time.Second, func() bool {
		_, err := os.Stat(hold + ".waiting")
		return err == nil
	})
	second := e.start("second")
	if st := e.status(second).Status; st != api.RunPending {
		t.Fatalf("second run is %s, want PENDING behind the first", st)
	}
	e.must("stop", second)
	if code := e.wait(second); code != 3 {
		t.Fatalf("wait: exit %d, want 3 (INTERRUPTED)", code)
	}
	before := e.checkoutState()
	_, ref, code := e.landJSON(second)
	if code != 64 || ref.Kind != "branch_missing" {
		t.Fatalf("land: exit %d, refusal %+v", code, ref)
	}
	if strings.Contains(ref.Message, "no longer exists") || !strings.Contains(ref.Message, "never made") ||
		!strings.Contains(ref.Message, "INTERRUPTED") {
		t.Errorf("land refusal says %q, want that loopd never made the branch of the run stopped before it started", ref.Message)
	}
	if len(ref.Hand) != 0 {
		t.Errorf("land offers git commands for a branch that never was: %q", ref.Hand)
	}
	if e.checkoutState() != before {
		t.Fatal("a refused land changed the checkout")
	}
	os.Remove(hold)
	e.wait(first)
}
