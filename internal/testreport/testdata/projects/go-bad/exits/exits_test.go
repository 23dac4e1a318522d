package exits

import (
	"os"
	"testing"
)

// TestMain fails the package after every test passed, as a leak checker would.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		println("leak check: 1 goroutine still running")
		code = 3
	}
	os.Exit(code)
}

func TestFine(t *testing.T) {}
