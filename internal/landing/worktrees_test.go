package landing

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestWithin(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"/home/worktrees/abc", true},
		{"/home/worktrees/abc/../def", true},
		{"/home/worktrees", false},
		{"/home/worktrees/..", false},
		{"/home/worktrees/../x", false},
		{"/home/worktrees-evil/abc", false},
		{"/elsewhere", false},
	}
	for _, tt := range tests {
		if got := within("/home/worktrees", tt.path); got != tt.want {
			t.Errorf("within(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestDiskUsageCountsBlocksAndHardLinksOnce(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i) | 1 // not sparse
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "big"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	n, complete := diskUsage(dir, time.Now().Add(time.Minute))
	if !complete || n < 1<<20 || n >= 2<<20 {
		t.Errorf("diskUsage = %d (complete %v), want about 1 MiB once", n, complete)
	}
	// A budget already spent stops the walk at its first check.
	for i := range 3000 {
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, complete := diskUsage(dir, time.Now().Add(-time.Second)); complete {
		t.Error("a walk past its deadline says it is complete")
	}
}

// BenchmarkWorktreeDisk measures the disk walk of `daemon status` on a
// worktree of 10,000 files against `du -sk` of the same tree (the
// baseline, measured in the same run).
func BenchmarkWorktreeDisk(b *testing.B) {
	dir := b.TempDir()
	for i := range 10_000 {
		sub := filepath.Join(dir, "d"+strconv.Itoa(i%100))
		if i < 100 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sub, "f"+strconv.Itoa(i)), []byte("content of a source file\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			if _, complete := diskUsage(dir, time.Now().Add(time.Minute)); !complete {
				b.Fatal("incomplete")
			}
		}
	})
	b.Run("du-baseline", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("du", "-sk", dir).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
