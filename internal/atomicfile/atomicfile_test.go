package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// A reader that polls for a file, as the end-to-end tests do for the
// scheduler's test hook files, never finds it empty or short: it appears
// with its content.
func TestWriteWhole(t *testing.T) {
	dir := t.TempDir()
	content := bytes.Repeat([]byte("1 0123456789abcdef\n"), 4096)
	const files = 300
	var seen, torn atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range files {
			p := filepath.Join(dir, "hold"+string(rune('a'+i%26))+string(rune('a'+i/26)))
			for {
				b, err := os.ReadFile(p)
				if err != nil {
					continue
				}
				seen.Add(1)
				if !bytes.Equal(b, content) {
					torn.Add(1)
				}
				break
			}
		}
	}()
	for i := range files {
		p := filepath.Join(dir, "hold"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		if err := Write(p, content); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if torn.Load() > 0 {
		t.Fatalf("%d of %d reads found a file without its whole content", torn.Load(), seen.Load())
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) > 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}
