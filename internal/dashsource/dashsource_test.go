package dashsource

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/dashboard"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/scheduler"
	"github.com/loopd/loopd/internal/storage"
	"go.uber.org/zap"
)

// A page about a run that is not there says what loopctl would (the API's
// not_found), and an empty store lists nothing and has no step.
func TestSourceAnswersAsTheAPI(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	store, err := storage.Open(ctx, filepath.Join(home, "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sched := scheduler.New(scheduler.Options{Store: store, Home: home, Logger: zap.NewNop()})
	s := New(store, sched, events.NewBus(0))

	var ae *api.Error
	if _, err := s.Run(ctx, "0123abcd"); !errors.As(err, &ae) || ae.Code != api.CodeNotFound {
		t.Errorf("Run of an unknown id: %v, want the API's %s", err, api.CodeNotFound)
	}
	runs, err := s.Runs(ctx, dashboard.RunFilter{Limit: 10})
	if err != nil || len(runs) != 0 {
		t.Errorf("Runs of an empty store: %v %v, want none", runs, err)
	}
	if st, err := s.LastStep(ctx, "0123abcd"); st != nil || err != nil {
		t.Errorf("LastStep before any step: %v %v, want nil, nil", st, err)
	}
	if got := s.Seq(); got != 0 {
		t.Errorf("Seq of a new bus: %d, want 0", got)
	}
}
