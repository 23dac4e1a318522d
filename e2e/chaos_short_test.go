package e2e

import "testing"

// TestChaosShort is the chaos test (chaos_test.go) with a few kills, so
// that every test run exercises it. Same code path, same invariants.
func TestChaosShort(t *testing.T) {
	runChaos(t, chaosKills(t, 8))
}
