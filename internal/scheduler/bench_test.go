package scheduler

import (
	"strconv"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// BenchmarkNoOpIteration is the daemon's own work for one iteration of a
// no-op agent and a no-op verification (two steps), without processes:
// the fake executor stands in for them, the database is real. It is what
// the overhead measure of BENCHMARKS.md pays beyond starting the steps'
// shells.
//
//	go test ./internal/scheduler/ -run '^$' -bench NoOpIteration -benchmem
func BenchmarkNoOpIteration(b *testing.B) {
	fx := &fakeExec{script: func(api.Phase, int) fakeStep { return fakeStep{} }, held: make(chan struct{}, 1)}
	h := newBenchHarness(b, fx)
	id := h.start("", "agent=command", "agent_command=true", "verify_command=true", "completion=promise,verify",
		"max_iterations="+strconv.Itoa(b.N), "max_consecutive_implementation_failures=0",
		"max_consecutive_verification_failures=0")
	b.ReportAllocs()
	b.ResetTimer()
	run := h.drive(id, false)
	b.StopTimer()
	if run.Reason != "max_iterations:"+strconv.Itoa(b.N) {
		b.Fatalf("%s %q %s", run.Status, run.Reason, run.Description)
	}
}
