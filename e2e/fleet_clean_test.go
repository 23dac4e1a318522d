package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// A fleet run's worktrees are on its workers, and each worker removes its
// own: the worker a run was taken over from (kill -9) removes its stale
// worktree, and the run's branch in its mirror, when it returns — while
// the taker's worktree, where the run's step is live, is untouched and
// the run completes there; `loopctl clean` of the ended run (through
// LOOPD_URL) then has the taker remove its worktree at its next sweep.
// The branch on the repository stays.
func TestFleetCleanRemovesWorktreesOnWorkers(t *testing.T) {
	f := newFleet(t, 3)
	id, remote, _ := f.gitFleetRun("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=2", "FAKE_DONE_AT=3")
	f.start(1)
	f.start(2)
	api0 := f.workers[0]
	branch := "loop/" + id[:8]
	wt := func(i int) string { return filepath.Join(f.workers[i].home, "worktrees", id) }
	runsIteration2 := func(i int) bool {
		b, _ := os.ReadFile(filepath.Join(wt(i), ".agent-invocations"))
		return strings.Contains("\n"+string(b), "\n2 ")
	}
	holder := 0
	eventually(t, "iteration 2's agent to start", 60*time.Second, func() bool {
		for i := 1; i <= 2; i++ {
			if runsIteration2(i) {
				holder = i
				return true
			}
		}
		return false
	})
	taker := 3 - holder
	f.workers[holder].killDaemon()
	eventually(t, "the other worker to redo iteration 2", fleetTTL+fleetScan+60*time.Second, func() bool { return runsIteration2(taker) })
	if _, err := os.Stat(wt(holder)); err != nil {
		t.Fatalf("the killed worker's worktree is not there (%v): the test proves nothing", err)
	}
	mirrorBranch := func(i int) bool {
		out, _ := exec.Command("sh", "-c", "git --git-dir=\"$0\" rev-parse -q --verify refs/heads/"+branch,
			mirrorOf(t, f.workers[i].home)).Output()
		return strings.TrimSpace(string(out)) != ""
	}
	if !mirrorBranch(holder) {
		t.Fatal("the killed worker's mirror has no run branch: the test proves nothing")
	}

	// The killed worker returns: its stale worktree goes at its first
	// scan; the taker's live one stays.
	f.start(holder)
	returned := time.Now()
	// The worktree goes first, then the branch its worktree had out.
	eventually(t, "the returned worker to remove its stale worktree and its mirror's run branch", 30*time.Second, func() bool {
		_, err := os.Stat(wt(holder))
		return os.IsNotExist(err) && !mirrorBranch(holder)
	})
	t.Logf("the returned worker removed its stale worktree %s after it started", time.Since(returned).Round(time.Millisecond))
	if !runsIteration2(taker) {
		t.Fatal("the taker's worktree was touched")
	}
	if err := os.WriteFile(filepath.Join(wt(taker), "go-2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to complete", 60*time.Second, func() bool { return api0.status(id).Status == api.RunCompleted })
	if _, err := os.Stat(wt(taker)); err != nil {
		t.Fatalf("the taker's worktree of the ended run, not cleaned, is gone: %v", err)
	}

	// loopctl clean, through LOOPD_URL: the taker removes it.
	cleaned := time.Now()
	r := f.user.loopctlAt(t.TempDir(), f.userEnv, "clean", id)
	if r.code != 0 || !strings.Contains(r.stdout, "removes it at its next sweep") {
		t.Fatalf("loopctl clean %s: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
	}
	if st := api0.status(id); st.WorktreeState != "removed" {
		t.Fatalf("after clean, worktree_state %q", st.WorktreeState)
	}
	eventually(t, "the taker to remove the cleaned run's worktree, and its mirror's record of it", fleetTTL+fleetScan+15*time.Second, func() bool {
		_, err := os.Stat(wt(taker))
		return os.IsNotExist(err) && !mirrorBranch(taker) &&
			!strings.Contains(gitIn(t, mirrorOf(t, f.workers[taker].home), "worktree", "list", "--porcelain"), id)
	})
	t.Logf("the taker removed the cleaned run's worktree %s after loopctl clean (lease TTL %s)", time.Since(cleaned).Round(time.Millisecond), fleetTTL)
	gitIn(t, remote, "rev-parse", "--verify", "refs/heads/"+branch) // the repository keeps the branch
	if r := f.user.loopctlAt(t.TempDir(), f.userEnv, "clean", id); r.code != 0 || !strings.Contains(r.stdout, "cleaned already") {
		t.Fatalf("second clean: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// mirrorOf is the one mirror in a worker's LOOPD_HOME.
func mirrorOf(t *testing.T, home string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(home, "mirrors", "*.git"))
	if len(m) != 1 {
		t.Fatalf("mirrors in %s: %v, want one", home, m)
	}
	return m[0]
}
