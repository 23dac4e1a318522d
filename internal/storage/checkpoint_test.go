package storage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

// Commits never checkpoint (the writer's automatic checkpoints are off);
// the checkpointer copies the WAL into the database file beside them.
func TestCheckpointsRunBesideTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopd.db")
	s, err := Open(t.Context(), path, Options{CheckpointEvery: 50, CheckpointPeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var auto int
	if err := s.w.Get(&auto, "PRAGMA wal_autocheckpoint"); err != nil || auto != 0 {
		t.Fatalf("writer wal_autocheckpoint = %d, %v; want 0", auto, err)
	}
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if err := s.Write(t.Context(), func(tx *Tx) error {
		return tx.InsertRun(Run{ID: "r", Workspace: "/ws", Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunRunning}, nil)
	}); err != nil {
		t.Fatal(err)
	}
	before := size()
	payload := map[string]any{"text": strings.Repeat("x", 8<<10)}
	// 49 commits: not yet due. Their pages stay in the WAL (with SQLite's
	// default, the writer would have checkpointed after ~1,000 pages).
	for range 48 {
		if err := s.Write(t.Context(), func(tx *Tx) error { _, err := tx.Event("r", nil, events.ConditionProgressed, payload); return err }); err != nil {
			t.Fatal(err)
		}
	}
	// No wait needed: a commit that checkpointed would have grown the
	// file before Write returned, and the checkpointer is not due (49 <
	// 50 commits, and its period is an hour).
	if got := size(); got != before {
		t.Fatalf("database file grew from %d to %d bytes before a checkpoint was due", before, got)
	}
	if err := s.Write(t.Context(), func(tx *Tx) error { _, err := tx.Event("r", nil, events.ConditionProgressed, payload); return err }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for size() < before+49*8<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint: database file %d bytes, WAL holds ~%d KB", size(), 49*8)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res, err := s.IntegrityCheck(t.Context()); err != nil || res != "ok" {
		t.Errorf("integrity_check = %q, %v", res, err)
	}
}
