package daemon

import (
	"os"
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
