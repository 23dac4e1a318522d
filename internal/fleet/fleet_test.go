package fleet

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/storage"
)

func TestWithDefaults(t *testing.T) {
	got := Node{}.WithDefaults()
	want := Node{LeaseTTL: 30 * time.Second, Heartbeat: 5 * time.Second, FenceMargin: 5 * time.Second, DrainTimeout: 5 * time.Minute}
	if got != want {
		t.Errorf("Node{}.WithDefaults() = %+v, want %+v", got, want)
	}
	// The heartbeat follows a given TTL; what is given stays.
	got = Node{Store: "postgres://x", Worker: true, WorkerID: "w1", LeaseTTL: 12 * time.Second, FenceMargin: time.Second}.WithDefaults()
	want = Node{Store: "postgres://x", Worker: true, WorkerID: "w1", LeaseTTL: 12 * time.Second, Heartbeat: 2 * time.Second,
		FenceMargin: time.Second, DrainTimeout: 5 * time.Minute}
	if got != want {
		t.Errorf("WithDefaults of a given TTL = %+v, want %+v", got, want)
	}
}

// On SQLite no other node commits: Follow returns at once, publishing
// nothing, without waiting for ctx.
func TestFollowOnSQLiteReturnsAtOnce(t *testing.T) {
	st, err := storage.Open(context.Background(), filepath.Join(t.TempDir(), "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	published := 0
	done := make(chan error, 1)
	go func() {
		done <- Follow(context.Background(), st, 0, time.Millisecond, func(int64, []string) { published++ }, zap.NewNop())
	}()
	select {
	case err := <-done:
		if err != nil || published != 0 {
			t.Fatalf("Follow on SQLite = %v after %d publications; want nil, none", err, published)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow on SQLite did not return: it waits for a context that never ends")
	}
}
