package scheduler

import (
	"os"
	"path/filepath"
)

// writeHookFile writes a test hook's marker file whole or not at all: the
// content goes to a temporary file beside it, which is renamed into place.
// A test polls for the file and reads it as soon as it exists; written in
// place, it would exist (created, empty) before its content is in it, and
// a test on a loaded machine read it empty.
func writeHookFile(path string, content []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
