package scheduler

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/postmortem"
	"github.com/loopd/loopd/internal/storage"
)

// waitEnded waits, commit by commit, until every run in ids has left
// RUNNING and PENDING.
func waitEnded(t *testing.T, h *harness, commits <-chan struct{}, ids ...string) {
	t.Helper()
	for {
		done := true
		for _, id := range ids {
			run, err := h.store.Run(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if !run.Status.Terminal() {
				done = false
			}
		}
		if done {
			return
		}
		select {
		case <-commits:
		case <-t.Context().Done():
			t.Fatal("runs did not end")
		}
	}
}

// The scheduler itself: it recovers a run a previous daemon left RUNNING
// (with a step whose outcome was lost), claims a new PENDING one, drives
// both to their end, and writes their postmortems.
func TestSchedulerRecoversClaimsAndEnds(t *testing.T) {
	fx := newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{} })
	h := newHarness(t, fx)
	commits := make(chan struct{}, 1)
	h.store.SetNotifyRuns(func(int64, []string) {
		select {
		case commits <- struct{}{}:
		default:
		}
	})
	left := h.start("", "agent=command", "agent_command=agent", "max_iterations=2")
	recoverable(t, h, left, api.PhaseImplementation)
	run, _, err := h.s.CreateRun(context.Background(), api.CreateRunRequest{Workspace: t.TempDir(), Goal: "g",
		Set: []string{"agent=command", "agent_command=agent", "max_iterations=3"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- h.s.Run(ctx) }()
	waitEnded(t, h, commits, left, run.ID)
	cancel()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if got := statuses(h.steps(left)); got != "implementation:INTERRUPTED implementation:SUCCEEDED implementation:SUCCEEDED" {
		t.Errorf("recovered run's steps: %s", got)
	}
	if got := len(h.steps(run.ID)); got != 3 {
		t.Errorf("claimed run ran %d steps, want 3", got)
	}
	for _, id := range []string{left, run.ID} {
		md := filepath.Join(h.s.opts.Home, "runs", id, postmortem.MarkdownFile)
		if b, err := os.ReadFile(md); err != nil || !strings.Contains(string(b), "max_iterations") {
			t.Errorf("postmortem of %s: %v\n%s", id, err, b)
		}
	}
	if h.s.Active() != 0 {
		t.Errorf("%d runners left", h.s.Active())
	}
}

// KillSteps (daemon stop --kill-steps) cancels the running step, records
// it CANCELED, and leaves the run RUNNING for the next daemon.
func TestKillStepsLeavesTheRunRunning(t *testing.T) {
	fx := newFakeExec(t, func(_ api.Phase, seq int) fakeStep { return fakeStep{hold: seq == 1} })
	h := newHarness(t, fx)
	id := h.start("", "agent=command", "agent_command=agent", "max_iterations=3")
	go func() {
		<-fx.held
		h.s.KillSteps()
	}()
	run := h.drive(id, false)
	steps := h.steps(id)
	if run.Status != api.RunRunning || statuses(steps) != "implementation:CANCELED" ||
		steps[0].CancelCause != storage.CancelDaemonStop || steps[0].Error != errDaemonStop.Error() {
		t.Fatalf("run %s, steps %s (%s, %q)", run.Status, statuses(steps), steps[0].CancelCause, steps[0].Error)
	}
}

// A worktree run gets its worktree at its first step and records each
// implementation step as a commit on its branch; the user's checkout is
// never touched.
func TestWorktreeRunCommitsOnItsBranch(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git(ws, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(ws, "README"), []byte("x\n"), 0o644)
	git(ws, "add", "-A")
	git(ws, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "0")
	fx := newFakeExec(t, func(_ api.Phase, seq int) fakeStep {
		if seq == 1 {
			return fakeStep{files: map[string]string{"new.txt": "agent's work\n"}}
		}
		return fakeStep{}
	})
	h := newHarness(t, fx)
	id := h.start(ws, "agent=command", "agent_command=agent", "max_iterations=2", "isolation=worktree")
	run := h.drive(id, false)
	if run.Reason != "max_iterations:2" || run.WorktreeState != "present" {
		t.Fatalf("%s %q %s, worktree %q", run.Status, run.Reason, run.Description, run.WorktreeState)
	}
	steps := h.steps(id)
	if steps[0].ChangeCommit == "" || *steps[0].FilesChanged != 1 || steps[1].ChangeCommit != "" {
		t.Fatalf("ledger: %q %v, %q", steps[0].ChangeCommit, *steps[0].FilesChanged, steps[1].ChangeCommit)
	}
	if got := git(ws, "rev-parse", run.Branch); got != steps[0].ChangeCommit {
		t.Errorf("branch %s at %s, want the step's commit %s", run.Branch, got, steps[0].ChangeCommit)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Error("the agent's file appeared in the user's checkout")
	}
	// Removed by hand while the run was held: it ends with a clear reason.
	os.RemoveAll(run.Worktree)
	git(ws, "worktree", "prune")
	if err := h.s.Resume(context.Background(), id, []string{"max_iterations=5"}); err != nil {
		t.Fatal(err)
	}
	h.claim(id)
	run = h.drive(id, false)
	if run.Status != api.RunAborted || run.Reason != "fatal:worktree_gone" {
		t.Fatalf("after the worktree was removed: %s %q", run.Status, run.Reason)
	}
}

// A land's verification loads the run's env file as a step does, from a
// runner that no run drives: it must work without a run context.
func TestLandVerificationLoadsTheTrustedEnvFile(t *testing.T) {
	fx := newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{} })
	h := newHarness(t, fx)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, ".env"), []byte("LAND_SECRET=from-env-file\n"), 0o600)
	if _, err := h.s.Trust(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	id := h.start(ws, "agent=command", "agent_command=agent", "max_iterations=1", "verify_command=true")
	run, err := h.store.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	lv, err := h.s.LandVerification(context.Background(), run, ws, 1)
	if err != nil {
		t.Fatal(err)
	}
	if lookupEnv(lv.Env, "LAND_SECRET") != "from-env-file" || lookupEnv(lv.Env, "LOOP_WORKSPACE") != ws {
		t.Fatalf("land verification env lacks the env file or the workspace: %v", lv.Env[len(lv.Env)-8:])
	}
}
