package git

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchRepo is a repository of n files in 100 directories, committed.
func benchRepo(b *testing.B, n int) string {
	b.Helper()
	files := make(map[string]string, n)
	for i := range n {
		files[fmt.Sprintf("pkg%02d/file%05d.go", i%100, i)] = fmt.Sprintf("package pkg%02d\n\n// %d\nvar V%d = %d\n", i%100, i, i, i)
	}
	return repo(b, files)
}

// touch changes three files, as an agent's small iteration would.
func touch(b *testing.B, dir string, i int) {
	b.Helper()
	for j := range 3 {
		name := fmt.Sprintf("pkg%02d/file%05d.go", j, j*100)
		write(b, dir, name, "package x\n// iteration "+strconv.Itoa(i)+"\n")
	}
}

// BenchmarkLedger measures the change ledger's cost per implementation
// step on a repository of 10,000 files where the step changed three:
//
//	go test ./internal/git/ -run '^$' -bench Ledger -benchtime 30x
//
// The baseline is measured in the same loop, on the same repository, right
// before each ledger record: one `git status --porcelain` (what any tool
// reading a workspace pays). Interleaving them keeps the ratio honest on a
// machine whose load changes during the run. snapshot is an in-place
// run's step (private index, snapshot commit, ref, numstat); worktree is
// a worktree run's step (add, commit on the branch, numstat);
// snapshot-big-binary is a step that wrote a 32 MB binary file;
// snapshot-step and snapshot-unchanged-small are the daemon's own path
// (SnapshotNew), on this tree and on a two-file one that did not change. Each
// reports ms/step, the baseline's status-ms, and x-status, their ratio.
func BenchmarkLedger(b *testing.B) {
	const files = 10_000
	b.Run("snapshot", func(b *testing.B) {
		dir := benchRepo(b, files)
		ctx := context.Background()
		l := &Ledger{Dir: dir, Index: filepath.Join(b.TempDir(), "ledger.index"), RunID: "bench", Short: "bench"}
		prev, err := l.Baseline(ctx)
		if err != nil {
			b.Fatal(err)
		}
		measure(b, dir, func(i int) { touch(b, dir, i) }, func(i int) {
			ch, err := l.Snapshot(ctx, i+1, i+1, prev)
			if err != nil || ch.FilesChanged != 3 {
				b.Fatalf("%+v %v", ch, err)
			}
			prev = ch.Commit
		})
	})
	// snapshot-step is what the daemon runs for a step it watched
	// (SnapshotNew: no look-up of an earlier record; the quiet check,
	// which a tree of this size turns off after one walk).
	b.Run("snapshot-step", func(b *testing.B) {
		dir := benchRepo(b, files)
		ctx := context.Background()
		l := &Ledger{Dir: dir, Index: filepath.Join(b.TempDir(), "ledger.index"), RunID: "bench", Short: "bench"}
		prev, err := l.Baseline(ctx)
		if err != nil {
			b.Fatal(err)
		}
		measure(b, dir, func(i int) { touch(b, dir, i) }, func(i int) {
			ch, err := l.SnapshotNew(ctx, i+1, i+1, prev)
			if err != nil || ch.FilesChanged != 3 {
				b.Fatalf("%+v %v", ch, err)
			}
			prev = ch.Commit
		})
	})
	// snapshot-unchanged-small is a step that changed nothing in a
	// repository of two files: the no-op step of the overhead measure.
	b.Run("snapshot-unchanged-small", func(b *testing.B) {
		dir := repo(b, map[string]string{"README": "r\n", ".loop/config": "\n"})
		ctx := context.Background()
		l := &Ledger{Dir: dir, Index: filepath.Join(b.TempDir(), "ledger.index"), RunID: "bench", Short: "bench"}
		prev, err := l.Baseline(ctx)
		if err != nil {
			b.Fatal(err)
		}
		measure(b, dir, func(int) {}, func(i int) {
			ch, err := l.SnapshotNew(ctx, i+1, i+1, prev)
			if err != nil || ch.Commit != "" {
				b.Fatalf("%+v %v", ch, err)
			}
		})
	})
	b.Run("worktree", func(b *testing.B) {
		dir := benchRepo(b, files)
		ctx := context.Background()
		r, err := Inspect(ctx, dir)
		if err != nil {
			b.Fatal(err)
		}
		wt := filepath.Join(b.TempDir(), "wt")
		if err := AddWorktree(ctx, dir, wt, "loop/bench", r.Head); err != nil {
			b.Fatal(err)
		}
		l := &Ledger{Dir: wt, RunID: "bench", Short: "bench"}
		prev := r.Head
		// The first add in a new worktree re-reads the files git's
		// racy-timestamp rule cannot trust when it comes within the second
		// the worktree was checked out; a real first step (an agent at
		// work) comes later. Steps after it are these.
		if _, err := l.CommitWorktree(ctx, 0, 0, prev); err != nil {
			b.Fatal(err)
		}
		measure(b, wt, func(i int) { touch(b, wt, i) }, func(i int) {
			ch, err := l.CommitWorktree(ctx, i+1, i+1, prev)
			if err != nil || ch.FilesChanged != 3 {
				b.Fatalf("%+v %v", ch, err)
			}
			prev = ch.Commit
		})
	})
	b.Run("snapshot-big-binary", func(b *testing.B) {
		dir := benchRepo(b, files)
		ctx := context.Background()
		l := &Ledger{Dir: dir, Index: filepath.Join(b.TempDir(), "ledger.index"), RunID: "bench", Short: "bench"}
		prev, err := l.Baseline(ctx)
		if err != nil {
			b.Fatal(err)
		}
		blob := []byte(strings.Repeat("\x00\x01binary", 32<<20/8))
		measure(b, dir, func(i int) {
			blob[0] = byte(i)
			if err := os.WriteFile(filepath.Join(dir, "big.bin"), blob, 0o644); err != nil {
				b.Fatal(err)
			}
		}, func(i int) {
			ch, err := l.Snapshot(ctx, i+1, i+1, prev)
			if err != nil || ch.FilesChanged != 1 {
				b.Fatalf("%+v %v", ch, err)
			}
			prev = ch.Commit
		})
	})
}

// measure runs change (untimed), then the baseline `git status` in dir,
// then record, b.N times, and reports record's time per step and its
// ratio to the baseline's.
func measure(b *testing.B, dir string, change, record func(i int)) {
	ctx := context.Background()
	var status, ledger time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		change(i)
		t0 := time.Now()
		if _, err := (Cmd{Dir: dir}).Run(ctx, "status", "--porcelain"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		b.StartTimer()
		record(i)
		ledger += time.Since(t1)
		status += t1.Sub(t0)
	}
	b.ReportMetric(float64(ledger.Microseconds())/1e3/float64(b.N), "ms/step")
	b.ReportMetric(float64(status.Microseconds())/1e3/float64(b.N), "status-ms")
	b.ReportMetric(float64(ledger)/float64(status), "x-status")
}

// BenchmarkSpawn measures what one git command costs loopd by itself: a
// process start and a ref lookup, the floor under every ledger command.
//
//	go test ./internal/git/ -run '^$' -bench Spawn
func BenchmarkSpawn(b *testing.B) {
	dir := repo(b, map[string]string{"a": "a"})
	ctx := context.Background()
	for b.Loop() {
		if _, err := (Cmd{Dir: dir}).Run(ctx, "rev-parse", "--verify", "HEAD"); err != nil {
			b.Fatal(err)
		}
	}
}
