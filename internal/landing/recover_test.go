package landing

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/supervise"
)

// A daemon died between git's fast-forward and its record: the intent
// names a commit the base branch holds, and Recover records the land,
// once. An intent whose commit never reached the branch, a torn one and
// one of an unknown run are dropped without a record.
func TestRecoverRecordsALandGitMadeBeforeTheDaemonDied(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", api.StepSucceeded, false, "done.txt")
	tip := w.git(run.Worktree, "rev-parse", "HEAD")
	intent := landedIntent{Checkout: w.checkout, BaseBranch: "main", Commit: tip, Payload: map[string]any{
		"run_id": "r1", "branch": run.Branch, "base_branch": "main", "commit": tip, "mode": "fast-forward"}}
	if err := writeJSONFile(filepath.Join(w.home, "runs", "r1", landedIntentFile), intent); err != nil {
		t.Fatal(err)
	}
	w.git(w.checkout, "merge", "-q", "--ff-only", run.Branch) // what git did before the daemon died

	never := w.worktreeRun("r2", api.StepSucceeded, false, "other.txt")
	notLanded := landedIntent{Checkout: w.checkout, BaseBranch: "main", Commit: w.git(never.Worktree, "rev-parse", "HEAD"), Payload: map[string]any{}}
	if err := writeJSONFile(filepath.Join(w.home, "runs", "r2", landedIntentFile), notLanded); err != nil {
		t.Fatal(err)
	}
	torn := filepath.Join(w.home, "runs", "r3", landedIntentFile)
	unknown := filepath.Join(w.home, "runs", "nosuchrun", landedIntentFile)
	for _, p := range []string{torn, unknown} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(torn, []byte(`{"checkout":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONFile(unknown, intent); err != nil {
		t.Fatal(err)
	}

	w.lander.Recover(t.Context())
	if evs := w.landedEvents("r1"); len(evs) != 1 || !strings.Contains(evs[0], tip) {
		t.Fatalf("RUN_LANDED after recovery: %q", evs)
	}
	if got := w.run("r1").LandedCommit; got != tip {
		t.Errorf("landed_commit %q, want %s", got, tip)
	}
	if evs := w.landedEvents("r2"); len(evs) != 0 {
		t.Errorf("a land that never happened was recorded: %q", evs)
	}
	for _, p := range []string{filepath.Join(w.home, "runs", "r1", landedIntentFile), filepath.Join(w.home, "runs", "r2", landedIntentFile), torn, unknown} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s stays: %v", p, err)
		}
	}
	// A second recovery, with the intent written again, records nothing
	// more: the run's landed commit is the intent's.
	if err := writeJSONFile(filepath.Join(w.home, "runs", "r1", landedIntentFile), intent); err != nil {
		t.Fatal(err)
	}
	w.lander.Recover(t.Context())
	if evs := w.landedEvents("r1"); len(evs) != 1 {
		t.Errorf("%d RUN_LANDED events after a second recovery, want 1", len(evs))
	}
}

// A daemon died while a land tested the combination: the worktree was
// left detached at the merge. Recover puts it back on the run's branch and
// removes the marker; nothing lands. A torn marker is removed.
func TestRecoverUndoesALandCutShort(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", api.StepSucceeded, false, "done.txt")
	w.git(run.Worktree, "switch", "-q", "--detach", "main")
	dir := filepath.Join(w.home, "runs", "r1")
	mark := landMarker{Tag: "loopd-land-r1-1", Worktree: run.Worktree, Branch: run.Branch, StatusPath: filepath.Join(dir, "land-exits")}
	if err := writeLandMarker(dir, mark); err != nil {
		t.Fatal(err)
	}
	tornDir := filepath.Join(w.home, "runs", "r2")
	if err := os.MkdirAll(tornDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tornDir, landMarkerFile), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The verification the dead daemon started still runs, under its tag.
	proc, err := supervise.Start(supervise.Spec{Dir: run.Worktree, Commands: []string{"sleep 600"}, Env: os.Environ(),
		LogPath: filepath.Join(dir, "land-1.log"), StatusPath: mark.StatusPath, Tag: mark.Tag})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Terminate(0) })
	if _, ok := supervise.Find(mark.Tag); !ok {
		t.Fatal("the verification cannot be found by its tag: the test proves nothing")
	}
	before := w.checkoutState()
	w.lander.Recover(t.Context())
	w.onBranch(run)
	if _, ok := supervise.Find(mark.Tag); ok {
		t.Error("the cut-short land's verification still runs")
	}
	if _, err := os.Stat(filepath.Join(tornDir, landMarkerFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the torn marker stays: %v", err)
	}
	if w.checkoutState() != before || len(w.landedEvents("r1")) != 0 {
		t.Error("undoing a cut-short land changed the checkout or recorded a land")
	}
}
