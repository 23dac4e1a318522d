package git

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// ontoRepo makes a repository whose main and branch "run" both changed
// a.txt (conflicting when conflict) and each added a file of its own; it
// returns the directory (on "run") and main's tip.
func ontoRepo(t *testing.T, conflict bool) (string, string) {
	t.Helper()
	dir := repo(t, map[string]string{"a.txt": "base\n"})
	id := []string{"-c", "user.name=u", "-c", "user.email=u@example.com"}
	gitT(t, dir, "switch", "-q", "-c", "run")
	write(t, dir, "a.txt", "run\n")
	write(t, dir, "run.txt", "run\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, append(id, "commit", "-q", "-m", "run")...)
	gitT(t, dir, "switch", "-q", "main")
	if conflict {
		write(t, dir, "a.txt", "main\n")
	}
	write(t, dir, "main.txt", "main\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, append(id, "commit", "-q", "-m", "main")...)
	tip := gitT(t, dir, "rev-parse", "HEAD")
	gitT(t, dir, "switch", "-q", "run")
	return dir, tip
}

func TestMergeBaseCleanIsOneMergeCommitEvenWhenRepeated(t *testing.T) {
	ctx := context.Background()
	dir, tip := ontoRepo(t, false)
	l := &Ledger{Dir: dir, RunID: "r1", Short: "r1"}
	runTip := gitT(t, dir, "rev-parse", "HEAD")
	in := MergeBaseInput{BaseBranch: "main", Base: tip, SnapshotRef: "refs/loop/r1/merge-1"}
	m, err := l.MergeBase(ctx, in)
	if err != nil || !m.Clean || m.Reused || len(m.Conflicts) != 0 {
		t.Fatalf("MergeBase = %+v, %v", m, err)
	}
	if parents := gitT(t, dir, "rev-list", "--parents", "-n", "1", "HEAD"); parents != m.Point+" "+runTip+" "+tip {
		t.Errorf("HEAD's parents: %s, want the run's tip and main's", parents)
	}
	if _, err := (Cmd{Dir: dir}).Output(ctx, "rev-parse", "-q", "--verify", "MERGE_HEAD"); err == nil {
		t.Error("the merge state is left after a clean merge")
	}
	again, err := l.MergeBase(ctx, in)
	if err != nil || !again.Reused || again.Point != m.Point {
		t.Errorf("repeated MergeBase = %+v, %v; want the same merge found", again, err)
	}
	// The next iteration's change is counted from the merge: the base's
	// files are not in it.
	write(t, dir, "b.txt", "agent\n")
	ch, err := l.CommitWorktree(ctx, 2, 2, m.Point)
	if err != nil || strings.Join(ch.Files, ",") != "b.txt" {
		t.Errorf("change after the merge = %+v, %v; want b.txt only", ch, err)
	}
	if _, err := l.MergeBase(ctx, in); !errors.Is(err, ErrNothingToMerge) {
		t.Errorf("MergeBase with the base already in: %v, want ErrNothingToMerge", err)
	}
}

func TestMergeBaseConflictIsCompletedByTheNextCommit(t *testing.T) {
	ctx := context.Background()
	dir, tip := ontoRepo(t, true)
	l := &Ledger{Dir: dir, RunID: "r1", Short: "r1"}
	runTip := gitT(t, dir, "rev-parse", "HEAD")
	merged := false
	in := MergeBaseInput{BaseBranch: "main", Base: tip, SnapshotRef: "refs/loop/r1/merge-1", AfterMerge: func() { merged = true }}
	m, err := l.MergeBase(ctx, in)
	if err != nil || m.Clean || !merged || strings.Join(m.Conflicts, ",") != "a.txt" {
		t.Fatalf("MergeBase = %+v, %v (after merge hook: %v)", m, err, merged)
	}
	if head := gitT(t, dir, "rev-parse", "HEAD"); head != runTip {
		t.Errorf("HEAD moved to %s: a conflicted merge is left in progress", head)
	}
	if snap := gitT(t, dir, "rev-parse", "refs/loop/r1/merge-1"); snap != m.Point {
		t.Errorf("snapshot ref at %s, want %s", snap, m.Point)
	}
	if body := gitT(t, dir, "show", m.Point+":a.txt"); !strings.Contains(body, "<<<<<<<") {
		t.Errorf("the snapshot does not hold the conflicted file:\n%s", body)
	}
	// Repeated (a cut request run again): the same snapshot, no new merge.
	again, err := l.MergeBase(ctx, in)
	if err != nil || !again.Reused || again.Point != m.Point {
		t.Errorf("repeated MergeBase = %+v, %v", again, err)
	}
	// The agent resolves; the ledger completes the merge with both parents
	// and counts only the resolution.
	write(t, dir, "a.txt", "run\nmain\n")
	l.Merging = true
	ch, err := l.CommitWorktree(ctx, 3, 2, m.Point)
	if err != nil || strings.Join(ch.Files, ",") != "a.txt" {
		t.Fatalf("resolution = %+v, %v; want a.txt only", ch, err)
	}
	if parents := gitT(t, dir, "rev-list", "--parents", "-n", "1", "HEAD"); parents != ch.Commit+" "+runTip+" "+tip {
		t.Errorf("the completing commit's parents: %s, want the run's tip and main's", parents)
	}
	if _, err := (Cmd{Dir: dir}).Output(ctx, "rev-parse", "-q", "--verify", "MERGE_HEAD"); err == nil {
		t.Error("MERGE_HEAD is left after the merge was completed")
	}
	// Recorded again after a crash: found, not committed twice.
	again2, err := l.CommitWorktree(ctx, 3, 2, m.Point)
	if err != nil || again2.Commit != ch.Commit {
		t.Errorf("recording the step again = %+v, %v; want %s", again2, err, ch.Commit)
	}
}
