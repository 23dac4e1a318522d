//go:build chaos

// The chaos test: a workload of concurrent runs with real step processes
// (the scripted agent, a reviewer, verifications), the daemon killed with
// kill -9 at 50 random moments and restarted each time; then every
// invariant of docs/reference.md (statuses, reasons, events) and of the README's crash promise is checked and the numbers are
// logged (look for "chaos summary").
//
// Run it (about 20 s on a 2-core machine; TestChaosShort runs too):
//
//	go test -tags chaos -run Chaos -v ./e2e/
//
// The seed of the kill schedule is logged first; replay a failure with
//
//	go test -tags chaos -run '^TestChaos$' -v ./e2e/ -chaos.seed=N
//
// or LOOPD_CHAOS_SEED=N in the environment; -chaos.kills=N (or
// LOOPD_CHAOS_KILLS) changes the number of kills; -chaos.duration=30s (or
// LOOPD_CHAOS_DURATION) kills for that long instead, which is how CI runs
// it (scripts/test). A third of the kills are SIGTERM, the rest kill -9. A seed fixes the
// schedule (delays, which kills hunt a write transaction, when the user
// stops); the processes' own timing still varies from run to run.
//
// The implementation is in chaos_util_test.go, shared with TestChaosShort.
package e2e

import "testing"

func TestChaos(t *testing.T) {
	runChaos(t, chaosKills(t, 50))
}
