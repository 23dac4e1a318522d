package flaky

import (
	"os"
	"testing"
)

func TestStable(t *testing.T) {}

// TestFlaky fails on its first run and passes when re-run: FLAKY_MARKER names
// a file that the first run creates.
func TestFlaky(t *testing.T) {
	marker := os.Getenv("FLAKY_MARKER")
	if _, err := os.Stat(marker); err != nil {
		os.WriteFile(marker, nil, 0o600)
		t.Fatal("first attempt fails")
	}
}

func TestBroken(t *testing.T) { t.Error("always fails") }

func TestSkipped(t *testing.T) { t.Skip("not here") }
