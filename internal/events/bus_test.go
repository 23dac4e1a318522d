package events

import "testing"

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A run's watchers are woken by a commit that wrote its events, not by
// commits of other runs; a watch taken before a commit sees it.
func TestWatchWakesOnlyTheRunThatChanged(t *testing.T) {
	b := NewBus(0)
	a, releaseA := b.Watch("a")
	a2, releaseA2 := b.Watch("a")
	other, releaseOther := b.Watch("b")
	b.PublishRuns(1, []string{"a"})
	if !closed(a) || !closed(a2) {
		t.Error("the watchers of run a were not woken by its commit")
	}
	if closed(other) {
		t.Error("a commit of run a woke the watcher of run b")
	}
	if b.Seq() != 1 {
		t.Errorf("seq %d, want 1", b.Seq())
	}
	releaseA()
	releaseA2()

	again, releaseAgain := b.Watch("a")
	if closed(again) {
		t.Error("a new watch of run a starts woken")
	}
	b.PublishRuns(2, []string{"b", "a"})
	if !closed(again) || !closed(other) {
		t.Error("a commit of runs a and b did not wake both")
	}
	releaseAgain()
	releaseOther()
	if len(b.runs) != 0 {
		t.Errorf("%d runs still held after every watcher released", len(b.runs))
	}
}

// A released watch holds nothing; Close wakes every watcher.
func TestWatchReleaseAndClose(t *testing.T) {
	b := NewBus(0)
	_, release := b.Watch("a")
	release()
	if len(b.runs) != 0 {
		t.Fatalf("a released watch is still held")
	}
	w, release := b.Watch("a")
	defer release()
	b.Close()
	if !closed(w) || !b.Closed() {
		t.Error("Close did not wake the watcher")
	}
	after, _ := b.Watch("a")
	if !closed(after) {
		t.Error("a watch after Close blocks")
	}
}
