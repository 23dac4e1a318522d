package git

import (
	"context"
	"path/filepath"
	"testing"
)

// What moved a fleet run's branch past its recorded push decides whether
// the run's owner may set it back: ledger commits of the run from an older
// lease epoch (a worker that lost the run pushed late) yes; a person's
// commit, another run's, one of the owner's own epoch, or a history that
// does not descend from the recorded push, never.
func TestStalePushToldFromSomeoneElses(t *testing.T) {
	url, _, base := remote(t)
	ctx := context.Background()
	m := Mirrors{Dir: t.TempDir()}
	wt := filepath.Join(t.TempDir(), "wt")
	if _, err := m.AddRunWorktree(ctx, RunWorktree{URL: url, Path: wt, Branch: "loop/r", Start: base}); err != nil {
		t.Fatal(err)
	}
	ledger := func(run string, epoch int64, seq, n int) string {
		t.Helper()
		write(t, wt, "f.txt", run+string(rune('a'+seq)))
		l := &Ledger{Dir: wt, RunID: run, Short: "r", Epoch: epoch}
		ch, err := l.CommitWorktree(ctx, seq, n, gitT(t, wt, "rev-parse", "HEAD"))
		if err != nil || ch.Commit == "" {
			t.Fatalf("ledger commit: %+v, %v", ch, err)
		}
		return ch.Commit
	}
	pushed := ledger("run1", 1, 1, 1) // recorded as pushed by the run
	ledger("run1", 1, 2, 2)           // epoch 1's worker, after it lost the run
	stale2 := ledger("run1", 1, 3, 3)
	mine := ledger("run1", 2, 4, 2)
	gitT(t, wt, "reset", "-q", "--hard", pushed)
	other := ledger("run2", 1, 2, 2)
	gitT(t, wt, "reset", "-q", "--hard", pushed)
	person := commitIn(t, wt, "theirs.txt", "theirs")
	gitT(t, wt, "reset", "-q", "--hard", base)
	offside := ledger("run1", 1, 2, 2) // not on top of the recorded push
	for _, c := range []string{stale2, mine, other, person, offside} {
		gitT(t, wt, "push", "-q", "-f", url, c+":refs/heads/probe-"+c[:8])
	}
	for _, tc := range []struct {
		name string
		tip  string
		want bool
	}{
		{"two late ledger commits of an older epoch", stale2, true},
		{"a commit of the owner's own epoch", mine, false},
		{"another run's ledger commit", other, false},
		{"a person's commit", person, false},
		{"a branch not descending from the recorded push", offside, false},
		{"the recorded push itself", pushed, false},
	} {
		got, err := m.StalePush(ctx, url, tc.tip, pushed, base, "run1", 2)
		if err != nil || got != tc.want {
			t.Errorf("%s: StalePush = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	// A late push as the run's first: nothing recorded, from the base.
	if got, err := m.StalePush(ctx, url, offside, "", base, "run1", 2); err != nil || !got {
		t.Errorf("a late first push: StalePush = %v, %v; want true", got, err)
	}
}
