package storage

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

// claim runs ClaimRuns in a transaction of its own.
func claim(t *testing.T, s *Store, owner string, ttl time.Duration, limit int) []Claim {
	t.Helper()
	var got []Claim
	if err := s.Write(t.Context(), func(tx *Tx) error {
		var err error
		got, err = tx.ClaimRuns(owner, ttl, limit, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// claimHeld is claim by a worker that holds the runs held.
func claimHeld(t *testing.T, s *Store, owner string, held []string) []Claim {
	t.Helper()
	var got []Claim
	if err := s.Write(t.Context(), func(tx *Tx) error {
		var err error
		got, err = tx.ClaimRuns(owner, time.Hour, 10, held)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func claimIDs(cs []Claim) []string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.RunID)
	}
	slices.Sort(ids)
	return ids
}

// Two workers (two stores on one database) claim each run once, oldest
// first; a worker whose lease expired is fenced out of every write, its
// renewal answers nothing, and the run's new owner sees who it came from.
func TestLeasesClaimRenewFenceTakeover(t *testing.T) {
	url := pgDatabase(t)
	a, b := openURL(t, url), openURL(t, url)
	for _, id := range []string{"r1", "r2", "r3", "w1", "w2"} {
		newRun(t, a, id)
	}
	// Two WAITING runs: one whose wait is over (claimed after the
	// PENDING ones, as it is newer), one waiting for an answer (never).
	past := int64(1)
	if err := a.Write(t.Context(), func(tx *Tx) error {
		if err := tx.TransitionRun(Transition{RunID: "w1", From: []api.RunStatus{api.RunPending}, To: api.RunWaiting,
			WaitUntil: &past, Event: events.RunWaiting}); err != nil {
			return err
		}
		return tx.TransitionRun(Transition{RunID: "w2", From: []api.RunStatus{api.RunPending}, To: api.RunWaiting,
			Reason: ReasonNeedsAnswer, Event: events.RunWaiting})
	}); err != nil {
		t.Fatal(err)
	}
	ca := claim(t, a, "wa", time.Hour, 2)
	if got := claimIDs(ca); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Fatalf("worker a claimed %v, want the two oldest r1 r2", got)
	}
	for _, c := range ca {
		if c.Epoch != 1 || c.From != api.RunPending || c.FromWorker != "" {
			t.Errorf("claim %+v: want epoch 1 from PENDING, no previous worker", c)
		}
	}
	cb := claim(t, b, "wb", time.Hour, 10)
	if got := claimIDs(cb); !slices.Equal(got, []string{"r3", "w1"}) {
		t.Fatalf("worker b claimed %v, want r3 and the due WAITING w1 (the others are leased or wait for an answer)", got)
	}
	for _, c := range cb {
		if c.RunID == "w1" && c.From != api.RunWaiting {
			t.Errorf("w1 claimed from %s, want WAITING", c.From)
		}
	}
	if got := claim(t, b, "wb", time.Hour, 10); len(got) != 0 {
		t.Fatalf("a second claim took %v; every run is leased", claimIDs(got))
	}
	r1, err := b.Run(t.Context(), "r1")
	if err != nil || r1.Status != api.RunRunning || r1.Worker != "wa" {
		t.Fatalf("r1 = %s worker %q (%v), want RUNNING leased to wa", r1.Status, r1.Worker, err)
	}

	// a's fenced writes go through while it holds the lease.
	la := Lease{RunID: "r1", Owner: "wa", Epoch: 1}
	fenced := WithFence(t.Context(), la)
	if err := a.Write(fenced, func(tx *Tx) error { return tx.SetUserSignal("r1") }); err != nil {
		t.Fatalf("a fenced write under a live lease: %v", err)
	}
	// A stop recorded by another node (b: an API node's write, unfenced)
	// comes back with the renewal, which is how the worker running the
	// run learns of a stop --now while a step runs.
	if err := b.Write(t.Context(), func(tx *Tx) error { return tx.SetStopRequest("r2", StopNow) }); err != nil {
		t.Fatal(err)
	}
	renewed, err := a.RenewLeases(t.Context(), "wa", time.Hour, []Lease{la, {RunID: "r2", Owner: "wa", Epoch: 1}})
	slices.SortFunc(renewed, func(x, y Renewal) int { return strings.Compare(x.RunID, y.RunID) })
	if want := []Renewal{{RunID: "r1"}, {RunID: "r2", StopRequest: StopNow}}; err != nil || !slices.Equal(renewed, want) {
		t.Fatalf("renewal = %+v, %v; want %+v", renewed, err, want)
	}

	// The lease of r1 expires (a renewal with no time left): b takes it over.
	if _, err := a.RenewLeases(t.Context(), "wa", 0, []Lease{la}); err != nil {
		t.Fatal(err)
	}
	if got := claimHeld(t, a, "wa", []string{"r1", "r2"}); len(got) != 0 {
		t.Fatalf("worker a claimed its own held runs again: %v", claimIDs(got))
	}
	over := claim(t, b, "wb", time.Hour, 10)
	if len(over) != 1 || over[0].RunID != "r1" || over[0].Epoch != 2 || over[0].From != api.RunRunning || over[0].FromWorker != "wa" {
		t.Fatalf("takeover = %+v, want r1 epoch 2 from RUNNING of wa", over)
	}
	before, err := b.LastEventSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	err = a.Write(fenced, func(tx *Tx) error {
		_, err := tx.Event("r1", nil, events.RunPaused, nil)
		return err
	})
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("a stale worker's write = %v, want ErrFenced", err)
	}
	if after, _ := b.LastEventSeq(t.Context()); after != before {
		t.Fatalf("the fenced write added events: seq %d → %d", before, after)
	}
	renewed, err = a.RenewLeases(t.Context(), "wa", time.Hour, []Lease{la})
	if err != nil || len(renewed) != 0 {
		t.Fatalf("the stale worker's renewal = %v, %v; want nothing renewed", renewed, err)
	}
	own, err := b.OwnLeases(t.Context(), "wb")
	if err != nil || len(own) != 3 {
		t.Fatalf("b's own leases = %+v, %v; want r1, r3 and w1", own, err)
	}

	// Released (a draining worker): taken over at once, naming its worker.
	if err := b.ReleaseLease(t.Context(), Lease{RunID: "r3", Owner: "wb", Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if n, err := a.RunnableRuns(t.Context()); err != nil || n != 1 {
		t.Fatalf("runnable runs = %d, %v; want the released r3", n, err)
	}
	over = claim(t, a, "wa", time.Hour, 10)
	if len(over) != 1 || over[0].RunID != "r3" || over[0].Epoch != 2 || over[0].FromWorker != "wb" {
		t.Fatalf("claim after release = %+v, want r3 epoch 2 from wb", over)
	}
}

// Workers claiming at the same time never share a run: SKIP LOCKED hands
// each row to one of them.
func TestLeasesConcurrentClaimsNeverShare(t *testing.T) {
	url := pgDatabase(t)
	stores := []*Store{openURL(t, url), openURL(t, url), openURL(t, url), openURL(t, url)}
	const runs = 200
	if err := stores[0].Write(t.Context(), func(tx *Tx) error {
		for i := range runs {
			id := string(rune('a'+i/26/26%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i%26))
			if err := tx.InsertRun(Run{ID: id, Workspace: "/ws", Goal: "g", Config: "{}", Conditions: "{}",
				Status: api.RunPending}, nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for i, s := range stores {
		owner := string(rune('w')) + string(rune('0'+i))
		wg.Go(func() {
			for {
				var got []Claim
				err := s.Write(context.Background(), func(tx *Tx) error {
					var err error
					got, err = tx.ClaimRuns(owner, time.Hour, 3, nil)
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, c := range got {
					if prev, ok := seen[c.RunID]; ok {
						t.Errorf("run %s claimed by %s and %s", c.RunID, prev, owner)
					}
					seen[c.RunID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != runs {
		t.Fatalf("%d runs claimed, want %d", len(seen), runs)
	}
}

// The embedded store has no leases: a fence in the context changes
// nothing and a claim is refused.
func TestLeasesAreFleetOnly(t *testing.T) {
	s, _ := openTest(t, sqliteDialect)
	newRun(t, s, "r1")
	ctx := WithFence(t.Context(), Lease{RunID: "r1", Owner: "nobody", Epoch: 42})
	if err := s.Write(ctx, func(tx *Tx) error { return tx.SetUserSignal("r1") }); err != nil {
		t.Fatalf("a write with a fence on SQLite: %v", err)
	}
	err := s.Write(t.Context(), func(tx *Tx) error { _, err := tx.ClaimRuns("w", time.Minute, 1, nil); return err })
	if !errors.Is(err, ErrNotFleet) {
		t.Fatalf("claim on SQLite = %v, want ErrNotFleet", err)
	}
	if _, err := s.CheckpointUsage(t.Context(), "w", []UsageCheckpoint{{Step: Step{ID: 1, RunID: "r1"}, Epoch: 1}}); !errors.Is(err, ErrNotFleet) {
		t.Fatalf("usage checkpoint on SQLite = %v, want ErrNotFleet", err)
	}
}

// BenchmarkLeaseClaims is how fast a fleet claims runs: b.N PENDING runs,
// then 1, 4 or 16 workers (a store each, as separate processes would
// have) claiming them with one FOR UPDATE SKIP LOCKED statement each, one
// run per claim (a worker with one free slot) or ten. It reports
// runs_claimed/s.
func BenchmarkLeaseClaims(b *testing.B) {
	for _, workers := range []int{1, 4, 16} {
		for _, batch := range []int{1, 10} {
			b.Run("workers="+strconv.Itoa(workers)+"/batch="+strconv.Itoa(batch), func(b *testing.B) {
				url := pgDatabase(b)
				stores := make([]*Store, workers)
				for i := range stores {
					s, err := OpenPostgres(b.Context(), url, Options{Readers: 1})
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					stores[i] = s
				}
				if err := stores[0].Write(b.Context(), func(tx *Tx) error {
					for i := range b.N {
						if err := tx.InsertRun(Run{ID: "r" + strconv.Itoa(i), Workspace: "/ws", Goal: "g", Config: "{}",
							Conditions: "{}", Status: api.RunPending}, nil); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				var claimed atomic.Int64
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for i, s := range stores {
					wg.Go(func() {
						for {
							var got []Claim
							err := s.Write(context.Background(), func(tx *Tx) error {
								var err error
								got, err = tx.ClaimRuns("w"+strconv.Itoa(i), time.Minute, batch, nil)
								return err
							})
							if err != nil {
								b.Error(err)
								return
							}
							if len(got) == 0 {
								return
							}
							claimed.Add(int64(len(got)))
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				if int(claimed.Load()) != b.N {
					b.Fatalf("%d runs claimed, want %d", claimed.Load(), b.N)
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs_claimed/s")
			})
		}
	}
}

// BenchmarkLeaseRenewal is one worker's heartbeat: one statement renewing
// 20 or 500 leases.
func BenchmarkLeaseRenewal(b *testing.B) {
	for _, n := range []int{20, 500} {
		b.Run("leases="+strconv.Itoa(n), func(b *testing.B) {
			s := openDialect(b, postgresDialect, Options{})
			var leases []Lease
			if err := s.Write(b.Context(), func(tx *Tx) error {
				for i := range n {
					if err := tx.InsertRun(Run{ID: "r" + strconv.Itoa(i), Workspace: "/ws", Goal: "g", Config: "{}",
						Conditions: "{}", Status: api.RunPending}, nil); err != nil {
						return err
					}
				}
				cs, err := tx.ClaimRuns("w", time.Minute, n, nil)
				for _, c := range cs {
					leases = append(leases, Lease{RunID: c.RunID, Owner: "w", Epoch: c.Epoch})
				}
				return err
			}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				got, err := s.RenewLeases(b.Context(), "w", time.Minute, leases)
				if err != nil || len(got) != n {
					b.Fatalf("renewed %d, %v; want %d", len(got), err, n)
				}
			}
		})
	}
}

// A worker cut off in the middle of a transaction leaves its session idle
// in it, holding its run's row lock, and SKIP LOCKED skips that run at
// every claim. With the worker session's idle_in_transaction_session_timeout
// the server ends that session and the run is taken over; without it the
// run stays stuck.
func TestLeasesIdleTransactionDoesNotStrandItsRun(t *testing.T) {
	for _, c := range []struct {
		name    string
		session Session
		stuck   bool
	}{
		{"without the timeout", Session{}, true},
		{"with the timeout", Session{IdleInTransaction: time.Second}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := pgDatabase(t)
			a, err := OpenPostgres(t.Context(), url, Options{Session: c.session})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b := openURL(t, url)
			newRun(t, a, "r1")
			ca := claim(t, a, "wa", 0, 1) // leased, and expired at once
			if len(ca) != 1 {
				t.Fatalf("claimed %v", claimIDs(ca))
			}
			// a begins its fenced transaction (which locks the run's row),
			// then goes silent, as a worker cut off from the network would.
			locked := make(chan struct{})
			release := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- a.Write(WithFence(context.Background(), Lease{RunID: "r1", Owner: "wa", Epoch: ca[0].Epoch}), func(tx *Tx) error {
					close(locked)
					<-release
					return tx.SetUserSignal("r1")
				})
			}()
			<-locked
			var got []Claim
			deadline := time.Now().Add(4 * time.Second)
			for time.Now().Before(deadline) && len(got) == 0 {
				got = claim(t, b, "wb", time.Minute, 1)
				time.Sleep(100 * time.Millisecond)
			}
			close(release)
			werr := <-done
			if c.stuck {
				if len(got) != 0 {
					t.Fatalf("the locked run was claimed without the timeout: %+v", got)
				}
				if werr != nil {
					t.Fatalf("the slow worker's write failed without the timeout: %v", werr)
				}
				return
			}
			if len(got) != 1 || got[0].FromWorker != "wa" {
				t.Fatalf("claims within 4s of the stalled transaction = %+v, want r1 taken over from wa", got)
			}
			if werr == nil {
				t.Fatal("the stalled worker's transaction committed after its session was ended")
			}
		})
	}
}

// The worker's writing sessions carry their bounds; migrations do not
// (a long one must not hit the statement timeout).
func TestLeasesSessionBounds(t *testing.T) {
	url := pgDatabase(t)
	s, err := OpenPostgres(t.Context(), url, Options{Session: Session{IdleInTransaction: 5 * time.Second,
		Statement: 7 * time.Second, Lock: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, db := range []*sqlx.DB{s.w, s.lease} {
		for name, want := range map[string]string{"idle_in_transaction_session_timeout": "5s", "statement_timeout": "7s", "lock_timeout": "3s"} {
			var got string
			if err := db.Get(&got, "SHOW "+name); err != nil || got != want {
				t.Errorf("%s = %q (%v), want %s", name, got, err, want)
			}
		}
	}
}

// A usage checkpoint is fenced like any runner write: it lands only while
// the step's run is leased to its worker under the checkpoint's epoch. A
// worker that lost the run — to another worker, or to its own later claim
// (a newer epoch of the same worker id) — writes nothing, and is told
// which runs refused it. Each write names the lease it was made under in
// FencedSetting, where an audit trigger reads it.
func TestLeasesCheckpointUsageIsFenced(t *testing.T) {
	url := pgDatabase(t)
	a, b := openURL(t, url), openURL(t, url)
	for _, q := range []string{
		`CREATE TABLE fence_audit (step_id BIGINT, fenced TEXT, input_tokens BIGINT)`,
		`CREATE FUNCTION fence_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO fence_audit VALUES (NEW.id, COALESCE(current_setting('` + FencedSetting + `', true), ''), NEW.input_tokens);
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER fence_audit AFTER UPDATE ON steps FOR EACH ROW EXECUTE FUNCTION fence_audit()`,
	} {
		if _, err := a.w.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	lastAudit := func() (string, int64) {
		t.Helper()
		var fenced string
		var tokens int64
		if err := a.r.QueryRowxContext(t.Context(), `SELECT fenced, input_tokens FROM fence_audit ORDER BY ctid DESC LIMIT 1`).Scan(&fenced, &tokens); err != nil {
			t.Fatal(err)
		}
		return fenced, tokens
	}
	newRun(t, a, "r1")
	newRun(t, a, "r2")
	ca := claim(t, a, "wa", time.Hour, 2)
	if len(ca) != 2 {
		t.Fatalf("claimed %v", claimIDs(ca))
	}
	steps := map[string]*Step{}
	for _, id := range []string{"r1", "r2"} {
		st := &Step{RunID: id, Seq: 1, Phase: api.PhaseImplementation, Iteration: 1, LogPath: "/l/" + id}
		if err := a.Write(WithFence(t.Context(), Lease{RunID: id, Owner: "wa", Epoch: 1}), func(tx *Tx) error { return tx.InsertStep(st, nil) }); err != nil {
			t.Fatal(err)
		}
		steps[id] = st
	}
	usage := func(id string, tokens int64, epoch int64) UsageCheckpoint {
		st := *steps[id]
		st.InputTokens, st.UsageFound, st.Model = tokens, true, "m"
		return UsageCheckpoint{Step: st, Epoch: epoch}
	}
	tokens := func(id string) int64 {
		t.Helper()
		st, err := b.Step(t.Context(), id, 1)
		if err != nil {
			t.Fatal(err)
		}
		return st.InputTokens
	}

	// Under the live lease: written, and named in the setting.
	refused, err := a.CheckpointUsage(t.Context(), "wa", []UsageCheckpoint{usage("r1", 100, 1), usage("r2", 200, 1)})
	if err != nil || len(refused) != 0 {
		t.Fatalf("checkpoint under live leases = %v, %v; want nothing refused", refused, err)
	}
	if tokens("r1") != 100 || tokens("r2") != 200 {
		t.Fatalf("checkpointed input tokens = %d, %d; want 100, 200", tokens("r1"), tokens("r2"))
	}
	if fenced, n := lastAudit(); n != 200 || fenced != " r1@1 r2@1" {
		t.Fatalf("the checkpoint of r2 named the leases %q (tokens %d); want \" r1@1 r2@1\"", fenced, n)
	}

	// r1's lease expires; b takes it over (epoch 2). a's checkpoint of
	// r1 under epoch 1 is refused; r2's goes on.
	if _, err := a.RenewLeases(t.Context(), "wa", 0, []Lease{{RunID: "r1", Owner: "wa", Epoch: 1}}); err != nil {
		t.Fatal(err)
	}
	if over := claim(t, b, "wb", time.Hour, 10); len(over) != 1 || over[0].RunID != "r1" || over[0].Epoch != 2 {
		t.Fatalf("takeover = %+v, want r1 at epoch 2", over)
	}
	refused, err = a.CheckpointUsage(t.Context(), "wa", []UsageCheckpoint{usage("r1", 999, 1), usage("r2", 300, 1)})
	if err != nil || !slices.Equal(refused, []string{"r1"}) {
		t.Fatalf("checkpoint after the takeover = %v, %v; want r1 refused", refused, err)
	}
	if tokens("r1") != 100 || tokens("r2") != 300 {
		t.Fatalf("input tokens after the refused checkpoint = %d, %d; want r1 unchanged at 100, r2 300", tokens("r1"), tokens("r2"))
	}

	// The same worker id, an older epoch: a claims r1 back (epoch 3), and
	// its checkpoint under epoch 1 — a runner of the lease it lost — is
	// refused as well; under epoch 3 it lands.
	if _, err := b.RenewLeases(t.Context(), "wb", 0, []Lease{{RunID: "r1", Owner: "wb", Epoch: 2}}); err != nil {
		t.Fatal(err)
	}
	if back := claimHeld(t, a, "wa", []string{"r2"}); len(back) != 1 || back[0].Epoch != 3 {
		t.Fatalf("claim back = %+v, want r1 at epoch 3", back)
	}
	refused, err = a.CheckpointUsage(t.Context(), "wa", []UsageCheckpoint{usage("r1", 999, 1)})
	if err != nil || !slices.Equal(refused, []string{"r1"}) {
		t.Fatalf("checkpoint under the same worker's older epoch = %v, %v; want r1 refused", refused, err)
	}
	if tokens("r1") != 100 {
		t.Fatalf("r1's input tokens = %d after a stale-epoch checkpoint, want 100", tokens("r1"))
	}
	if refused, err = a.CheckpointUsage(t.Context(), "wa", []UsageCheckpoint{usage("r1", 400, 3)}); err != nil || len(refused) != 0 || tokens("r1") != 400 {
		t.Fatalf("checkpoint under epoch 3 = %v, %v, tokens %d; want written (400)", refused, err, tokens("r1"))
	}

	// A step that ended is left alone, and is no lease lost.
	st := *steps["r2"]
	st.Status, st.InputTokens = api.StepSucceeded, 300
	if err := a.Write(WithFence(t.Context(), Lease{RunID: "r2", Owner: "wa", Epoch: 1}), func(tx *Tx) error {
		return tx.FinishStep(&st, events.StepFinished, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if fenced, _ := lastAudit(); fenced != " r2@1" {
		t.Fatalf("the fenced transaction named the leases %q; want \" r2@1\"", fenced)
	}
	refused, err = a.CheckpointUsage(t.Context(), "wa", []UsageCheckpoint{usage("r2", 777, 1)})
	if err != nil || len(refused) != 0 || tokens("r2") != 300 {
		t.Fatalf("checkpoint of an ended step = %v, %v, tokens %d; want nothing refused and 300 kept", refused, err, tokens("r2"))
	}
}
