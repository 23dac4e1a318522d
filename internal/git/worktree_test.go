package git

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// Worktrees added at the same moment from one repository all succeed (a
// backlog starts several task runs together): git reads every other
// worktree's admin directory during an add, and one half-created beside
// it used to fail the add.
func TestAddWorktreesAtOnce(t *testing.T) {
	dir := repo(t, map[string]string{"a.txt": "a\n"})
	base := gitT(t, dir, "rev-parse", "HEAD")
	wts := t.TempDir()
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				name := fmt.Sprintf("w%d-%d", round, i)
				errs[i] = AddWorktree(t.Context(), dir, filepath.Join(wts, name), "loop/"+name, base)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, worktree %d: %v", round, i, err)
			}
		}
	}
}
