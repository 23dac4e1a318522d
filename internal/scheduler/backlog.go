package scheduler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/atomicfile"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/storage"
)

// A backlog run is driven by a coordinator, not an agent loop: it starts
// the ready tasks as task runs (child runs, each in its own worktree from
// the integration branch's tip), lands each COMPLETED task run into the
// integration branch one at a time, and ends the backlog when nothing more
// can run.
//
// Crash safety: the database is the truth and every pass re-derives what
// to do from it, the task runs and the integration branch. Each transition
// is one transaction with its event: a task goes running together with
// its task run's row (a compare-and-set from ready, so it never starts
// twice); a land records its base before git moves the branch, and a task
// whose task run has landed (its landed_commit, written by the land
// itself or by landing's recovery from the land's intent) is recorded
// done, never landed again.

// backlogPoll is how often a coordinator looks again without news (a task
// run's end kicks it at once).
const backlogPoll = time.Second

// holdBeforeLandEnv names a test-only hook: when set to a file path, a
// coordinator writes that file after recording a land's intent and before
// landing, then holds (until shutdown). The crash test kills the daemon
// there.
const holdBeforeLandEnv = "LOOPD_TEST_HOLD_BEFORE_TASK_LAND"

// backlogRunner coordinates one RUNNING backlog run.
type backlogRunner struct {
	s    *Scheduler
	id   string
	log  *zap.Logger
	kick chan struct{}
	// again: the pass did a land (or settled one); the queue may hold
	// the next, so the next pass runs at once.
	again bool
}

// SetLander gives the scheduler the daemon's Lander: backlogs land their
// task runs through it (the lands a user asks for are serialised with
// them). Called once at daemon start, before Run.
func (s *Scheduler) SetLander(l *landing.Lander) { s.lander = l }

// startBacklog starts the coordinator of runID when it is a backlog run;
// false: it is not one (or cannot be read now: its runner will say why).
func (s *Scheduler) startBacklog(runID string, _ bool) bool {
	run, err := s.store.Run(context.Background(), runID)
	if err != nil || run.Kind != storage.KindBacklog {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.backlogs[runID]; ok || s.stopping {
		return true
	}
	b := &backlogRunner{s: s, id: runID, log: s.log.With(zap.String("backlog", runID)), kick: make(chan struct{}, 1)}
	s.backlogs[runID] = b
	s.runners.Go(func() {
		defer func() {
			s.mu.Lock()
			delete(s.backlogs, runID)
			s.mu.Unlock()
			// Resumed and claimed again while this one was returning.
			if !s.detached() && !s.isStopping() {
				if r, err := s.store.Run(context.Background(), runID); err == nil && r.Status == api.RunRunning {
					s.startBacklog(runID, false)
				}
			}
		}()
		b.drive()
	})
	return true
}

// kickBacklogs wakes every coordinator: a run ended, perhaps a task run.
func (s *Scheduler) kickBacklogs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.backlogs {
		b.poke()
	}
}

func (b *backlogRunner) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// drive runs passes until the backlog leaves RUNNING or the daemon stops.
// The passes' context ends when the daemon shuts down: a land's
// verification is stopped then (nothing lands, the next daemon lands it
// again), and every write is a whole transaction or none.
func (b *backlogRunner) drive() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-b.s.detach:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		done, err := b.pass(ctx)
		if done || b.s.detached() {
			return
		}
		wait := backlogPoll
		if b.again && err == nil {
			b.again = false
			continue
		}
		if err != nil {
			b.log.Error("backlog pass failed; trying again", zap.String("problem", storage.Explain(err)))
			wait = b.s.opts.RetryBackoff
		}
		select {
		case <-b.s.detach:
			return
		case <-b.kick:
		case <-time.After(wait):
		}
	}
}

// backlogState is what one pass read.
type backlogState struct {
	run      storage.Run
	cfg      config.Config
	tasks    []storage.Task
	children map[string]storage.Run
	held     map[string]bool // task runs the backlog's stop or pause holds (resumeHeld)
}

// pass does what can be done now; done: the backlog has left RUNNING.
func (b *backlogRunner) pass(ctx context.Context) (bool, error) {
	st, err := b.read(ctx)
	if err != nil {
		return false, err
	}
	if st.run.Status != api.RunRunning {
		return true, nil
	}
	if st.run.StopRequest != "" {
		return true, b.stop(ctx, st)
	}
	if st.run.PauseRequest {
		return true, b.pause(ctx, st)
	}
	if gone, err := b.ensureWorktree(ctx, &st.run); err != nil {
		if ctx.Err() != nil || storage.Transient(err) {
			return false, err // the daemon stops, or the database is busy: the next pass tries again
		}
		if gone {
			return true, b.end(ctx, st, api.RunAborted, "fatal:worktree_gone",
				fmt.Sprintf("the backlog's integration worktree %s is gone; every landed task is on branch %s (loopctl land %s lands it)",
					st.run.Worktree, st.run.Branch, shortOf(b.id)))
		}
		return true, b.end(ctx, st, api.RunAborted, "fatal:worktree_create",
			fmt.Sprintf("could not add the backlog's integration worktree at %s on branch %s: %v; fix the problem, then `loopctl resume %s`",
				st.run.Worktree, st.run.Branch, err, shortOf(b.id)))
	}
	if err := b.resumeHeld(ctx, st); err != nil {
		return false, err
	}
	if err := b.reconcile(ctx, st); err != nil {
		return false, err
	}
	if over, reason, desc := b.overBudget(ctx, st); over {
		b.stopChildren(ctx, st, true)
		return true, b.end(ctx, st, api.RunAborted, reason, desc)
	}
	if err := b.propagate(ctx, st); err != nil {
		return false, err
	}
	if err := b.landNext(ctx, st); err != nil {
		return false, err
	}
	if err := b.startReady(ctx, st); err != nil {
		return false, err
	}
	return b.finishIfDone(ctx, st)
}

func (b *backlogRunner) read(ctx context.Context) (*backlogState, error) {
	run, err := b.s.store.Run(ctx, b.id)
	if err != nil {
		return nil, err
	}
	cfg, _, err := decodeFrozen(run)
	if err != nil {
		return nil, err
	}
	tasks, err := b.s.store.Tasks(ctx, b.id)
	if err != nil {
		return nil, err
	}
	kids, err := b.s.store.ChildRuns(ctx, b.id)
	if err != nil {
		return nil, err
	}
	st := &backlogState{run: run, cfg: cfg, tasks: tasks, children: map[string]storage.Run{}}
	for _, k := range kids {
		st.children[k.ID] = k
	}
	return st, nil
}

// ensureWorktree adds the integration worktree and branch from the
// backlog's base commit the first time; safe to repeat after a crash.
// gone: the worktree was made once and has been removed since.
func (b *backlogRunner) ensureWorktree(ctx context.Context, run *storage.Run) (gone bool, err error) {
	if run.WorktreeState == "present" && git.IsWorktree(run.Worktree) {
		return false, nil
	}
	gctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	if !git.IsWorktree(run.Worktree) {
		if run.WorktreeState != "" {
			return true, fmt.Errorf("the integration worktree %s is gone", run.Worktree)
		}
		if err := git.AddWorktree(gctx, run.Workspace, run.Worktree, run.Branch, run.BaseCommit); err != nil {
			return false, err
		}
	}
	if err := b.s.store.Write(ctx, func(tx *storage.Tx) error { return tx.SetWorktreeState(b.id, "present") }); err != nil {
		return false, err
	}
	run.WorktreeState = "present"
	return false, nil
}

// integrationTip is the integration branch's commit now.
func (b *backlogRunner) integrationTip(ctx context.Context, run storage.Run) (string, error) {
	tip, err := git.Cmd{Dir: run.Workspace}.Output(ctx, "rev-parse", "-q", "--verify", "refs/heads/"+run.Branch+"^{commit}")
	if err != nil || tip == "" {
		return "", fmt.Errorf("the integration branch %s is missing in %s: %v", run.Branch, run.Workspace, err)
	}
	return tip, nil
}

// reconcile brings each started task in line with its task run: a task
// run that completed goes to the land queue, one that ended otherwise
// blocks its task, one that waits makes its task waiting.
func (b *backlogRunner) reconcile(ctx context.Context, st *backlogState) error {
	for i := range st.tasks {
		t := &st.tasks[i]
		if t.TaskRun == "" || (t.State != storage.TaskRunning && t.State != storage.TaskWaiting && t.State != storage.TaskLanding) {
			continue
		}
		child, ok := st.children[t.TaskRun]
		if !ok {
			return fmt.Errorf("task %s: its task run %s is missing", t.ID, t.TaskRun)
		}
		if st.held[child.ID] {
			continue // held by the backlog's stop or pause, not ended
		}
		var ch *storage.TaskChange
		var ev events.Type
		var payload map[string]any
		switch {
		case child.LandedCommit != "" && t.State != storage.TaskDone:
			// Landed (by this backlog before a crash cut the record short,
			// or recorded from the land's intent by landing's recovery):
			// recorded, never landed again.
			b.again = true
			return b.recordLanded(ctx, st, t, child, child.LandedCommit, b.landedVerified(ctx, child))
		case t.State == storage.TaskLanding && !child.Status.Terminal():
			// Sent back to its agent after a refused land, the record of
			// it cut short by a crash.
			ch = &storage.TaskChange{To: storage.TaskRunning, LandAttempt: true}
		case t.State == storage.TaskLanding:
			continue
		case child.Status == api.RunCompleted:
			ch = &storage.TaskChange{To: storage.TaskLanding}
		case child.Status == api.RunWaiting && t.State != storage.TaskWaiting:
			ch = &storage.TaskChange{To: storage.TaskWaiting}
		case (child.Status == api.RunRunning || child.Status == api.RunPending) && t.State == storage.TaskWaiting:
			ch = &storage.TaskChange{To: storage.TaskRunning}
		case child.Status == api.RunFailed || child.Status == api.RunAborted || child.Status == api.RunInterrupted:
			why := fmt.Sprintf("task run %s ended %s (%s)", shortOf(child.ID), child.Status, child.Reason)
			if child.Description != "" {
				why += ": " + firstLine(child.Description)
			}
			ch = &storage.TaskChange{To: storage.TaskBlocked, Why: &why}
			ev, payload = events.TaskBlocked, map[string]any{"task": t.ID, "title": t.Title, "run": child.ID, "why": why,
				"run_status": child.Status, "reason": child.Reason}
		default:
			continue
		}
		if ev == "" {
			// Landing, waiting and back to running carry TASK_STATE in the
			// same transaction: a follower re-reading on events would
			// otherwise show the old state until the next one (for a run
			// waiting out a usage limit, hours), and a crash between the
			// change and a separate event would lose the event.
			ev, payload = events.TaskState, map[string]any{"task": t.ID, "run": child.ID, "from": t.State, "to": ch.To}
		}
		ch.Backlog, ch.ID, ch.From = b.id, t.ID, []string{t.State}
		err := b.s.store.Write(ctx, func(tx *storage.Tx) error {
			if err := tx.ChangeTask(*ch); err != nil {
				return err
			}
			if ev != "" {
				_, err := tx.Event(b.id, nil, ev, payload)
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
		t.State = ch.To
		if ch.Why != nil {
			t.Why = *ch.Why
		}
		if ev == events.TaskBlocked {
			b.log.Info("task blocked", zap.String("task", t.ID), zap.String("why", t.Why))
		}
	}
	return nil
}

// landedVerified reads whether a task run's land tested what landed, from
// its RUN_LANDED event.
func (b *backlogRunner) landedVerified(ctx context.Context, child storage.Run) bool {
	evs, err := b.s.store.EventsOfType(ctx, child.ID, events.RunLanded)
	if err != nil || len(evs) == 0 {
		return false
	}
	var p struct {
		Verified bool `json:"verified"`
	}
	_ = json.Unmarshal([]byte(evs[len(evs)-1].Payload), &p)
	return p.Verified
}

// propagate makes pending tasks ready (every dependency done) or skipped
// (a dependency blocked or skipped), until nothing changes.
func (b *backlogRunner) propagate(ctx context.Context, st *backlogState) error {
	for changed := true; changed; {
		changed = false
		state := map[string]string{}
		for _, t := range st.tasks {
			state[t.ID] = t.State
		}
		for i := range st.tasks {
			t := &st.tasks[i]
			if t.State != storage.TaskPending {
				continue
			}
			ready, dead := true, ""
			for _, d := range t.Deps() {
				switch state[d] {
				case storage.TaskDone:
				case storage.TaskBlocked, storage.TaskSkipped:
					dead = d
				default:
					ready = false
				}
				if dead != "" {
					break
				}
			}
			var ch storage.TaskChange
			var ev events.Type
			var payload map[string]any
			switch {
			case dead != "":
				why := fmt.Sprintf("task %s, which it depends on, is %s", dead, state[dead])
				ch = storage.TaskChange{To: storage.TaskSkipped, Why: &why}
				ev, payload = events.TaskSkipped, map[string]any{"task": t.ID, "why": why, "dependency": dead}
			case ready:
				// With its event, so a follower (the dashboard, loopctl
				// watch) learns of it when it happens, not at the next event.
				ch = storage.TaskChange{To: storage.TaskReady}
				ev, payload = events.TaskState, map[string]any{"task": t.ID, "from": storage.TaskPending, "to": storage.TaskReady}
			default:
				continue
			}
			ch.Backlog, ch.ID, ch.From = b.id, t.ID, []string{storage.TaskPending}
			err := b.s.store.Write(ctx, func(tx *storage.Tx) error {
				if err := tx.ChangeTask(ch); err != nil {
					return err
				}
				if ev != "" {
					_, err := tx.Event(b.id, nil, ev, payload)
					return err
				}
				return nil
			})
			if err != nil {
				return err
			}
			t.State, changed = ch.To, true
			if ch.Why != nil {
				t.Why = *ch.Why
			}
		}
	}
	return nil
}

// landNext lands the first task of the land queue (one land at a time):
// its task run's branch is merged into the integration branch by
// landing's rules, the combination verified when the branch moved since
// the task run started. A refused land (a conflict, the combination
// failing) sends the task run back to its agent, on top of the new tip
// with the failure, up to land_retries times; then the task is blocked.
func (b *backlogRunner) landNext(ctx context.Context, st *backlogState) error {
	var t *storage.Task
	for i := range st.tasks {
		if st.tasks[i].State == storage.TaskLanding {
			if t == nil || st.tasks[i].UpdatedAt < t.UpdatedAt {
				t = &st.tasks[i]
			}
		}
	}
	if t == nil {
		return nil
	}
	b.again = true
	if b.s.lander == nil {
		return errors.New("no lander: the daemon did not give the scheduler one")
	}
	child := st.children[t.TaskRun]
	tip, err := b.integrationTip(ctx, st.run)
	if err != nil {
		return err
	}
	// The intent, before git moves anything: the integration tip the land
	// starts from.
	err = b.s.store.Write(ctx, func(tx *storage.Tx) error {
		return tx.ChangeTask(storage.TaskChange{Backlog: b.id, ID: t.ID, From: []string{storage.TaskLanding}, To: storage.TaskLanding, LandBase: &tip})
	})
	if err != nil {
		return err
	}
	if hold := os.Getenv(holdBeforeLandEnv); hold != "" {
		_ = os.WriteFile(hold, []byte(t.ID+"\n"), 0o600)
		<-b.s.detach
		return errDetached
	}
	ccfg, _, err := decodeFrozen(child)
	if err != nil {
		return err
	}
	// The task run lands into the integration branch, checked out in the
	// backlog's worktree: that worktree is the checkout the land moves.
	res, err := b.s.lander.Land(ctx, child, landing.LandOptions{NoVerify: len(ccfg.VerifyCommands) == 0, Checkout: st.run.Worktree})
	if err == nil {
		return b.recordLanded(ctx, st, t, child, res.Commit, res.Verified)
	}
	ref, ok := errors.AsType[*landing.Refusal](err)
	if !ok {
		return err
	}
	switch ref.Kind {
	case git.RefusedBusy, git.RefusedBaseMoved:
		b.again = false // no spin: the next poll, or a run's end, tries again
		return nil      // a land the user asked for holds or moved the repository
	case git.RefusedNothing:
		return b.recordNothing(ctx, t, child)
	case git.RefusedConflict, git.RefusedVerifyFailed:
		if t.LandAttempts < st.cfg.LandRetries {
			return b.sendBack(ctx, t, child, ref)
		}
	}
	why := fmt.Sprintf("its land into %s was refused (%s)", st.run.Branch, ref.Kind)
	if t.LandAttempts > 0 {
		why += fmt.Sprintf(" after %d retries", t.LandAttempts)
	}
	why += ": " + firstLine(ref.Message)
	return b.block(ctx, t, child.ID, why)
}

// sendBack resumes a task run whose land was refused on top of the
// integration branch's new tip, the refusal in its next prompt.
func (b *backlogRunner) sendBack(ctx context.Context, t *storage.Task, child storage.Run, ref *landing.Refusal) error {
	b.log.Info("task's land refused; sending it back to its agent", zap.String("task", t.ID), zap.String("kind", string(ref.Kind)),
		zap.Int("attempt", t.LandAttempts+1))
	if err := b.s.ResumeOntoBase(ctx, child.ID, nil); err != nil {
		return b.block(ctx, t, child.ID, fmt.Sprintf("its land was refused (%s) and its task run could not be resumed on the integration branch: %v",
			ref.Kind, err))
	}
	return b.s.store.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.ChangeTask(storage.TaskChange{Backlog: b.id, ID: t.ID, From: []string{storage.TaskLanding}, To: storage.TaskRunning,
			LandAttempt: true}); err != nil {
			return err
		}
		_, err := tx.Event(b.id, nil, events.TaskStarted, map[string]any{"task": t.ID, "run": child.ID,
			"land_retry": t.LandAttempts + 1, "refusal": string(ref.Kind), "message": firstLine(ref.Message)})
		return err
	})
}

func (b *backlogRunner) block(ctx context.Context, t *storage.Task, runID, why string) error {
	b.log.Info("task blocked", zap.String("task", t.ID), zap.String("why", why))
	err := b.s.store.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.ChangeTask(storage.TaskChange{Backlog: b.id, ID: t.ID, From: []string{t.State}, To: storage.TaskBlocked, Why: &why}); err != nil {
			return err
		}
		_, err := tx.Event(b.id, nil, events.TaskBlocked, map[string]any{"task": t.ID, "title": t.Title, "run": runID, "why": why})
		return err
	})
	if err == nil {
		t.State, t.Why = storage.TaskBlocked, why
	}
	return err
}

// recordLanded records a task done, landed as commit.
func (b *backlogRunner) recordLanded(ctx context.Context, st *backlogState, t *storage.Task, child storage.Run, commit string, verified bool) error {
	err := b.s.store.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.ChangeTask(storage.TaskChange{Backlog: b.id, ID: t.ID, From: []string{t.State}, To: storage.TaskDone,
			Landed: &commit, Verified: &verified}); err != nil {
			return err
		}
		if _, err := tx.Event(b.id, nil, events.TaskLanded, map[string]any{"task": t.ID, "run": child.ID, "commit": commit,
			"verified": verified, "branch": st.run.Branch}); err != nil {
			return err
		}
		_, err := tx.Event(b.id, nil, events.TaskDone, map[string]any{"task": t.ID, "run": child.ID, "title": t.Title})
		return err
	})
	if err != nil {
		return err
	}
	b.log.Info("task landed", zap.String("task", t.ID), zap.String("commit", commit), zap.Bool("verified", verified))
	t.State, t.LandedCommit, t.Verified = storage.TaskDone, commit, verified
	return nil
}

// recordNothing records done a task whose task run completed without
// changing anything: there is nothing to land.
func (b *backlogRunner) recordNothing(ctx context.Context, t *storage.Task, child storage.Run) error {
	why := "its task run completed without changing anything: nothing to land"
	err := b.s.store.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.ChangeTask(storage.TaskChange{Backlog: b.id, ID: t.ID, From: []string{t.State}, To: storage.TaskDone, Why: &why}); err != nil {
			return err
		}
		_, err := tx.Event(b.id, nil, events.TaskDone, map[string]any{"task": t.ID, "run": child.ID, "title": t.Title, "nothing_to_land": true})
		return err
	})
	if err == nil {
		t.State, t.Why = storage.TaskDone, why
	}
	return err
}

// startReady starts ready tasks, priority first then list order, while
// fewer than max_parallel_tasks task runs are under way.
func (b *backlogRunner) startReady(ctx context.Context, st *backlogState) error {
	busy := 0
	var ready []*storage.Task
	var done []string
	for i := range st.tasks {
		t := &st.tasks[i]
		switch t.State {
		case storage.TaskRunning, storage.TaskWaiting:
			busy++
		case storage.TaskReady:
			ready = append(ready, t)
		case storage.TaskDone:
			done = append(done, t.Title)
		}
	}
	slices.SortStableFunc(ready, func(x, y *storage.Task) int {
		px, py := x.Priority, y.Priority
		if px == 0 {
			px = int(^uint(0) >> 1)
		}
		if py == 0 {
			py = int(^uint(0) >> 1)
		}
		return cmp.Or(cmp.Compare(px, py), cmp.Compare(x.Position, y.Position))
	})
	for _, t := range ready {
		if busy >= max(st.cfg.MaxParallelTasks, 1) {
			break
		}
		if err := b.startTask(ctx, st, t, done); err != nil {
			return err
		}
		busy++
	}
	return nil
}

// startTask creates a task's task run and marks the task running in one
// transaction (a compare-and-set from ready: never twice).
func (b *backlogRunner) startTask(ctx context.Context, st *backlogState, t *storage.Task, done []string) error {
	run := st.run
	tip, err := b.integrationTip(ctx, run)
	if err != nil {
		return err
	}
	ccfg, err := st.cfg.With(run.Workspace, taskSets(t.Set()))
	if err != nil {
		return b.block(ctx, t, "", "its settings are invalid: "+strings.Join(problems(err), "; "))
	}
	ccfg.TasksFile, ccfg.TasksCommand = "", ""
	ccfg.Isolation = config.IsolationWorktree
	// The backlog's budgets count every task run together (the backlog
	// enforces them); a task run has the per-task ones.
	if _, own := t.Set()["max_cost"]; !own {
		ccfg.MaxCost = ccfg.MaxTaskCost
	}
	ccfg.MaxTokens, ccfg.MaxDuration = 0, 0
	if ccfg.MaxTaskIterations > 0 {
		ccfg.MaxIterations = ccfg.MaxTaskIterations
	}
	if t.VerifyCommand != "" {
		ccfg.VerifyCommands = []string{t.VerifyCommand}
	}
	goal := taskPrompt(run.Goal, *t, done)
	ccfg.Prompt, ccfg.PromptFile = goal, ""
	cfgJSON, err := json.Marshal(ccfg)
	if err != nil {
		return err
	}
	common, err := git.Cmd{Dir: run.Workspace}.Output(ctx, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return fmt.Errorf("find the repository of %s: %w", run.Workspace, err)
	}
	envTrust, err := b.s.store.RunEnvTrust(ctx, b.id)
	if err != nil {
		return err
	}
	id := newID()
	child := storage.Run{ID: id, Name: t.ID, Workspace: run.Workspace, Goal: goal, Config: string(cfgJSON), Conditions: run.Conditions,
		Status: api.RunPending, Isolation: string(config.IsolationWorktree), Worktree: b.s.WorktreePath(id),
		Branch: "loop/" + shortOf(id), BaseBranch: run.Branch, BaseCommit: tip, Parent: b.id}
	err = b.s.store.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.ChangeTask(storage.TaskChange{Backlog: b.id, ID: t.ID, From: []string{storage.TaskReady}, To: storage.TaskRunning,
			TaskRun: &id}); err != nil {
			return err
		}
		if err := tx.InsertRun(child, map[string]any{"run_id": id, "name": t.ID, "workspace": run.Workspace, "isolation": child.Isolation,
			"worktree": child.Worktree, "branch": child.Branch, "base_branch": child.BaseBranch, "base_commit": tip,
			"parent": b.id, "task": t.ID}); err != nil {
			return err
		}
		for _, o := range []storage.GitObject{
			{RunID: id, Kind: storage.GitWorktree, Repo: common, Name: child.Worktree},
			{RunID: id, Kind: storage.GitBranch, Repo: common, Name: child.Branch},
		} {
			if err := tx.RecordGitObject(o); err != nil {
				return err
			}
		}
		if envTrust != "" {
			if err := tx.RequireEnvTrust(id, envTrust); err != nil {
				return err
			}
		}
		_, err := tx.Event(b.id, nil, events.TaskStarted, map[string]any{"task": t.ID, "run": id, "base_commit": tip})
		return err
	})
	if err != nil {
		return err
	}
	b.log.Info("task started", zap.String("task", t.ID), zap.String("run", id), zap.String("base", tip))
	t.State, t.TaskRun = storage.TaskRunning, id
	b.s.Wake()
	return nil
}

// taskPrompt is a task run's goal: the backlog's goal, the task, and the
// titles of the tasks already done.
func taskPrompt(goal string, t storage.Task, done []string) string {
	var sb strings.Builder
	sb.WriteString(strings.TrimSpace(goal))
	fmt.Fprintf(&sb, "\n\n## Your task (%s): %s\n", t.ID, t.Title)
	if d := strings.TrimSpace(t.Description); d != "" {
		sb.WriteString("\n" + d + "\n")
	}
	if len(done) > 0 {
		sb.WriteString("\n## Already done (landed; build on it, do not redo it)\n\n")
		for _, d := range done {
			sb.WriteString("- " + d + "\n")
		}
	}
	sb.WriteString("\nWork on this task only: the backlog's other tasks are given to other runs.\n")
	return sb.String()
}

// overBudget checks the backlog's budgets, which count every task run:
// max_cost, max_tokens, max_duration (wall time since the backlog started).
func (b *backlogRunner) overBudget(ctx context.Context, st *backlogState) (bool, string, string) {
	cfg := st.cfg
	if cfg.MaxCost <= 0 && cfg.MaxTokens <= 0 && cfg.MaxDuration <= 0 {
		return false, "", ""
	}
	if cfg.MaxDuration > 0 && st.run.StartedAt != nil {
		if el := time.Duration(b.s.opts.Now().UnixMilli()-*st.run.StartedAt) * time.Millisecond; el >= time.Duration(cfg.MaxDuration) {
			return true, "max_duration:" + time.Duration(cfg.MaxDuration).String(),
				fmt.Sprintf("the backlog ran for %s, its max_duration", el.Round(time.Second))
		}
	}
	if len(st.children) == 0 {
		return false, "", ""
	}
	kids := make([]storage.Run, 0, len(st.children))
	for _, k := range st.children {
		kids = append(kids, k)
	}
	views, err := b.s.DescribeList(ctx, kids)
	if err != nil {
		b.log.Warn("read the task runs' usage", zap.Error(err))
		return false, "", ""
	}
	var cost float64
	var tokens int64
	for _, v := range views {
		cost += v.Usage.CostUSD
		tokens += v.Usage.InputTokens + v.Usage.OutputTokens + v.Usage.CacheReadTokens + v.Usage.CacheWriteTokens
	}
	switch {
	case cfg.MaxCost > 0 && cost >= cfg.MaxCost:
		return true, "max_cost:" + strconv.FormatFloat(cfg.MaxCost, 'f', 2, 64),
			fmt.Sprintf("the backlog's task runs cost $%.2f together, its max_cost is $%.2f", cost, cfg.MaxCost)
	case cfg.MaxTokens > 0 && tokens >= cfg.MaxTokens:
		return true, "max_tokens:" + strconv.FormatInt(cfg.MaxTokens, 10),
			fmt.Sprintf("the backlog's task runs used %d tokens together, its max_tokens is %d", tokens, cfg.MaxTokens)
	}
	return false, "", ""
}

// finishIfDone ends the backlog when nothing more can run: COMPLETED when
// every task is done, else FAILED with the number of blocked tasks.
func (b *backlogRunner) finishIfDone(ctx context.Context, st *backlogState) (bool, error) {
	done, blocked := 0, 0
	for _, t := range st.tasks {
		switch t.State {
		case storage.TaskDone:
			done++
		case storage.TaskBlocked:
			blocked++
		case storage.TaskSkipped:
		default:
			return false, nil
		}
	}
	if done == len(st.tasks) {
		return true, b.end(ctx, st, api.RunCompleted, "completed:tasks:"+strconv.Itoa(done),
			fmt.Sprintf("every task (%d) landed in %s; `loopctl land %s` lands it into %s", done, st.run.Branch, shortOf(b.id), st.run.BaseBranch))
	}
	return true, b.end(ctx, st, api.RunFailed, "tasks_blocked:"+strconv.Itoa(blocked),
		fmt.Sprintf("%d task(s) blocked, %d skipped, %d done (in %s); `loopctl tasks %s` says why, `loopctl tasks %s --retry ID` re-opens one",
			blocked, len(st.tasks)-done-blocked, done, st.run.Branch, shortOf(b.id), shortOf(b.id)))
}

var terminalEvents = map[api.RunStatus]events.Type{api.RunCompleted: events.RunCompleted, api.RunFailed: events.RunFailed,
	api.RunAborted: events.RunAborted, api.RunInterrupted: events.RunInterrupted}

// end moves the backlog to a terminal status.
func (b *backlogRunner) end(ctx context.Context, st *backlogState, status api.RunStatus, reason, desc string) error {
	err := b.s.store.Write(ctx, func(tx *storage.Tx) error {
		return tx.TransitionRun(storage.Transition{RunID: b.id, From: []api.RunStatus{api.RunRunning}, To: status, Reason: reason,
			Description: desc, ClearRequests: true, Event: terminalEvents[status],
			Payload: events.TerminalPayload{RunID: b.id, Reason: reason, Description: desc}})
	})
	if errors.Is(err, storage.ErrConflict) {
		return nil
	}
	if err != nil {
		return err
	}
	b.log.Info("backlog "+strings.ToLower(string(status)), zap.String("reason", reason))
	b.s.finished(b.id)
	return nil
}

// heldFile lists, in the backlog's run directory, the task runs the
// backlog's own stop or pause held: they go on when the backlog does, and
// until then their ending INTERRUPTED or PAUSED does not block their task.
// It is written before they are stopped, so a crash in between leaves the
// list, never a held task run the backlog would take for failed.
const heldFile = "held-task-runs.json"

func (b *backlogRunner) heldPath() string {
	return filepath.Join(b.s.opts.Home, "runs", b.id, heldFile)
}

func (b *backlogRunner) readHeld() map[string]bool {
	var ids []string
	if data, err := os.ReadFile(b.heldPath()); err == nil {
		_ = json.Unmarshal(data, &ids)
	}
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

func (b *backlogRunner) writeHeld(held map[string]bool) error {
	if len(held) == 0 {
		if err := os.Remove(b.heldPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	ids := slices.Sorted(maps.Keys(held))
	data, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(b.heldPath()), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(b.heldPath(), data)
}

// hold records the backlog's live task runs as held by it, then stops
// (stop) or pauses them.
func (b *backlogRunner) hold(ctx context.Context, st *backlogState, stop, now bool) error {
	held := b.readHeld()
	var live []storage.Run
	for _, k := range st.children {
		if !k.Status.Terminal() && k.Status != api.RunPaused {
			held[k.ID] = true
			live = append(live, k)
		}
	}
	if err := b.writeHeld(held); err != nil {
		return err
	}
	for _, k := range live {
		var err error
		if stop {
			err = b.s.Stop(ctx, k.ID, now)
		} else {
			err = b.s.Pause(ctx, k.ID)
		}
		if err != nil {
			b.log.Warn("hold a task run", zap.String("run", k.ID), zap.Bool("stop", stop), zap.Error(err))
		}
	}
	return nil
}

// resumeHeld continues the task runs the backlog's own stop or pause held,
// now that the backlog runs again: PAUSED ones, and those a stop ended
// INTERRUPTED. One still finishing its step stays held for a later pass;
// reconcile leaves the held ones alone.
func (b *backlogRunner) resumeHeld(ctx context.Context, st *backlogState) error {
	held := b.readHeld()
	if len(held) == 0 {
		return nil
	}
	for id := range held {
		k, ok := st.children[id]
		switch {
		case !ok:
			delete(held, id)
		case k.Status == api.RunPaused || (k.Status == api.RunInterrupted && k.Reason == "user_stop"):
			if err := b.s.Resume(ctx, id, nil); err != nil {
				b.log.Warn("resume a held task run", zap.String("run", id), zap.Error(err))
			} else {
				k.Status = api.RunPending
				st.children[id] = k
			}
			delete(held, id)
		case k.Status.Terminal():
			delete(held, id) // it ended otherwise: reconcile decides
		case k.PauseRequest && k.StopRequest == "":
			// Still in the step it was to pause after: resume cancels
			// the pause.
			if err := b.s.Resume(ctx, id, nil); err != nil {
				b.log.Warn("resume a held task run", zap.String("run", id), zap.Error(err))
			}
			delete(held, id)
		case k.StopRequest == "" && !k.PauseRequest:
			delete(held, id) // never held after all (it had ended its step)
		}
	}
	if err := b.writeHeld(held); err != nil {
		return err
	}
	st.held = held
	return nil
}

// stop carries out loopctl stop of the backlog: its task runs are stopped
// (at once with --now, else after their step), the backlog INTERRUPTED.
func (b *backlogRunner) stop(ctx context.Context, st *backlogState) error {
	if err := b.hold(ctx, st, true, st.run.StopRequest == storage.StopNow); err != nil {
		return err
	}
	return b.end(ctx, st, api.RunInterrupted, "user_stop", "stopped by the user; `loopctl resume` continues the backlog and its task runs")
}

// pause carries out loopctl pause of the backlog: its running task runs
// are paused (after their step) and the backlog PAUSED.
func (b *backlogRunner) pause(ctx context.Context, st *backlogState) error {
	if err := b.hold(ctx, st, false, false); err != nil {
		return err
	}
	err := b.s.store.Write(ctx, func(tx *storage.Tx) error {
		return tx.TransitionRun(storage.Transition{RunID: b.id, From: []api.RunStatus{api.RunRunning}, To: api.RunPaused,
			ClearRequests: true, Event: events.RunPaused, Payload: map[string]any{"run_id": b.id}})
	})
	if errors.Is(err, storage.ErrConflict) {
		return nil
	}
	return err
}

// stopChildren stops the backlog's live task runs (its budget is spent).
func (b *backlogRunner) stopChildren(ctx context.Context, st *backlogState, now bool) {
	for _, k := range st.children {
		if k.Status.Terminal() {
			continue
		}
		if err := b.s.Stop(ctx, k.ID, now); err != nil {
			b.log.Warn("stop a task run", zap.String("run", k.ID), zap.Error(err))
		}
	}
}
