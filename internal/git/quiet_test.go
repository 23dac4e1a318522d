package git

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// noGit makes every git command fail from here on: a snapshot that
// succeeds afterwards ran none.
func noGit(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
}

// quietLedger is an in-place ledger of a two-file repository, with its
// baseline recorded and the racy margin taken out (the files were written
// a moment ago; the margin is tested on its own).
func quietLedger(t *testing.T) (*Ledger, string, string) {
	t.Helper()
	old, oldCoarse := quietMargin, quietCoarseMargin
	quietMargin, quietCoarseMargin = -time.Hour, -time.Hour // nothing is recent
	t.Cleanup(func() { quietMargin, quietCoarseMargin = old, oldCoarse })
	dir := repo(t, map[string]string{"a.txt": "one\n", "sub/b.txt": "two\n", ".gitignore": "*.log\n"})
	l := &Ledger{Dir: dir, Index: filepath.Join(t.TempDir(), "ledger.index"), RunID: "q", Short: "q"}
	base, err := l.Baseline(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return l, dir, base
}

func TestSnapshotNewOfAnUnchangedWorkspaceRunsNoGit(t *testing.T) {
	l, _, base := quietLedger(t)
	noGit(t)
	for seq := 1; seq <= 3; seq++ {
		ch, err := l.SnapshotNew(t.Context(), seq, seq, base)
		if err != nil || ch.Commit != "" || ch.FilesChanged != 0 || ch.Files == nil {
			t.Fatalf("step %d: %+v, %v", seq, ch, err)
		}
	}
}

func TestSnapshotNewSeesEveryKindOfChange(t *testing.T) {
	// Each change, made to a workspace the ledger recorded as quiet, must
	// be recorded as a change: the quiet check may never hide one.
	changes := map[string]func(t *testing.T, dir string){
		"content, same size": func(t *testing.T, dir string) { write(t, dir, "a.txt", "ONE\n") },
		"content, mtime restored": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "a.txt")
			fi, _ := os.Stat(p)
			write(t, dir, "a.txt", "uno\n")
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		},
		"new file in a subdirectory": func(t *testing.T, dir string) { write(t, dir, "sub/c.txt", "three\n") },
		"removed file":               func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "sub/b.txt")) },
		"mode":                       func(t *testing.T, dir string) { os.Chmod(filepath.Join(dir, "a.txt"), 0o755) },
		"renamed": func(t *testing.T, dir string) {
			os.Rename(filepath.Join(dir, "sub/b.txt"), filepath.Join(dir, "sub/d.txt"))
		},
		"un-ignored by .git/info/exclude's sibling config": func(t *testing.T, dir string) {
			write(t, dir, "x.log", "log\n")
			write(t, dir, ".gitignore", "*.tmp\n")
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			l, dir, base := quietLedger(t)
			if ch, err := l.SnapshotNew(t.Context(), 1, 1, base); err != nil || ch.Commit != "" {
				t.Fatalf("quiet step: %+v, %v", ch, err)
			}
			change(t, dir)
			ch, err := l.SnapshotNew(t.Context(), 2, 2, base)
			if err != nil || ch.Commit == "" || ch.FilesChanged == 0 {
				t.Fatalf("the change was not recorded: %+v, %v", ch, err)
			}
			// And the next quiet step after it runs no git again.
			noGit(t)
			if again, err := l.SnapshotNew(t.Context(), 3, 3, ch.Commit); err != nil || again.Commit != "" {
				t.Fatalf("quiet step after the change: %+v, %v", again, err)
			}
		})
	}
}

func TestSnapshotNewIgnoredFileRunsGitButRecordsNothing(t *testing.T) {
	l, dir, base := quietLedger(t)
	write(t, dir, "debug.log", "ignored\n")
	ch, err := l.SnapshotNew(t.Context(), 1, 1, base)
	if err != nil || ch.Commit != "" {
		t.Fatalf("an ignored file is no change: %+v, %v", ch, err)
	}
}

func TestSnapshotNewDistrustsARecentRecord(t *testing.T) {
	l, _, base := quietLedger(t)
	quietMargin, quietCoarseMargin = 24*time.Hour, 24*time.Hour // every file is "recent": no record is trusted
	if _, err := l.SnapshotNew(t.Context(), 1, 1, base); err != nil {
		t.Fatal(err)
	}
	noGit(t)
	if _, err := l.SnapshotNew(t.Context(), 2, 2, base); err == nil {
		t.Fatal("a racy record was trusted: the snapshot ran no git")
	}
}

func TestSnapshotNewOnlyAfterItsOwnPoint(t *testing.T) {
	// A quiet record says the workspace holds its point's tree; asked for
	// a change since another commit, git must answer.
	l, dir, base := quietLedger(t)
	write(t, dir, "a.txt", "changed\n")
	first, err := l.SnapshotNew(t.Context(), 1, 1, base)
	if err != nil || first.Commit == "" {
		t.Fatalf("%+v, %v", first, err)
	}
	ch, err := l.SnapshotNew(t.Context(), 2, 2, base)
	if err != nil || ch.Commit == "" || ch.FilesChanged != 1 {
		t.Fatalf("the change since base was not recorded: %+v, %v", ch, err)
	}
}

func TestSnapshotFindsWhatSnapshotNewRecorded(t *testing.T) {
	// After a crash between the ledger commit and its database record,
	// the next daemon records the step with Snapshot: it must find the
	// commit, not make a second one.
	l, dir, base := quietLedger(t)
	write(t, dir, "a.txt", "changed\n")
	first, err := l.SnapshotNew(t.Context(), 1, 1, base)
	if err != nil || first.Commit == "" {
		t.Fatalf("%+v, %v", first, err)
	}
	next := &Ledger{Dir: dir, Index: l.Index, RunID: "q", Short: "q"}
	again, err := next.Snapshot(t.Context(), 1, 1, base)
	if err != nil || again.Commit != first.Commit || again.FilesChanged != 1 {
		t.Fatalf("recorded again: %+v, want %s; %v", again, first.Commit, err)
	}
}

func TestQuietCheckGivesUpOnALargeTree(t *testing.T) {
	old, oldCoarse := quietMargin, quietCoarseMargin
	quietMargin, quietCoarseMargin = -time.Hour, -time.Hour
	t.Cleanup(func() { quietMargin, quietCoarseMargin = old, oldCoarse })
	files := map[string]string{}
	for i := range quietMaxEntries + 10 {
		files[fmt.Sprintf("d%d/f%d", i%50, i)] = "x"
	}
	dir := repo(t, files)
	l := &Ledger{Dir: dir, Index: filepath.Join(t.TempDir(), "ledger.index"), RunID: "big", Short: "big"}
	base, err := l.Baseline(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !l.q.off {
		t.Fatal("the quiet check is still on for a tree over its limit")
	}
	if ch, err := l.SnapshotNew(t.Context(), 1, 1, base); err != nil || ch.Commit != "" {
		t.Fatalf("%+v, %v", ch, err)
	}
}

// A record taken within the margins of a file's times is not trusted:
// with the real margins, a file written just now makes the next
// snapshot run git even though nothing changed since.
func TestQuietRecordOfAFreshFileIsNotTrusted(t *testing.T) {
	dir := repo(t, map[string]string{"a.txt": "one\n"})
	l := &Ledger{Dir: dir, Index: filepath.Join(t.TempDir(), "ledger.index"), RunID: "fresh", Short: "fresh"}
	base, err := l.Baseline(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a.txt", "two\n") // now: within quietMargin of the next record
	ch, err := l.SnapshotNew(t.Context(), 1, 1, base)
	if err != nil || ch.Commit == "" {
		t.Fatalf("%+v, %v", ch, err)
	}
	if l.q.point != "" {
		t.Fatalf("a record holding a time from %s ago was trusted", quietMargin)
	}
}
