package landing

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// CleanRun removes an ended run's worktree and records it removed; its
// branch stays. An active run's worktree is refused with a conflict.
func TestCleanRunRemovesTheWorktreeAndKeepsTheBranch(t *testing.T) {
	w := newWorld(t)
	active := w.worktreeRun("act", "", true, "a.txt")
	if _, err := w.lander.CleanRun(t.Context(), active); !api.IsCode(err, api.CodeConflict) || !strings.Contains(err.Error(), "removed only once it has ended") {
		t.Fatalf("CleanRun of an active run = %v", err)
	}
	run := w.worktreeRun("r1", "", false, "done.txt")
	if d := w.lander.WorktreeDisk(t.Context()); d == nil || d.Count != 2 || d.Bytes == 0 || !d.Complete {
		t.Fatalf("disk of two worktrees = %+v", d)
	}
	res, err := w.lander.CleanRun(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 1 || res.Removed[0].Worktree != run.Worktree || res.Removed[0].Branch != "loop/r1" || len(res.Skipped) != 0 {
		t.Fatalf("clean result %+v", res)
	}
	if _, err := os.Stat(run.Worktree); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the worktree is still there: %v", err)
	}
	if got := w.git(w.checkout, "branch", "--list", "loop/r1"); !strings.Contains(got, "loop/r1") {
		t.Error("clean removed the run's branch")
	}
	if got := w.run("r1").WorktreeState; got != "removed" {
		t.Errorf("worktree_state %q, want removed", got)
	}
	// The cached disk measure was dropped: it counts one worktree now.
	if d := w.lander.WorktreeDisk(t.Context()); d == nil || d.Count != 1 {
		t.Errorf("disk after the clean = %+v", d)
	}
	// Cleaning again finds nothing to do.
	if res, err := w.lander.CleanRun(t.Context(), w.run("r1")); err != nil || len(res.Removed)+len(res.Skipped) != 0 {
		t.Errorf("a second clean = %+v, %v", res, err)
	}
}

// What clean must not remove is skipped with the reason: uncommitted
// changes, a land under way, a worktree git has on another branch, a
// record that points outside loopd's worktrees.
func TestCleanSkipsWhatItMustNotRemove(t *testing.T) {
	w := newWorld(t)
	dirty := w.worktreeRun("dirty", "", false, "a.txt")
	w.write(dirty.Worktree, "a.txt", "changed by hand\n")
	busy := w.worktreeRun("busy", "", false, "b.txt")
	w.lander.busy.Store("busy", struct{}{})
	moved := w.worktreeRun("moved", "", false, "c.txt")
	w.git(moved.Worktree, "switch", "-q", "-c", "elsewhere")
	foreign := filepath.Join(t.TempDir(), "foreign")
	w.git(w.checkout, "worktree", "add", "-q", "-b", "loop/foreign", foreign)
	run := storage.Run{ID: "foreign", Workspace: w.checkout, Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunPending,
		Isolation: "worktree", Worktree: foreign, Branch: "loop/foreign", BaseBranch: "main"}
	w.insertRun(run, false, nil)
	err := w.store.Write(t.Context(), func(tx *storage.Tx) error {
		return tx.RecordGitObject(storage.GitObject{RunID: "foreign", Kind: storage.GitWorktree, Repo: filepath.Join(w.checkout, ".git"), Name: foreign})
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.lander.CleanEnded(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 0 {
		t.Errorf("removed %+v", res.Removed)
	}
	reasons := map[string]string{}
	for _, s := range res.Skipped {
		reasons[s.RunID] = s.Reason
	}
	for id, want := range map[string]string{
		"dirty":   "uncommitted changes in a.txt",
		"busy":    "a land of this run is under way",
		"moved":   "git has it on branch elsewhere, not on the run's loop/moved",
		"foreign": "loopd removes only worktrees it made there",
	} {
		if !strings.Contains(reasons[id], want) {
			t.Errorf("%s skipped for %q, want %q", id, reasons[id], want)
		}
	}
	for _, dir := range []string{dirty.Worktree, busy.Worktree, moved.Worktree, foreign} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s was removed: %v", dir, err)
		}
	}
}

// A worktree removed by hand is marked gone (status says so at once), and
// clean then drops its record without touching git; a worktree whose
// whole repository was deleted is removed from disk.
func TestReconcileAndCleanAfterWorktreesWentAway(t *testing.T) {
	w := newWorld(t)
	byHand := w.worktreeRun("hand", "", false, "a.txt")
	w.git(w.checkout, "worktree", "remove", "--force", byHand.Worktree)
	if got := w.lander.NoticeGoneWorktree(t.Context(), byHand); got.WorktreeState != "gone" {
		t.Fatalf("NoticeGoneWorktree = %q, want gone", got.WorktreeState)
	}
	kept := w.worktreeRun("kept", "", false, "b.txt")
	if got := w.lander.NoticeGoneWorktree(t.Context(), kept); got.WorktreeState != "present" {
		t.Errorf("a present worktree is now %q", got.WorktreeState)
	}
	res, err := w.lander.CleanRun(t.Context(), w.run("hand"))
	if err != nil || len(res.Removed) != 1 || !res.Removed[0].Gone {
		t.Fatalf("clean of a gone worktree = %+v, %v", res, err)
	}

	// The repository itself is deleted: its worktree's directory goes too.
	other := newWorld(t)
	orphan := other.worktreeRun("orphan", "", false, "c.txt")
	if err := os.RemoveAll(other.checkout); err != nil {
		t.Fatal(err)
	}
	other.lander.Reconcile(t.Context(), "")
	if got := other.run("orphan").WorktreeState; got != "gone" {
		t.Errorf("after the repository was deleted the worktree is %q, want gone", got)
	}
	res, err = other.lander.CleanEnded(t.Context(), 0)
	if err != nil || len(res.Removed) != 1 {
		t.Fatalf("clean after the repository was deleted = %+v, %v", res, err)
	}
	if _, err := os.Stat(orphan.Worktree); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the orphaned worktree's directory stays: %v", err)
	}
}
