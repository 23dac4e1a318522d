package main

import (
	"runtime/debug"
	"sync"
)

// The garbage collector's target (GOGC) follows the number of runs at once.
//
// With few runs the heap is a few megabytes, and at Go's default a
// collection comes every few dozen steps; each one scans the goroutine
// stacks and the globals (SQLite's among them) whatever the heap's size,
// which made the collector the largest share of the daemon's CPU time
// between two no-op steps (BENCHMARKS.md, "The step overhead"). A high
// target makes collections rare, for a heap that stays small anyway.
//
// With many runs the stacks (a few per live run) count toward the heap's
// goal too, and a low target keeps the resident memory of 1,000 runs at
// once at 84 MB instead of 95 MB (bench/run.sh scale), for 7% more CPU.
const (
	gcFewRuns     = 200 // GOGC up to manyRuns runs at once
	gcManyRuns    = 50  // GOGC beyond
	manyRunsAtGCs = 100
)

// gcPercent is the collector's target with n runs at once.
func gcPercent(n int) int {
	if n > manyRunsAtGCs {
		return gcManyRuns
	}
	return gcFewRuns
}

// setGCPercent is debug.SetGCPercent; a test records the calls.
var setGCPercent = debug.SetGCPercent

// setGCPercentFor returns a function, for daemon.Options.OnActiveRuns,
// that sets the collector's target for the number of runs it is told,
// when that changes the target.
func setGCPercentFor() func(n int) {
	var mu sync.Mutex
	cur := gcPercent(0)
	return func(n int) {
		mu.Lock()
		defer mu.Unlock()
		if p := gcPercent(n); p != cur {
			setGCPercent(p)
			cur = p
		}
	}
}
