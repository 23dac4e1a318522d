package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/transcript"
)

// Fleet makes a Scheduler one worker of a fleet over a shared PostgreSQL
// database (docs/fleet.md). Without it (the embedded daemon) the
// scheduler takes no lease and nothing in this file runs.
//
// A worker claims runs, not steps, with one FOR UPDATE SKIP LOCKED
// statement; renews exactly the leases it executes every Heartbeat; fences
// every write of a runner by its run's owner and epoch; and stops its
// agents itself — from a watchdog that makes no database call, and from
// each step's wrapper reading DeadlineFile — once no renewal has
// succeeded for TTL − FenceMargin, so that by the time another worker may
// take a run over (TTL after the last renewal, on the database's clock)
// its agent here is dead.
type Fleet struct {
	WorkerID     string        // stable: the same after a restart
	TTL          time.Duration // lease length
	Heartbeat    time.Duration // renewal period; default TTL/6
	FenceMargin  time.Duration // agents stop at TTL − FenceMargin without a renewal
	Scan         time.Duration // how often to look for claimable runs and expired leases; default 2s
	DeadlineFile string        // where the self-fence deadline is written for the steps' wrappers
}

// Causes of a step stopped because its run's lease is gone or cannot be
// renewed. Such a step is INTERRUPTED, never a failure of its phase.
var (
	errLeaseLost  = errors.New("lease_lost: the run was taken over by another worker; its agent here was stopped")
	errSelfFenced = errors.New("self_fenced: no lease renewal succeeded for the lease TTL minus the fence margin; " +
		"the agent was stopped so that it never runs beside another worker's; the phase runs again")
)

// leaseBook is a worker's leases: the runs it executes, by epoch, and when
// a renewal last succeeded.
type leaseBook struct {
	f Fleet

	mu   sync.Mutex
	held map[string]int64 // run id → epoch
	// checkpointed is when each running step's usage was last
	// checkpointed (by step id).
	checkpointed map[int64]time.Time
	renewed      time.Time // when the last successful renewal was sent (monotonic clock)
	fenced       bool      // the watchdog has stopped every agent and no renewal succeeded since
	// swept is when sweepWorktrees last ran (the claim loop's own).
	swept time.Time
}

func newLeaseBook(f Fleet) *leaseBook {
	if f.Heartbeat <= 0 {
		f.Heartbeat = f.TTL / 6
	}
	if f.Scan <= 0 {
		f.Scan = 2 * time.Second
	}
	return &leaseBook{f: f, held: map[string]int64{}, checkpointed: map[int64]time.Time{}, renewed: time.Now()}
}

func (b *leaseBook) hold(id string, epoch int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held[id] = epoch
}

// forget drops id's lease if it is still the one of epoch.
func (b *leaseBook) forget(id string, epoch int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[id] == epoch {
		delete(b.held, id)
	}
}

func (b *leaseBook) epoch(id string) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.held[id]
	return e, ok
}

func (b *leaseBook) snapshot() []storage.Lease {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]storage.Lease, 0, len(b.held))
	for id, e := range b.held {
		out = append(out, storage.Lease{RunID: id, Owner: b.f.WorkerID, Epoch: e})
	}
	return out
}

// Leases lists the ids of the runs this worker holds (nil for an embedded
// daemon): `loopctl daemon status --json` shows them.
func (s *Scheduler) Leases() []string {
	if s.lease == nil {
		return nil
	}
	ls := s.lease.snapshot()
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.RunID
	}
	return ids
}

// WorkerID is this worker's id ("" for an embedded daemon).
func (s *Scheduler) WorkerID() string {
	if s.lease == nil {
		return ""
	}
	return s.lease.f.WorkerID
}

// claimLeased is claim for a fleet worker: one statement leases as many
// runs as there are free slots — PENDING, due WAITING, and RUNNING runs
// whose lease expired (a takeover) — with their events, then starts their
// runners. It returns when to look again.
func (s *Scheduler) claimLeased(ctx context.Context) (time.Time, error) {
	next := time.Now().Add(s.lease.f.Scan)
	free := s.opts.MaxConcurrent - s.Active()
	s.lease.mu.Lock()
	fenced := s.lease.fenced
	s.lease.mu.Unlock()
	if s.isStopping() || fenced {
		return next, nil
	}
	s.claimPostmortems(ctx)
	s.sweepWorktrees(ctx)
	if free <= 0 {
		return next, nil
	}
	me := s.lease.f.WorkerID
	var claims []storage.Claim
	err := s.store.Write(ctx, func(tx *storage.Tx) error {
		var err error
		if claims, err = tx.ClaimRuns(me, s.lease.f.TTL, free, s.Leases()); err != nil {
			return err
		}
		for _, c := range claims {
			typ, payload := events.RunStarted, map[string]any{"run_id": c.RunID, "worker": me}
			switch c.From {
			case api.RunWaiting:
				typ = events.RunResumed
				payload["reason"] = resumeWhy(c.FromReason)
			case api.RunRunning:
				// A takeover: the previous worker stopped renewing (or
				// released the run while draining). Its running step, if
				// any, is INTERRUPTED by the runner, fenced by the new epoch.
				typ = events.RunRecovered
				payload = map[string]any{"run_id": c.RunID, "from_worker": c.FromWorker, "to_worker": me, "epoch": c.Epoch}
			}
			if _, err := tx.Event(c.RunID, nil, typ, payload); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return next, err
	}
	for _, c := range claims {
		s.lease.hold(c.RunID, c.Epoch)
		from := ""
		if c.From == api.RunRunning {
			from = c.FromWorker
			s.log.Info("took over a run", zap.String("run", c.RunID), zap.String("from_worker", c.FromWorker), zap.Int64("epoch", c.Epoch))
		}
		s.startLeased(storage.Lease{RunID: c.RunID, Owner: me, Epoch: c.Epoch}, false, from)
	}
	if len(claims) == free {
		return time.Now(), nil // there may be more: look again at once
	}
	return next, nil
}

// resumeWhy is the RUN_RESUMED reason of a WAITING run claimed again.
func resumeWhy(reason string) string {
	switch reason {
	case "api_unavailable":
		return "back-off over: trying the model API again"
	case reasonDiskFull:
		return "retrying after LOOPD_HOME was out of disk space"
	}
	return "usage limit reset"
}

// startLeased launches the runner of a run leased to this worker. Every
// write of the runner is fenced by the lease. from names the worker the run
// was taken over from ("" for none, or when it was this worker's own).
func (s *Scheduler) startLeased(l storage.Lease, recovered bool, from string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.active[l.RunID]; ok {
		return
	}
	r := newRunner(s, l.RunID)
	r.ctx = storage.WithFence(r.ctx, l)
	r.epoch = l.Epoch
	if from != s.lease.f.WorkerID {
		r.takenFrom = from
	}
	s.active[l.RunID] = r
	s.activeChanged()
	s.runners.Go(func() {
		defer s.release(l.RunID)
		r.drive(recovered)
	})
}

// releaseLeased decides, for a fleet worker, what becomes of a run whose
// runner returned: a run still RUNNING under the same lease gets a new
// runner (resumed while its old one was returning); anything else — it
// left RUNNING, or its lease is gone — is forgotten.
func (s *Scheduler) releaseLeased(r *runner) {
	if r == nil {
		return
	}
	epoch, held := s.lease.epoch(r.id)
	if !held {
		return
	}
	if epoch == r.epoch && errors.Is(r.fencedCause(), errLeaseLost) {
		s.lease.forget(r.id, epoch) // this runner's lease is gone
		return
	}
	run, err := s.store.Run(context.Background(), r.id)
	if err == nil && run.Status == api.RunRunning && run.Worker == s.lease.f.WorkerID {
		s.startLeased(storage.Lease{RunID: r.id, Owner: s.lease.f.WorkerID, Epoch: epoch}, false, "")
		return
	}
	s.lease.forget(r.id, epoch)
}

// recoverLeased is recover for a fleet worker: it re-adopts the runs still
// leased to it (a restart within the lease), exactly as an embedded daemon
// adopts its RUNNING runs; runs whose lease expired are claimed like any
// other. Postmortems are written by the worker that ends a run, or by
// any worker's scan when that one was lost first (claimPostmortems).
//
// The leases are renewed before any of their runs runs, and the deadline
// file moves only with that renewal. A worker restarted just before its
// leases expire otherwise adopted them on a deadline counted from a
// renewal that covered none of them: its agents (the adopted orphans,
// whose wrappers watch the same deadline file, and the steps it started)
// ran for TTL − margin more while another worker took the expired runs
// over — two agents for one run, which the chaos campaign caught.
func (s *Scheduler) recoverLeased(ctx context.Context) error {
	own, err := s.store.OwnLeases(ctx, s.lease.f.WorkerID)
	if err != nil {
		return fmt.Errorf("reach the store: %w", err)
	}
	for _, l := range own {
		s.lease.hold(l.RunID, l.Epoch)
	}
	if err := s.renew(ctx); err != nil {
		return fmt.Errorf("reach the store: %w", err)
	}
	adopted := 0
	for _, l := range own {
		// A lease that expired and was taken over between the read and
		// the renewal was forgotten by renew: not this worker's to run.
		if epoch, ok := s.lease.epoch(l.RunID); ok && epoch == l.Epoch {
			s.startLeased(l, true, "")
			adopted++
		}
	}
	if adopted > 0 {
		s.log.Info("re-adopted own leases", zap.Int("runs", adopted))
	}
	return nil
}

// runLeases runs the heartbeat and the watchdog until ctx is done.
func (s *Scheduler) runLeases(ctx context.Context) {
	s.runners.Go(func() { s.heartbeat(ctx) })
	s.runners.Go(func() { s.watchdog(ctx) })
}

// heartbeat renews the worker's leases every Heartbeat.
func (s *Scheduler) heartbeat(ctx context.Context) {
	t := time.NewTicker(s.lease.f.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.renew(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("renew leases", zap.String("problem", storage.Explain(err)))
		}
	}
}

// renew renews every held lease in one statement (bounded by a heartbeat:
// a renewal that takes longer is late anyway), moves the deadline file
// forward, and stops the agents of the runs that were not renewed.
func (s *Scheduler) renew(ctx context.Context) error {
	held := s.lease.snapshot()
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, s.lease.f.Heartbeat)
	renewed, err := s.store.RenewLeases(rctx, s.lease.f.WorkerID, s.lease.f.TTL, held)
	cancel()
	if err != nil {
		return err
	}
	ok := make(map[string]bool, len(renewed))
	for _, rn := range renewed {
		ok[rn.RunID] = true
	}
	// The leases this renewal did not cover are forgotten, and their
	// runners fenced, before it counts as a success: a step held at its
	// gate while renewals were late (awaitLease) goes on as soon as one
	// succeeds, and in between it found its lost run's lease still held
	// and started its agent beside the new owner's (a worker resumed after
	// a freeze; caught by the chaos campaign).
	var lost []storage.Lease
	for _, l := range held {
		if ok[l.RunID] {
			continue
		}
		cur, still := s.lease.epoch(l.RunID)
		if !still || cur != l.Epoch {
			continue // claimed again or released meanwhile
		}
		s.lease.forget(l.RunID, l.Epoch)
		lost = append(lost, l)
	}
	for _, l := range lost {
		if r := s.runner(l.RunID); r != nil && r.epoch == l.Epoch {
			run, _ := s.store.Run(ctx, l.RunID)
			if run.Status == api.RunRunning {
				s.log.Warn("lease lost: stopping the run's agent", zap.String("run", l.RunID), zap.Int64("epoch", l.Epoch),
					zap.String("now_worker", run.Worker))
				r.fence(errLeaseLost)
			}
		}
	}
	// The lease runs from when the statement ran, which is after sent:
	// counting from sent keeps the deadline on the safe side.
	if err := s.writeDeadline(sent.Add(s.lease.f.TTL - s.lease.f.FenceMargin)); err != nil {
		return err
	}
	s.lease.mu.Lock()
	s.lease.renewed = sent
	if s.lease.fenced {
		s.lease.fenced = false
		s.log.Info("lease renewals succeed again")
	}
	s.lease.mu.Unlock()
	s.carryOutStops(held, renewed)
	s.checkpointUsage(ctx)
	return nil
}

// carryOutStops does, for each renewed run with a stop request, what
// the node that recorded the stop does when it runs the run itself
// (carryOutStop): a stop --now sent to an API node or another worker
// kills the step here within a heartbeat, instead of at the step's end —
// minutes of a paid agent the user asked to kill. The step is then
// recorded CANCELED and the run INTERRUPTED user_stop by its runner's own
// fenced writes, as for a local stop --now.
//
// Only the runner of the renewed epoch is touched: a run that ended with
// this stop and was claimed again since has a new epoch and a stop
// request of its own (none), which the renewal answered for the old one.
func (s *Scheduler) carryOutStops(held []storage.Lease, renewed []storage.Renewal) {
	epochs := make(map[string]int64, len(held))
	for _, l := range held {
		epochs[l.RunID] = l.Epoch
	}
	for _, rn := range renewed {
		if rn.StopRequest == "" {
			continue
		}
		r := s.runner(rn.RunID)
		if e, ok := epochs[rn.RunID]; !ok || r == nil || r.epoch != e {
			continue
		}
		if rn.StopRequest == storage.StopNow && r.stopSeen.CompareAndSwap(false, true) {
			r.log.Info("stop --now recorded for the run: killing its step", zap.Int64("epoch", r.epoch))
		}
		r.carryOutStop(rn.StopRequest)
	}
}

// checkpointEvery is the most a running step's usage goes without a
// checkpoint: what a lost machine's step loses of its accounting.
const checkpointEvery = 15 * time.Second

// checkpointUsage records, at most every checkpointEvery per step (and at
// the first heartbeat of a step), the usage the running agent steps'
// transcripts show so far: a step lost with its machine keeps that much
// of its tokens. Best effort: a failure is logged and tried again at the
// next heartbeat.
func (s *Scheduler) checkpointUsage(ctx context.Context) {
	s.mu.Lock()
	runners := make([]*runner, 0, len(s.active))
	for _, r := range s.active {
		runners = append(runners, r)
	}
	s.mu.Unlock()
	now := time.Now()
	var cps []storage.UsageCheckpoint
	byRun := map[string]*runner{}
	live := map[int64]bool{}
	for _, r := range runners {
		r.live.mu.Lock()
		st, prices := r.live.step, r.live.prices
		r.live.mu.Unlock()
		if st == nil || (st.Phase != api.PhaseImplementation && st.Phase != api.PhaseReview) {
			continue
		}
		live[st.ID] = true
		s.lease.mu.Lock()
		last, seen := s.lease.checkpointed[st.ID]
		s.lease.mu.Unlock()
		if seen && now.Sub(last)+s.lease.f.Heartbeat <= checkpointEvery {
			continue
		}
		res, err := transcript.ParseFile(st.LogPath)
		if err != nil {
			continue // nothing readable yet
		}
		cp := *st
		u := res.Usage
		cp.InputTokens, cp.OutputTokens, cp.CacheReadTokens, cp.CacheWriteTokens = u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens
		cp.ReasoningTokens, cp.UsageFound, cp.ReportedCostUSD, cp.Model = u.ReasoningTokens, res.UsageFound, u.ReportedCostUSD, res.Model
		if price, ok := prices.Lookup(cp.Model); ok && cp.UsageFound {
			cost := stop.Cost(stop.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
				CacheWriteTokens: u.CacheWriteTokens, CacheWrite1hTokens: u.CacheWrite1hTokens}, price)
			cp.PricedCostUSD = &cost
		}
		cps = append(cps, storage.UsageCheckpoint{Step: cp, Epoch: r.epoch})
		byRun[r.id] = r
	}
	if len(cps) > 0 {
		cctx, cancel := context.WithTimeout(ctx, s.lease.f.Heartbeat)
		refused, err := s.store.CheckpointUsage(cctx, s.lease.f.WorkerID, cps)
		cancel()
		if err != nil {
			s.log.Warn("checkpoint the running steps' usage", zap.String("problem", storage.Explain(err)))
			return
		}
		if len(refused) > 0 {
			// The fence refused the write: the run was taken over since
			// the renewal a moment ago. The same as any fenced write
			// refused: stop the agent, forget the run.
			s.log.Warn("usage checkpoint refused by the lease: the run was taken over; stopping its agent",
				zap.Int("refused", len(refused)), zap.Strings("runs", refused))
			for _, id := range refused {
				if r := byRun[id]; r != nil {
					s.lease.forget(id, r.epoch)
					r.fence(errLeaseLost)
				}
			}
		}
	}
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	for _, cp := range cps {
		s.lease.checkpointed[cp.Step.ID] = now
	}
	for id := range s.lease.checkpointed {
		if !live[id] {
			delete(s.lease.checkpointed, id) // ended
		}
	}
}

// writeDeadline replaces the deadline file (atomically: a wrapper never
// reads half of it) with at, in whole seconds rounded down.
func (s *Scheduler) writeDeadline(at time.Time) error {
	path := s.lease.f.DeadlineFile
	if path == "" {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(at.Unix(), 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the lease deadline: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write the lease deadline: %w", err)
	}
	return nil
}

// awaitLease holds a fleet step at its gate while the worker's renewals
// are late (its watchdog would kill the step at once): the step runs once
// a renewal succeeds. It fails with ErrFenced when the run's lease is lost
// meanwhile, and with errDetached when the daemon shuts down.
func (r *runner) awaitLease() error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		r.s.lease.mu.Lock()
		fenced := r.s.lease.fenced
		r.s.lease.mu.Unlock()
		if !fenced && !r.s.guardFired() {
			return nil
		}
		if errors.Is(r.fencedCause(), errLeaseLost) {
			return fmt.Errorf("run %s: %w", r.id, storage.ErrFenced)
		}
		if e, held := r.s.lease.epoch(r.id); !held || e != r.epoch {
			return fmt.Errorf("run %s: %w", r.id, storage.ErrFenced)
		}
		select {
		case <-r.s.detach:
			return errDetached
		case <-t.C:
		}
	}
}

// guardFired reports whether the steps' wrapper guard may have killed a
// step by now: no renewal succeeded for TTL − margin, less the second the
// guard's whole-second clock may fire early. False for an embedded daemon.
func (s *Scheduler) guardFired() bool {
	if s.lease == nil {
		return false
	}
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	return time.Since(s.lease.renewed) >= s.lease.f.TTL-s.lease.f.FenceMargin-time.Second
}

// watchdog stops every agent of the worker once no renewal has succeeded
// for TTL − FenceMargin. It makes no database call, so a worker cut off
// from the database, or whose calls hang, still stops its agents in time.
func (s *Scheduler) watchdog(ctx context.Context) {
	limit := s.lease.f.TTL - s.lease.f.FenceMargin
	t := time.NewTicker(min(max(limit/20, 10*time.Millisecond), 250*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.lease.mu.Lock()
		late := time.Since(s.lease.renewed)
		first := late >= limit && !s.lease.fenced
		if first {
			s.lease.fenced = true
		}
		fenced := s.lease.fenced
		s.lease.mu.Unlock()
		if !fenced {
			continue
		}
		if first {
			s.log.Error("no lease renewal succeeded in time: stopping every agent of this worker",
				zap.Duration("since_last_renewal", late), zap.Duration("limit", limit))
		}
		s.mu.Lock()
		runners := make([]*runner, 0, len(s.active))
		for _, r := range s.active {
			runners = append(runners, r)
		}
		s.mu.Unlock()
		for _, r := range runners {
			r.fence(errSelfFenced)
		}
	}
}

// Drain stops claiming, lets each running step finish (at most timeout),
// stops what is still running after that, and releases every lease so
// that another worker continues the runs at their next step: SIGTERM of a
// fleet worker (a scale-down, a rolling upgrade). A no-op for an embedded
// daemon, whose runs wait for it instead.
func (s *Scheduler) Drain(ctx context.Context, timeout time.Duration) {
	if s.lease == nil {
		return
	}
	s.mu.Lock()
	s.stopping = true
	n := len(s.active)
	s.mu.Unlock()
	s.log.Info("draining: no new claims; waiting for the running steps", zap.Int("runs", n), zap.Duration("timeout", timeout))
	if !s.waitIdle(timeout) {
		s.log.Warn("drain timeout: stopping the steps still running")
		s.KillSteps()
		s.waitIdle(s.opts.Grace + 10*time.Second)
	}
	for _, l := range s.lease.snapshot() {
		rctx, cancel := context.WithTimeout(ctx, s.lease.f.Heartbeat)
		err := s.store.ReleaseLease(rctx, l)
		cancel()
		if err != nil {
			s.log.Warn("release a lease", zap.String("run", l.RunID), zap.String("problem", storage.Explain(err)))
			continue
		}
		s.lease.forget(l.RunID, l.Epoch)
	}
	s.log.Info("drained: leases released")
}

// waitIdle waits until no runner is active, at most timeout.
func (s *Scheduler) waitIdle(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for s.Active() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// fence stops the runner's step at once (SIGKILL, without waiting for a
// database write: the database may be what is gone) and marks it so that
// it is recorded INTERRUPTED with cause, if anything can still be
// recorded.
func (r *runner) fence(cause error) {
	r.fenced.Store(&cause)
	r.live.kill(cause)
}

// fencedCause is why the runner's current step was stopped by fencing, or
// nil.
func (r *runner) fencedCause() error {
	if c := r.fenced.Load(); c != nil {
		return *c
	}
	return nil
}

// kill stops the running step at once: SIGKILL to its processes, then
// the cancel that ends Watch. Between steps it does nothing (the next
// write of a fenced-out runner fails; a self-fenced worker's watchdog
// fires again at its next tick).
func (l *liveStep) kill(cause error) {
	l.mu.Lock()
	cancel, proc := l.cancel, l.proc
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	if sig, ok := proc.(interface{ Signal(syscall.Signal) bool }); ok {
		sig.Signal(syscall.SIGKILL)
	}
	cancel(cause)
}

// cancelUnstarted records a step that a draining fleet worker inserted
// with the previous step's end but never let run: CANCELED, cause
// daemon_stop (not a failure; its phase runs again), so that the worker
// that continues the run does not find it RUNNING and take it for lost.
func (r *runner) cancelUnstarted(p *planned) error {
	st := p.step
	st.Status, st.Error, st.CancelCause = api.StepCanceled, errDaemonStop.Error(), storage.CancelDaemonStop
	if _, err := r.completeStep(st, events.StepFinished); err != nil {
		return err
	}
	return errDetached
}

// fencedOut reports whether err means the run's lease is gone: the runner
// stops its step and forgets the run.
func (r *runner) fencedOut(err error) bool {
	if !errors.Is(err, storage.ErrFenced) {
		return false
	}
	r.log.Warn("fenced out: the run's lease belongs to another worker now; forgetting the run", zap.Error(err))
	r.fence(errLeaseLost)
	return true
}

// isFenceCause reports whether a step is being stopped because of its
// lease: nothing is recorded before the kill (the database may be gone).
func isFenceCause(cause error) bool {
	return errors.Is(cause, errLeaseLost) || errors.Is(cause, errSelfFenced)
}

// interruptLost records the step a run's previous worker left RUNNING when
// this worker took the run over: INTERRUPTED worker_lost:<id>, never a
// failure of its phase, which runs again. Its process was on the other
// worker (stopped by that worker's wrapper guard before the takeover): it
// is neither adopted nor swept from here.
func (r *runner) interruptLost(st *storage.Step) (bool, error) {
	from := r.takenFrom
	r.takenFrom = ""
	st.Status = api.StepInterrupted
	st.Error = "worker_lost:" + from + ": the worker running this step stopped renewing its lease and the run was taken over; the phase runs again"
	now := r.s.opts.Now().UnixMilli()
	if fi, err := os.Stat(st.LogPath); err == nil {
		ended := max(fi.ModTime().UnixMilli(), st.StartedAt)
		st.EndedAt = &ended
	} else {
		st.EndedAt = &now
	}
	if _, err := os.Stat(st.LogPath); err == nil && st.Phase != api.PhaseVerification {
		r.readAgentOutput(st) // its log is on this machine: the tokens it spent, to its last line
	} // else the usage its worker last checkpointed stays

	return r.completeStep(st, events.StepInterrupted)
}

// guard is the deadline file each step's wrapper watches (see
// supervise.Spec.Guard): the worker's, "" for an embedded daemon.
func (s *Scheduler) guard() string {
	if s.lease == nil {
		return ""
	}
	return s.lease.f.DeadlineFile
}

// DeadlineFile is where a worker with home writes its self-fence deadline.
func DeadlineFile(home string) string { return filepath.Join(home, "lease-deadline") }
