package tcpguard

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestRefusalsLogAtMostOncePerInterval(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(core)
	now := time.Unix(1_700_000_000, 0)
	r := &Refusals{every: 10 * time.Second, now: func() time.Time { return now }}
	for range 1000 {
		r.Note(log, "refused")
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("1000 refusals in an instant wrote %d lines, want 1", n)
	}
	now = now.Add(9 * time.Second)
	r.Note(log, "refused")
	if n := logs.Len(); n != 1 {
		t.Fatalf("a refusal within the interval was logged (%d lines)", n)
	}
	now = now.Add(time.Second)
	r.Note(log, "refused")
	entries := logs.All()
	if len(entries) != 2 {
		t.Fatalf("after the interval: %d lines, want 2", len(entries))
	}
	if got := entries[1].ContextMap()["refused_since_last_line"]; got != int64(1000) {
		t.Errorf("second line counts %v refusals not logged, want 1000", got)
	}
	if _, ok := entries[0].ContextMap()["refused_since_last_line"]; ok {
		t.Error("the first line counts suppressed refusals")
	}
}
