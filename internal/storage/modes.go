package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ownerOnly makes the database file and its -wal and -shm companions
// readable by their owner only, whatever the umask: the database holds
// every run's goal, config and agent messages. SQLite creates the -wal and
// -shm files with the database file's mode, so creating that file 0600
// before SQLite opens it covers the companions created later; existing
// files (an older loopd followed the umask) are tightened.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open db %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open db: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("make %s owner-only: %w", p, err)
			}
		}
	}
	return nil
}
