package git

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
//	go test ./internal/git/ -run '^$' -bench Ledger -benchtime 50x
//
// status is the baseline, measured in the same run on the same repository:
// one `git status --porcelain` (what any tool reading a workspace pays).
// snapshot is an in-place run's step (private index, snapshot commit, ref,
// numstat); worktree is a worktree run's step (add, commit, numstat).
// Each reports its ratio to the baseline as x-status.
func BenchmarkLedger(b *testing.B) {
	const files = 10_000
	var baseline float64
	b.Run("status", func(b *testing.B) {
		dir := benchRepo(b, files)
		ctx := context.Background()
		gitT(b, dir, "status", "--porcelain") // warm the index's stat cache, as a live checkout has it
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			touch(b, dir, i)
			b.StartTimer()
			if _, err := (Cmd{Dir: dir}).Run(ctx, "status", "--porcelain"); err != nil {
				b.Fatal(err)
			}
		}
		baseline = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("snapshot", func(b *testing.B) {
		dir := benchRepo(b, files)
		ctx := context.Background()
		gitT(b, dir, "status", "--porcelain")
		l := &Ledger{Dir: dir, Index: filepath.Join(b.TempDir(), "ledger.index"), RunID: "bench", Short: "bench"}
		prev, err := l.Baseline(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			touch(b, dir, i)
			b.StartTimer()
			ch, err := l.Snapshot(ctx, i+1, i+1, prev)
			if err != nil || ch.FilesChanged != 3 {
				b.Fatalf("%+v %v", ch, err)
			}
			prev = ch.Commit
		}
		report(b, baseline)
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
		// The first add in a new worktree re-reads every file that git's
		// racy-timestamp rule cannot trust (all of them, written in the
		// same second as its index): a one-time cost of the run's first
		// step, measured apart in BENCHMARKS.md. Steps after it are these.
		if _, err := l.CommitWorktree(ctx, 0, 0, prev); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			touch(b, wt, i)
			b.StartTimer()
			ch, err := l.CommitWorktree(ctx, i+1, i+1, prev)
			if err != nil || ch.FilesChanged != 3 {
				b.Fatalf("%+v %v", ch, err)
			}
			prev = ch.Commit
		}
		report(b, baseline)
	})
	b.Run("snapshot-big-binary", func(b *testing.B) {
		// A step that wrote a 32 MB binary file: hashed once, never diffed.
		dir := benchRepo(b, files)
		ctx := context.Background()
		l := &Ledger{Dir: dir, Index: filepath.Join(b.TempDir(), "ledger.index"), RunID: "bench", Short: "bench"}
		prev, err := l.Baseline(ctx)
		if err != nil {
			b.Fatal(err)
		}
		blob := []byte(strings.Repeat("\x00\x01binary", 32<<20/8))
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			blob[0] = byte(i)
			if err := os.WriteFile(filepath.Join(dir, "big.bin"), blob, 0o644); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			ch, err := l.Snapshot(ctx, i+1, i+1, prev)
			if err != nil || ch.FilesChanged != 1 {
				b.Fatalf("%+v %v", ch, err)
			}
			prev = ch.Commit
		}
		report(b, baseline)
	})
}

func report(b *testing.B, baseline float64) {
	per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(per/1e6, "ms/step")
	if baseline > 0 {
		b.ReportMetric(per/baseline, "x-status")
	}
}
