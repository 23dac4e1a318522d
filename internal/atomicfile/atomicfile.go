// Package atomicfile writes a file whole or not at all.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path whole or not at all: the data goes to a
// temporary file beside path (mode 0600), which is renamed into place. A
// reader that finds the file sees all of its content, never a file that
// exists, created and still empty or short, before its content is in it;
// a crash leaves the old file or the new one, never half of one. On error
// the temporary file is removed.
func Write(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
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
