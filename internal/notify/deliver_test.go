package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
)

// Every notification is sent once, however its delivery and the next
// read of the outbox interleave: a read made while a delivery committed
// must not hand that delivery's row out again (a webhook posted twice,
// the second attempt's record refused as a conflict).
func TestEachNotificationIsSentOnce(t *testing.T) {
	const runs = 300
	var mu sync.Mutex
	got := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			Run struct {
				ID string `json:"id"`
			} `json:"run"`
		}
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		got[m.Run.ID]++
		mu.Unlock()
	}))
	defer srv.Close()

	s := openStore(t)
	seq, err := s.LastEventSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bus := events.NewBus(seq)
	s.SetNotifyRuns(bus.PublishRuns)
	n := New(Options{Store: s, Bus: bus, Parallel: 8,
		Describe: func(_ context.Context, run storage.Run) (api.Run, error) {
			return api.Run{ID: run.ID, Status: api.RunCompleted}, nil
		}})
	s.SetEventHook(n.Hook)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()

	cfg := `{"notify_webhook":"` + srv.URL + `/hook"}`
	for i := range runs {
		id := "r" + strconv.Itoa(i)
		insertRun(t, s, id, cfg)
		if err := s.Write(t.Context(), func(tx *storage.Tx) error {
			_, err := tx.Event(id, nil, events.RunCompleted, map[string]any{"run_id": id})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		pending, err := s.PendingNotifications(t.Context(), runs)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d notifications still pending after 60s", len(pending))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	bus.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for i := range runs {
		id := "r" + strconv.Itoa(i)
		if got[id] != 1 {
			t.Errorf("run %s notified %d times, want 1", id, got[id])
		}
	}
	for _, id := range []string{"r0", "r" + strconv.Itoa(runs-1)} {
		ns, err := s.Notifications(t.Context(), id)
		if err != nil || len(ns) != 1 || ns[0].State != storage.NotificationSent || ns[0].Attempts != 1 {
			t.Errorf("run %s outbox: %+v, %v", id, ns, err)
		}
	}
}
