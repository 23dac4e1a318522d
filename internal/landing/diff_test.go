package landing

import (
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// The ranges a diff compares, from the change ledger: one iteration
// against the previous ledger point (the base for the first), the whole
// run against its base; a missing iteration is not found, one that
// changed nothing compares nothing.
func TestDiffRangeOfAWorktreeRun(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", api.StepSucceeded, false, "one.txt", "two.txt")
	c1 := w.git(run.Worktree, "rev-parse", "HEAD~1")
	c2 := w.git(run.Worktree, "rev-parse", "HEAD")
	it := func(n int) *int { return &n }
	tests := []struct {
		name      string
		iteration *int
		from, to  string
	}{
		{"first iteration", it(1), run.BaseCommit, c1},
		{"second iteration", it(2), c1, c2},
		{"whole run", nil, run.BaseCommit, c2},
	}
	for _, tt := range tests {
		from, to, err := w.lander.DiffRange(t.Context(), run, tt.iteration)
		if err != nil || from != tt.from || to != tt.to {
			t.Errorf("%s: %s..%s, %v; want %s..%s", tt.name, from, to, err, tt.from, tt.to)
		}
	}
	if _, _, err := w.lander.DiffRange(t.Context(), run, it(3)); !api.IsCode(err, api.CodeNotFound) {
		t.Errorf("iteration 3 of 2: %v", err)
	}
	st, err := DiffStat(t.Context(), run, nil, run.BaseCommit, c2)
	if err != nil || st.FilesChanged != 2 || st.Insertions != 2 || st.Deletions != 0 || len(st.Files) != 2 || st.From != run.BaseCommit || st.To != c2 {
		t.Errorf("DiffStat = %+v, %v", st, err)
	}
	if st, err := DiffStat(t.Context(), run, it(1), "", ""); err != nil || st.FilesChanged != 0 || st.Files == nil {
		t.Errorf("DiffStat of nothing = %+v, %v", st, err)
	}

	// A run that committed nothing compares nothing.
	idle := w.worktreeRun("idle", api.StepSucceeded, false)
	if from, to, err := w.lander.DiffRange(t.Context(), idle, nil); err != nil || to != "" || from != "" {
		t.Errorf("an idle run: %q..%q, %v", from, to, err)
	}
	// Its branch deleted, a run whose commits are gone says so.
	w.git(w.checkout, "worktree", "remove", "--force", run.Worktree)
	w.git(w.checkout, "branch", "-D", run.Branch)
	w.git(w.checkout, "reflog", "expire", "--expire=now", "--all")
	w.git(w.checkout, "gc", "-q", "--prune=now")
	if _, _, err := w.lander.DiffRange(t.Context(), run, nil); !api.IsCode(err, api.CodeConflict) {
		t.Errorf("a run whose commits are gone: %v", err)
	}
}

// An in-place run compares its baseline snapshot with its newest one; a
// workspace outside git has no ledger.
func TestDiffRangeInPlaceAndOutsideGit(t *testing.T) {
	w := newWorld(t)
	base := w.git(w.checkout, "rev-parse", "HEAD")
	w.git(w.checkout, "update-ref", "refs/loop/ip/0", base)
	w.write(w.checkout, "a.txt", "changed in place\n")
	snap := w.commitAll(w.checkout, "snapshot")
	run := storage.Run{ID: "ip", Workspace: w.checkout, Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunPending}
	w.insertRun(run, false, []stepSpec{{api.PhaseImplementation, 1, api.StepSucceeded, snap}})
	from, to, err := w.lander.DiffRange(t.Context(), w.run("ip"), nil)
	if err != nil || from != base || to != snap {
		t.Errorf("in place: %s..%s, %v; want %s..%s", from, to, err, base, snap)
	}
	one := 1
	if from, to, err := w.lander.DiffRange(t.Context(), w.run("ip"), &one); err != nil || from != base || to != snap {
		t.Errorf("in place, iteration 1: %s..%s, %v", from, to, err)
	}

	outside := storage.Run{ID: "out", Workspace: t.TempDir(), Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunPending}
	w.insertRun(outside, false, nil)
	if _, _, err := w.lander.DiffRange(t.Context(), w.run("out"), nil); !api.IsCode(err, api.CodeConflict) {
		t.Errorf("outside git: %v", err)
	}
}
