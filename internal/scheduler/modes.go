package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
)

// prepareRunDir creates a run's directory (0700) and its exits file
// (0600). The exits file is otherwise created by the first step's
// wrapper shell, which appends to it after restoring the user's umask for
// the step's commands, so it came out 0644 or 0666; it lists every step's
// tag and status, and nothing loopd keeps is for other users' eyes. An
// existing file made by an older loopd is tightened.
func prepareRunDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, "exits")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create exits file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := f.Chmod(0o600); err != nil {
			return fmt.Errorf("make %s owner-only: %w", path, err)
		}
	}
	return nil
}
