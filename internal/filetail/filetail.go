// Package filetail reads the end of a file without reading the rest: a
// step's log for the feedback and the run's last output, a land's
// verification log, the exits file's last record. Its Follower reads a
// file that is still growing, a step's log as the step writes it.
package filetail

import (
	"errors"
	"io"
	"os"
)

// Read returns up to the last n bytes of the file at path, and the file's
// information as it was when they were read.
func Read(path string, n int64) ([]byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	return b, fi, nil
}
