package filetail

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("first line\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n    int64
		want string
	}{{5, "line\n"}, {100, "first line\nsecond line\n"}, {0, ""}} {
		b, fi, err := Read(path, tc.n)
		if err != nil || string(b) != tc.want || fi.Size() != 23 {
			t.Errorf("Read(%d) = %q, %v, %v; want %q", tc.n, b, fi, err, tc.want)
		}
	}
	if _, _, err := Read(filepath.Join(t.TempDir(), "none"), 10); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}
