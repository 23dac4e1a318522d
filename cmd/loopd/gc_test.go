package main

import (
	"runtime/debug"
	"slices"
	"testing"
)

func TestGCPercentFollowsTheRunsAtOnce(t *testing.T) {
	var set []int
	setGCPercent = func(p int) int { set = append(set, p); return 0 }
	t.Cleanup(func() { setGCPercent = debug.SetGCPercent })
	on := setGCPercentFor()
	for _, n := range []int{1, 2, manyRunsAtGCs, manyRunsAtGCs + 1, 500, 1000, 300, manyRunsAtGCs, 3, 0} {
		on(n)
	}
	// Set only when the target changes: past manyRunsAtGCs, and back.
	if want := []int{gcManyRuns, gcFewRuns}; !slices.Equal(set, want) {
		t.Errorf("targets set %v, want %v", set, want)
	}
	if gcPercent(0) != gcFewRuns || gcPercent(1000) != gcManyRuns {
		t.Errorf("gcPercent(0) = %d, gcPercent(1000) = %d", gcPercent(0), gcPercent(1000))
	}
}
