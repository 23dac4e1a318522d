package storage

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/migrations"
)

func openTest(t *testing.T, d dialect) (*Store, *[]int64) {
	t.Helper()
	var mu sync.Mutex
	var notified []int64
	s := openDialect(t, d, Options{
		Notify: func(seq int64) { mu.Lock(); notified = append(notified, seq); mu.Unlock() },
		Now:    func() time.Time { return time.UnixMilli(1_700_000_000_000) },
	})
	return s, &notified
}

func newRun(t *testing.T, s *Store, id string) Run {
	t.Helper()
	r := Run{ID: id, Workspace: "/ws", Goal: "goal", Config: "{}", Conditions: "{}", Status: api.RunPending}
	if err := s.Write(t.Context(), func(tx *Tx) error { return tx.InsertRun(r, map[string]string{"run_id": id}) }); err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestMigrateFromEmpty(t *testing.T) {
	s, _ := openTest(t, sqliteDialect)
	var v int
	if err := s.r.Get(&v, "PRAGMA user_version"); err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion() || v < 1 {
		t.Errorf("user_version = %d, want %d", v, SchemaVersion())
	}
	var mode string
	if err := s.w.Get(&mode, "PRAGMA journal_mode"); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	for _, table := range []string{"runs", "steps", "events", "evaluations"} {
		var n int
		if err := s.r.Get(&n, "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name=?", table); err != nil || n != 1 {
			t.Errorf("table %s missing", table)
		}
	}
	if res, err := s.IntegrityCheck(t.Context()); err != nil || res != "ok" {
		t.Errorf("integrity_check = %q, %v", res, err)
	}
}

func TestReopenIsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopd.db")
	for range 3 {
		s, err := Open(t.Context(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

func TestRefuseNewerDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopd.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec("PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(t.Context(), path, Options{})
	if err == nil || !strings.Contains(err.Error(), "newer than this loopd") {
		t.Fatalf("Open of a newer database: %v", err)
	}
}

func TestMigrationsRollBackAsAUnit(t *testing.T) {
	db, err := sqlx.Open(driverName, filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fsys := fstest.MapFS{
		"0001_a.sql": {Data: []byte("CREATE TABLE a (x INTEGER);")},
		"0002_b.sql": {Data: []byte("CREATE TABLE b (x INTEGER); INSERT INTO nope VALUES (1);")},
	}
	if err := migrateFS(context.Background(), db, fsys); err == nil || !strings.Contains(err.Error(), "0002_b.sql") {
		t.Fatalf("migrate = %v, want an error naming 0002_b.sql", err)
	}
	var v, n int
	db.Get(&v, "PRAGMA user_version")
	db.Get(&n, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'b'")
	if v != 1 || n != 0 {
		t.Errorf("after failed migration: version %d, table b exists %v; want 1 and no table", v, n == 1)
	}
	bad := fstest.MapFS{"0001_a.sql": {Data: []byte("")}, "0003_c.sql": {Data: []byte("")}}
	if err := migrateFS(context.Background(), db, bad); err == nil || !strings.Contains(err.Error(), "0003_c.sql") {
		t.Errorf("a gap in numbering: %v", err)
	}
}

func TestTransitionCompareAndSet(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "aaaa1111")
		start := Transition{RunID: "aaaa1111", From: []api.RunStatus{api.RunPending}, To: api.RunRunning, Event: events.RunStarted}
		if err := s.Write(t.Context(), func(tx *Tx) error { return tx.TransitionRun(start) }); err != nil {
			t.Fatal(err)
		}
		// The same transition again no longer applies.
		err := s.Write(t.Context(), func(tx *Tx) error { return tx.TransitionRun(start) })
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("second claim = %v, want ErrConflict", err)
		}
		r, _ := s.Run(t.Context(), "aaaa1111")
		if r.Status != api.RunRunning || r.StartedAt == nil {
			t.Errorf("run = %+v", r)
		}
		evs, _ := s.Events(t.Context(), "aaaa1111", 0, 0)
		if len(evs) != 2 || evs[1].Type != events.RunStarted {
			t.Errorf("events = %+v; the failed CAS must not have added one", evs)
		}
		end := Transition{RunID: "aaaa1111", From: []api.RunStatus{api.RunRunning}, To: api.RunFailed,
			Reason: "max_consecutive_failures:verification:3", Event: events.RunFailed}
		if err := s.Write(t.Context(), func(tx *Tx) error { return tx.TransitionRun(end) }); err != nil {
			t.Fatal(err)
		}
		r, _ = s.Run(t.Context(), "aaaa1111")
		if r.ExitCode == nil || *r.ExitCode != 1 || r.EndedAt == nil || r.Reason != end.Reason {
			t.Errorf("terminal run = %+v", r)
		}
		if err := s.Write(t.Context(), func(tx *Tx) error { return tx.SetStopRequest("aaaa1111", StopNow) }); !errors.Is(err, ErrConflict) {
			t.Errorf("stop request on an ended run = %v, want ErrConflict", err)
		}
	})
}

func TestCheckConstraints(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		err := s.Write(t.Context(), func(tx *Tx) error {
			return tx.InsertRun(Run{ID: "bad", Workspace: "/", Goal: "g", Config: "{}", Status: "DANCING"}, nil)
		})
		// SQLite: "CHECK constraint failed"; PostgreSQL: "violates check constraint".
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "check constraint") {
			t.Errorf("insert with a bad status = %v, want a CHECK failure", err)
		}
		if _, err := s.Run(t.Context(), "bad"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the failed insert left a row: %v", err)
		}
	})
}

func TestEventCommitsWithStateChange(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, notified := openTest(t, d)
		newRun(t, s, "bbbb2222")
		boom := errors.New("boom")
		err := s.Write(t.Context(), func(tx *Tx) error {
			if err := tx.TransitionRun(Transition{RunID: "bbbb2222", From: []api.RunStatus{api.RunPending},
				To: api.RunRunning, Event: events.RunStarted}); err != nil {
				return err
			}
			return boom // roll back
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		r, _ := s.Run(t.Context(), "bbbb2222")
		evs, _ := s.Events(t.Context(), "bbbb2222", 0, 0)
		if r.Status != api.RunPending || len(evs) != 1 {
			t.Errorf("after rollback: status %s, %d events; want PENDING and only RUN_CREATED", r.Status, len(evs))
		}
		if len(*notified) != 1 {
			t.Errorf("notified %v; a rolled-back transaction must not wake followers", *notified)
		}
		seq, _ := s.LastEventSeq(t.Context())
		if (*notified)[0] != seq {
			t.Errorf("notified seq %d, last seq %d", (*notified)[0], seq)
		}
	})
}

func TestEventSeqIsGapFreeAndOrdered(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "cccc3333")
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				_ = s.Write(context.Background(), func(tx *Tx) error {
					if _, err := tx.Event("cccc3333", nil, events.ConditionProgressed, map[string]int{"i": i}); err != nil {
						return err
					}
					if i%3 == 0 {
						return errors.New("rolled back")
					}
					return nil
				})
			})
		}
		wg.Wait()
		evs, _ := s.Events(t.Context(), "", 0, 0)
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d: seqs must be gap-free", i, ev.Seq)
			}
		}
		if len(evs) != 1+13 {
			t.Errorf("%d events, want 14", len(evs))
		}
	})
}

func TestStepLifecycle(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "dddd4444")
		st := &Step{RunID: "dddd4444", Seq: 1, Phase: api.PhaseImplementation, Iteration: 1, LogPath: "/x.log"}
		if err := s.Write(t.Context(), func(tx *Tx) error { return tx.InsertStep(st, nil) }); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(t.Context(), func(tx *Tx) error { return tx.SetStepProcess(st.ID, 42, 42, 777, "boot") }); err != nil {
			t.Fatal(err)
		}
		running, _ := s.Steps(t.Context(), "dddd4444")
		if len(running) != 1 || running[0].Status != api.StepRunning || *running[0].Pid != 42 || *running[0].ProcStart != 777 {
			t.Fatalf("running = %+v", running)
		}
		if err := s.Write(t.Context(), func(tx *Tx) error { return tx.SetCancelCause(st.ID, CancelUser) }); err != nil {
			t.Fatal(err)
		}
		code, cost, passed := 0, 0.25, 3
		st.Status, st.ExitCode = api.StepSucceeded, &code
		st.InputTokens, st.ReportedCostUSD, st.TestsPassed = 100, &cost, &passed
		st.TestsFailedNames = Strings{"TestA", "TestB/x"}
		if err := s.Write(t.Context(), func(tx *Tx) error { return tx.FinishStep(st, events.StepFinished, nil) }); err != nil {
			t.Fatal(err)
		}
		// Finishing twice is a conflict, not a silent double record.
		if err := s.Write(t.Context(), func(tx *Tx) error { return tx.FinishStep(st, events.StepFinished, nil) }); !errors.Is(err, ErrConflict) {
			t.Errorf("second finish = %v, want ErrConflict", err)
		}
		got, err := s.Step(t.Context(), "dddd4444", 1)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != api.StepSucceeded || got.InputTokens != 100 || *got.ReportedCostUSD != 0.25 ||
			*got.TestsPassed != 3 || got.TestsFailed != nil || len(got.TestsFailedNames) != 2 || got.TestsFailedNames[1] != "TestB/x" {
			t.Errorf("step = %+v", got)
		}
		if light, _ := s.StepsLight(t.Context(), "dddd4444"); len(light) != 1 || light[0].CancelCause != CancelUser ||
			light[0].TestsFailedNames != nil || *light[0].TestsPassed != 3 {
			t.Errorf("light step = %+v", light)
		}
		evs, _ := s.Events(t.Context(), "dddd4444", 0, 0)
		types := []events.Type{}
		for _, e := range evs {
			types = append(types, e.Type)
		}
		want := []events.Type{events.RunCreated, events.StepStarted, events.StepFinished}
		if strings.Join(toStrings(types), ",") != strings.Join(toStrings(want), ",") {
			t.Errorf("events %v, want %v", types, want)
		}
	})
}

func toStrings(ts []events.Type) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

func TestResolveRun(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		for _, id := range []string{"abc123", "abd456", "ffff00"} {
			newRun(t, s, id)
		}
		tests := []struct {
			ref, workspace, want string
			wantErr              error
		}{
			{"abc123", "", "abc123", nil},
			{"abc", "", "abc123", nil},
			{"ABD", "", "abd456", nil},
			{"ab", "", "", &AmbiguousError{}},
			{"zzz", "", "", ErrNotFound},
			{"last", "/ws", "ffff00", nil},
			{"last", "/elsewhere", "", ErrNotFound},
			{"", "", "", ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.ref+"@"+tt.workspace, func(t *testing.T) {
				r, err := s.ResolveRun(t.Context(), tt.ref, tt.workspace)
				switch want := tt.wantErr.(type) {
				case nil:
					if err != nil || r.ID != tt.want {
						t.Errorf("got %q, %v; want %q", r.ID, err, tt.want)
					}
				case *AmbiguousError:
					var amb *AmbiguousError
					if !errors.As(err, &amb) || len(amb.Matches) != 2 {
						t.Errorf("got %v; want ambiguous with 2 matches", err)
					}
				default:
					if !errors.Is(err, want) {
						t.Errorf("got %v; want %v", err, want)
					}
				}
			})
		}
	})
}

func TestEvaluationsArePruned(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "eeee5555")
		for i := range EvaluationsKept + 30 {
			err := s.Write(t.Context(), func(tx *Tx) error {
				return tx.InsertEvaluation(Evaluation{RunID: "eeee5555", Iteration: i, Results: "[]"}, i%7 == 0)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		evs, _ := s.Evaluations(t.Context(), "eeee5555")
		if len(evs) != EvaluationsKept || evs[0].Iteration != 30 || evs[len(evs)-1].Iteration != EvaluationsKept+29 {
			t.Errorf("%d evaluations kept, first iteration %d", len(evs), evs[0].Iteration)
		}
	})
}

func TestMarkPostmortemOncePerEnding(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "ffff6666")
		end := Transition{RunID: "ffff6666", From: []api.RunStatus{api.RunPending}, To: api.RunInterrupted, Event: events.RunInterrupted}
		if err := s.Write(t.Context(), func(tx *Tx) error { return tx.TransitionRun(end) }); err != nil {
			t.Fatal(err)
		}
		mark := func() error {
			return s.Write(t.Context(), func(tx *Tx) error { return tx.MarkPostmortem("ffff6666", api.RunInterrupted, nil) })
		}
		if err := mark(); err != nil {
			t.Fatal(err)
		}
		if err := mark(); !errors.Is(err, ErrConflict) {
			t.Errorf("second MarkPostmortem = %v, want ErrConflict", err)
		}
		evs, _ := s.Events(t.Context(), "ffff6666", 0, 0)
		n := 0
		for _, e := range evs {
			if e.Type == events.PostmortemWritten {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d POSTMORTEM_WRITTEN events, want 1", n)
		}
	})
}

// 0012 rebuilds the steps table (its phase CHECK gains baseline): a
// database from before keeps every step, column for column, and the
// shared usage limit's index.
func TestMigrationRebuildingStepsKeepsThem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopd.db")
	db, err := sqlx.Open(driverName, path+"?_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	before := fstest.MapFS{}
	ms, err := loadMigrations(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version < 12 {
			before[m.name] = &fstest.MapFile{Data: []byte(m.sql)}
		}
	}
	if err := migrateFS(t.Context(), db, before); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO runs (id, workspace, goal, config, status, created_at, updated_at) VALUES ('r1', '/ws', 'g', '{}', 'RUNNING', 1, 1)`,
		`INSERT INTO steps (id, run_id, seq, phase, iteration, status, exit_code, error, started_at, ended_at, log_path,
			tests_failed, tests_failed_names, change_files, api_unavailable, reasoning_tokens, binary_files, question, answer,
			credential, rate_limited_until, cancel_cause)
		 VALUES (7, 'r1', 1, 'setup', 0, 'SUCCEEDED', 0, '', 10, 20, '/l/1', NULL, '[]', '[]', 0, 0, NULL, '', '', '', NULL, ''),
		        (8, 'r1', 2, 'verification', 1, 'FAILED', 1, 'exit code 1', 30, 40, '/l/2', 2, '["a","b"]', '["x.go"]', 1, 5, 3,
		         'why?', 'because', 'fp', 99, 'step_timeout')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	steps, err := s.Steps(t.Context(), "r1")
	if err != nil || len(steps) != 2 {
		t.Fatalf("steps after 0012 = %+v, %v", steps, err)
	}
	v := steps[1]
	if v.ID != 8 || v.Phase != api.PhaseVerification || v.Status != api.StepFailed || *v.ExitCode != 1 || v.Error != "exit code 1" ||
		*v.TestsFailed != 2 || strings.Join(v.TestsFailedNames, ",") != "a,b" || strings.Join(v.ChangeFiles, ",") != "x.go" ||
		!v.APIUnavailable || v.ReasoningTokens != 5 || *v.BinaryFiles != 3 || v.Question != "why?" || v.Answer != "because" ||
		v.Credential != "fp" || *v.RateLimitedUntil != 99 || v.CancelCause != CancelStepTimeout || len(v.TestsIgnoredNames) != 0 {
		t.Errorf("step after 0012 = %+v", v)
	}
	var idx int
	if err := s.r.Get(&idx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'steps_credential_limit'`); err != nil || idx != 1 {
		t.Errorf("steps_credential_limit after 0012: %d, %v", idx, err)
	}
}
