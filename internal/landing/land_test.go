package landing

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/storage"
)

// A run whose base has not moved, and whose own last verification passed,
// fast-forwards its base branch to the run's last commit; the land is
// recorded once, and no intent is left behind.
func TestLandFastForwardRecordsTheLand(t *testing.T) {
	w := newWorld(t)
	w.verifier.commands = []string{"true"}
	run := w.worktreeRun("r1", api.StepSucceeded, false, "done.txt")
	tip := w.git(run.Worktree, "rev-parse", "HEAD")
	var progress progressLog
	res, err := w.lander.Land(t.Context(), run, LandOptions{Progress: progress.add})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != string(git.LandFastForward) || res.Commit != tip || !res.Verified || res.TestedCommit != tip || res.BaseMoved {
		t.Errorf("result %+v, want a verified fast-forward to %s", res, tip)
	}
	if got := w.git(w.checkout, "rev-parse", "main"); got != tip {
		t.Errorf("main is at %s, want %s", got, tip)
	}
	if _, err := os.Stat(filepath.Join(w.checkout, "done.txt")); err != nil {
		t.Errorf("the checkout lacks the run's file: %v", err)
	}
	if got := w.run("r1").LandedCommit; got != tip {
		t.Errorf("landed_commit %q, want %s", got, tip)
	}
	evs := w.landedEvents("r1")
	if len(evs) != 1 || !strings.Contains(evs[0], `"mode":"fast-forward"`) || !strings.Contains(evs[0], tip) {
		t.Errorf("RUN_LANDED events %q", evs)
	}
	if _, err := os.Stat(filepath.Join(w.home, "runs", "r1", landedIntentFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the land intent stays: %v", err)
	}
	for _, want := range []string{"landing loop/r1 into main in " + w.checkout, "the run's own last verification of " + shortCommit(tip) + " stands"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	if w.lander.Landing("r1") {
		t.Error("the run is still marked as being landed")
	}
}

// A --message on a fast-forward warns that it goes nowhere; --no-verify
// says the land was not verified and builds no verification.
func TestLandNoVerifyAndAMessageOnAFastForward(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", "", false, "done.txt")
	res, err := w.lander.Land(t.Context(), run, LandOptions{NoVerify: true, Message: "my words"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verified || res.Note != "not verified: --no-verify" || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "--message is not used") {
		t.Errorf("result %+v", res)
	}
	if w.verifier.calls != 0 {
		t.Errorf("--no-verify built the verification %d times", w.verifier.calls)
	}
	// A run without verify_command lands unverified, and says why.
	run2 := w.worktreeRun("r2", "", false, "other.txt")
	res, err = w.lander.Land(t.Context(), run2, LandOptions{Squash: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verified || res.Note != "not verified: the run has no verify_command" || res.Mode != string(git.LandSquash) {
		t.Errorf("result %+v", res)
	}
	msg := w.git(w.checkout, "log", "-1", "--format=%B", "main")
	if !strings.HasPrefix(msg, "make the change\n\nSquashed from branch loop/r2 (loop run r2).") {
		t.Errorf("squash message %q", msg)
	}
}

// When the base has moved, the combination is tested in the run's
// worktree: a pass merges; a failure refuses with the failing output and
// changes nothing. Either way the worktree ends on the run's branch and no
// land marker stays.
func TestLandTestsTheCombinationWhenTheBaseMoved(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", api.StepSucceeded, false, "done.txt")
	w.write(w.checkout, "user.txt", "the user's own work\n")
	w.commitAll(w.checkout, "user")

	w.verifier.commands = []string{"echo checking the merge", "test -f user.txt && test -f done.txt && echo the combination fails && exit 3"}
	before := w.checkoutState()
	_, err := w.lander.Land(t.Context(), run, LandOptions{})
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Kind != git.RefusedVerifyFailed || ref.RunID != "r1" || ref.Branch != "loop/r1" || ref.BaseBranch != "main" {
		t.Fatalf("Land = %v (%+v), want a verify_failed refusal of r1", err, ref)
	}
	if !strings.Contains(ref.OutputTail, "the combination fails") || !strings.Contains(ref.Message, "exit code 3") || len(ref.Hand) == 0 {
		t.Errorf("refusal %+v", ref)
	}
	if b, err := os.ReadFile(ref.LogPath); err != nil || !strings.Contains(string(b), "checking the merge") {
		t.Errorf("the verification's log %s: %q %v", ref.LogPath, b, err)
	}
	if api := ref.API(); api.Kind != "verify_failed" || api.OutputTail != ref.OutputTail || api.LogPath != ref.LogPath || api.RunID != "r1" {
		t.Errorf("API() = %+v", api)
	}
	if w.checkoutState() != before {
		t.Error("a refused land changed the checkout")
	}
	w.onBranch(run)

	w.verifier.commands = []string{"test -f user.txt && test -f done.txt"}
	var progress progressLog
	res, err := w.lander.Land(t.Context(), run, LandOptions{Progress: progress.add})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != string(git.LandMerge) || !res.Verified || !res.BaseMoved || res.TestedCommit == "" || res.Commit != w.git(w.checkout, "rev-parse", "main") {
		t.Errorf("result %+v", res)
	}
	if !strings.Contains(progress.String(), "main has moved since the run started") || !strings.Contains(progress.String(), "verify_command passed on the combination") {
		t.Errorf("progress:\n%s", progress.String())
	}
	w.onBranch(run)
}

// onBranch checks that the run's worktree is back on its branch and that
// no land marker is left.
func (w *world) onBranch(run storage.Run) {
	w.t.Helper()
	if br := w.git(run.Worktree, "symbolic-ref", "--short", "HEAD"); br != run.Branch {
		w.t.Errorf("the worktree is on %q, want %s", br, run.Branch)
	}
	if _, err := os.Stat(filepath.Join(w.home, "runs", run.ID, landMarkerFile)); !errors.Is(err, os.ErrNotExist) {
		w.t.Errorf("the land marker stays: %v", err)
	}
}

// Every refusal is a *Refusal of the run, with what the user must change,
// and leaves the checkout as it was.
func TestLandRefusals(t *testing.T) {
	w := newWorld(t)
	tests := []struct {
		name  string
		setup func() storage.Run
		kind  git.RefusalKind
		msg   string
	}{
		{"active", func() storage.Run { return w.worktreeRun("act", api.StepSucceeded, true, "a1.txt") },
			git.RefusedActive, "is PENDING: land it once it has ended"},
		{"in place", func() storage.Run {
			run := storage.Run{ID: "inplace", Workspace: w.checkout, Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunPending}
			w.insertRun(run, false, nil)
			return w.run("inplace")
		}, git.RefusedNotWorktree, "(loopctl diff inplace shows them)"},
		{"detached", func() storage.Run {
			run := w.worktreeRun("det", api.StepSucceeded, false, "d1.txt")
			run.BaseBranch = ""
			return run
		}, git.RefusedWrongBranch, "started from a detached HEAD"},
		{"untested", func() storage.Run { return w.worktreeRun("unt", api.StepFailed, false, "u1.txt") },
			git.RefusedUntested, "did not pass verification in the run"},
		{"untrusted env_file", func() storage.Run {
			w.verifier.err = &UntrustedEnvError{Err: errors.New("run env: env_file .env changed since it was trusted")}
			return w.worktreeRun("env", api.StepSucceeded, false, "e1.txt")
		}, git.RefusedUntrustedEnv, "verify_command cannot run: run env: env_file .env changed"},
		{"never started", func() storage.Run {
			// Stopped while PENDING: its worktree and branch were named,
			// never made.
			run := storage.Run{ID: "pend", Workspace: w.checkout, Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunPending,
				Isolation: "worktree", Worktree: filepath.Join(w.home, "worktrees", "pend"), Branch: "loop/pend", BaseBranch: "main",
				BaseCommit: w.git(w.checkout, "rev-parse", "HEAD")}
			w.insertRun(run, false, nil)
			return w.run("pend")
		}, git.RefusedBranchMissing, "ended INTERRUPTED before its first step: loopd never made its branch loop/pend"},
		{"branch deleted", func() storage.Run {
			w.verifier.err = nil
			run := w.worktreeRun("del", api.StepSucceeded, false, "b1.txt")
			w.git(w.checkout, "worktree", "remove", "--force", run.Worktree)
			w.git(w.checkout, "branch", "-D", run.Branch)
			return run
		}, git.RefusedBranchMissing, "recreate the branch, then land again"},
	}
	w.verifier.commands = []string{"true"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := tt.setup()
			before := w.checkoutState()
			res, err := w.lander.Land(t.Context(), run, LandOptions{})
			var ref *Refusal
			if !errors.As(err, &ref) || ref.Kind != tt.kind || !strings.Contains(ref.Message, tt.msg) {
				t.Fatalf("Land = %+v, %v; want a %s refusal saying %q", res, err, tt.kind, tt.msg)
			}
			if ref.RunID != run.ID || ref.Branch != run.Branch {
				t.Errorf("refusal of %q on %q, want %s on %s", ref.RunID, ref.Branch, run.ID, run.Branch)
			}
			if w.checkoutState() != before {
				t.Error("a refused land changed the checkout")
			}
		})
	}
}

// Lands into one repository are serialised, and a run is landed once at a
// time: the second is refused as busy, and changes nothing.
func TestLandIntoABusyRepositoryIsRefused(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", "", false, "done.txt")
	common := w.git(w.checkout, "rev-parse", "--path-format=absolute", "--git-common-dir")
	var held sync.Mutex
	held.Lock()
	w.lander.locks.Store(common, &held)
	_, err := w.lander.Land(t.Context(), run, LandOptions{})
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Kind != git.RefusedBusy || !strings.Contains(ref.Message, "another land into this repository") {
		t.Fatalf("Land into a busy repository = %v", err)
	}
	held.Unlock()
	w.lander.busy.Store("r1", struct{}{})
	if !w.lander.Landing("r1") {
		t.Fatal("Landing does not see the land under way")
	}
	if _, err := w.lander.Land(t.Context(), run, LandOptions{}); !errors.As(err, &ref) || ref.Message != "a land of this run is already under way" {
		t.Fatalf("a second land of the run = %v", err)
	}
	w.lander.busy.Delete("r1")
	if _, err := w.lander.Land(t.Context(), run, LandOptions{}); err != nil {
		t.Fatalf("the land once nothing else is under way: %v", err)
	}
}

// A land whose request is gone before git moves the checkout lands
// nothing and writes no intent.
func TestLandAbandonedWhenTheRequestEnds(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", "", false, "done.txt")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	before := w.checkoutState()
	_, err := w.lander.Land(ctx, run, LandOptions{})
	if err == nil || errors.As(err, new(*Refusal)) {
		t.Fatalf("Land with its context ended = %v, want an error that is no refusal", err)
	}
	if w.checkoutState() != before || len(w.landedEvents("r1")) != 0 {
		t.Error("an abandoned land changed something")
	}
}

func TestDefaultLandMessage(t *testing.T) {
	run := storage.Run{ID: "0123456789abcdef", Branch: "loop/01234567", BaseBranch: "main", Goal: "\n  fix the parser\nand more"}
	if got := defaultLandMessage(run, false); got != "Merge branch 'loop/01234567' into main\n\nloop run 0123456789abcdef" {
		t.Errorf("merge message %q", got)
	}
	if got := defaultLandMessage(run, true); !strings.HasPrefix(got, "fix the parser\n\n") {
		t.Errorf("squash message %q", got)
	}
	run.Name = strings.Repeat("x", 80)
	if got, _, _ := strings.Cut(defaultLandMessage(run, true), "\n"); got != strings.Repeat("x", 69)+"..." {
		t.Errorf("a long title %q", got)
	}
	run.Name, run.Goal = "", ""
	if got, _, _ := strings.Cut(defaultLandMessage(run, true), "\n"); got != "loop run 01234567" {
		t.Errorf("no title %q", got)
	}
}

func TestFileTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "land.log")
	if err := os.WriteFile(path, []byte("first line\nsecond line\nthird\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := fileTail(path, 16); got != "third\n" {
		t.Errorf("fileTail = %q, want the tail from a line start", got)
	}
	if got := fileTail(path, 1<<10); got != "first line\nsecond line\nthird\n" {
		t.Errorf("fileTail of a short file = %q", got)
	}
	if got := fileTail(filepath.Join(t.TempDir(), "none"), 10); got != "" {
		t.Errorf("fileTail of a missing file = %q", got)
	}
}

func TestLastVerification(t *testing.T) {
	impl := func(change string) storage.Step {
		st := storage.Step{Phase: api.PhaseImplementation, Status: api.StepSucceeded}
		st.ChangeCommit = change
		return st
	}
	verify := func(seq int, s api.StepStatus) storage.Step {
		return storage.Step{Seq: seq, Phase: api.PhaseVerification, Status: s}
	}
	tests := []struct {
		name  string
		steps []storage.Step
		want  bool
	}{
		{"passed last", []storage.Step{impl("a"), verify(2, api.StepSucceeded)}, true},
		{"failed last", []storage.Step{impl("a"), verify(2, api.StepSucceeded), impl("b"), verify(4, api.StepFailed)}, false},
		{"a change after the last pass", []storage.Step{impl("a"), verify(2, api.StepSucceeded), impl("b")}, false},
		{"no change after the last pass", []storage.Step{impl("a"), verify(2, api.StepSucceeded), impl("")}, true},
		{"review after the pass", []storage.Step{impl("a"), verify(2, api.StepSucceeded), {Phase: api.PhaseReview, Status: api.StepFailed}}, true},
		{"never verified", []storage.Step{impl("a")}, false},
		{"nothing", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := LastVerification(tt.steps); got != tt.want {
				t.Errorf("LastVerification = %v, want %v", got, tt.want)
			}
		})
	}
}

// When the base has moved the combination is tested in the run's
// worktree: a dirty or missing worktree is refused, and a land whose
// request ends during the verification kills it and lands nothing.
func TestLandTestingInTheWorktree(t *testing.T) {
	w := newWorld(t)
	dirty := w.worktreeRun("dirty", api.StepSucceeded, false, "a.txt")
	gone := w.worktreeRun("gone", api.StepSucceeded, false, "b.txt")
	held := w.worktreeRun("held", api.StepSucceeded, false, "c.txt")
	w.write(w.checkout, "user.txt", "the user's own work\n")
	w.commitAll(w.checkout, "user")
	w.write(dirty.Worktree, "a.txt", "edited by hand\n")
	w.git(w.checkout, "worktree", "remove", "--force", gone.Worktree)
	w.verifier.commands = []string{"true"}
	for run, kind := range map[string]git.RefusalKind{"dirty": git.RefusedDirty, "gone": git.RefusedWorktreeGone} {
		_, err := w.lander.Land(t.Context(), w.run(run), LandOptions{})
		var ref *Refusal
		if !errors.As(err, &ref) || ref.Kind != kind || len(ref.Hand) == 0 {
			t.Errorf("land of %s = %v, want a %s refusal", run, err, kind)
		}
	}

	started := filepath.Join(t.TempDir(), "started")
	w.verifier.commands = []string{"touch " + started + " && exec sleep 600"}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := w.lander.Land(ctx, held, LandOptions{Progress: func(s string) {
			if strings.HasPrefix(s, "running verify_command") {
				// Cancel once the verification has really begun.
				for {
					if _, err := os.Stat(started); err == nil {
						cancel()
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}})
		done <- err
	}()
	before := w.checkoutState()
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "land abandoned during verification, nothing landed") {
		t.Fatalf("Land cancelled mid-verification = %v", err)
	}
	if w.checkoutState() != before || len(w.landedEvents("held")) != 0 {
		t.Error("a land abandoned mid-verification changed something")
	}
	w.onBranch(held)
}
