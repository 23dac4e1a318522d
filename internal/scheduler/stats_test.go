package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
)

// The aggregates recorded with each step (what list and status read) are
// exactly what deriving them from every step gives, after every insert and
// every finish of a run's life; a newest step recorded without them is
// noticed, and the run is derived from its steps.
func TestRecordedStatsMatchTheSteps(t *testing.T) {
	clock := int64(1_700_000_000_000)
	now := func() time.Time { return time.UnixMilli(clock) }
	store, err := storage.Open(t.Context(), filepath.Join(t.TempDir(), "loopd.db"), storage.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := New(Options{Store: store, Home: t.TempDir(), Now: now})

	cfg := config.Config{VerifyCommands: []string{"true"}, Model: "claude-sonnet-4-5"}
	cfgJSON, _ := json.Marshal(cfg)
	condJSON, _ := json.Marshal(stop.Set{})
	run := storage.Run{ID: "r1", Workspace: "/ws", Goal: "g", Config: string(cfgJSON), Conditions: string(condJSON), Status: api.RunPending}
	if err := store.Write(t.Context(), func(tx *storage.Tx) error { return tx.InsertRun(run, nil) }); err != nil {
		t.Fatal(err)
	}
	run, _ = store.Run(t.Context(), "r1")

	compare := func(when string) {
		t.Helper()
		var fast, slow api.Run
		ok, err := s.fastDescribe(t.Context(), run, &fast, clock+250)
		if err != nil || !ok {
			t.Fatalf("%s: no current stats (%v)", when, err)
		}
		if err := s.describeFromSteps(t.Context(), run, cfg, &slow, clock+250); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s: recorded stats differ from the steps:\n%+v\n%+v", when, fast, slow)
		}
	}

	h := NewHistory(nil, pipelineOf(cfg))
	cost := 0.25
	for i, spec := range steps("I+", "V-", "I-", "I+", "V-", "I!", "I+", "V+", "I~", "I$", "I+") {
		clock += 1000
		st := storage.Step{RunID: "r1", Seq: spec.Seq, Phase: spec.Phase, Iteration: spec.Iteration, LogPath: "/l"}
		err := store.Write(t.Context(), func(tx *storage.Tx) error {
			if err := tx.InsertStep(&st, nil); err != nil {
				return err
			}
			return tx.SetRunStats("r1", withStarted(statsOf(&h), &st))
		})
		if err != nil {
			t.Fatal(err)
		}
		h.Append(st)
		compare("after starting step " + string(spec.Phase))

		end := st.StartedAt + 300
		st.Status, st.EndedAt, st.RateLimitedUntil = spec.Status, &end, spec.RateLimitedUntil
		st.InputTokens, st.OutputTokens, st.UsageFound = int64(100*i), 10, true
		if i%2 == 0 {
			st.PricedCostUSD = &cost
		}
		h.SetLast(st)
		err = store.Write(t.Context(), func(tx *storage.Tx) error {
			if err := tx.FinishStep(&st, "STEP_FINISHED", nil); err != nil {
				return err
			}
			return tx.SetRunStats("r1", statsOf(&h))
		})
		if err != nil {
			t.Fatal(err)
		}
		compare("after finishing step")
	}

	// A step recorded by a path that keeps no aggregates.
	err = store.Write(t.Context(), func(tx *storage.Tx) error {
		return tx.InsertStep(&storage.Step{RunID: "r1", Seq: 12, Phase: api.PhaseVerification, Iteration: 5, LogPath: "/l"}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	var out api.Run
	if ok, err := s.fastDescribe(t.Context(), run, &out, clock); ok || err != nil {
		t.Fatalf("stale stats used (ok=%v, err=%v)", ok, err)
	}
	view, err := s.Describe(t.Context(), run, DescribeOptions{})
	if err != nil || view.Steps != 12 || view.CurrentStep == nil || view.CurrentStep.Seq != 12 {
		t.Fatalf("Describe with stale stats: steps %d, current %+v, %v", view.Steps, view.CurrentStep, err)
	}
}

// A full disk, a quota or a read-only LOOPD_HOME is trouble that passes:
// it never counts toward ending a run fatal:internal.
func TestDiskTroubleIsNotFatal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "write", Path: "/h/runs/x/0001-implementation.prompt", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("write prompt: %w", &os.PathError{Op: "open", Path: "/h", Err: syscall.EDQUOT}), true},
		{&os.PathError{Op: "mkdir", Path: "/h/runs/x", Err: syscall.EROFS}, true},
		{&os.PathError{Op: "mkdir", Path: "/h/runs", Err: syscall.ENOTDIR}, false},
		{errors.New("decode frozen config: unexpected end of JSON input"), false},
	} {
		if got := diskTrouble(tc.err); got != tc.want {
			t.Errorf("diskTrouble(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
