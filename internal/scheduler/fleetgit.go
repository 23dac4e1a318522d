package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/atomicfile"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/trust"
)

// A fleet run comes from git (docs/fleet.md, "Workspaces from git"): it
// records the repository's URL and a base commit, and whichever worker
// holds it works in a worktree of that worker's own mirror of the
// repository, on the run's branch loop/<short-id>. After every ledger
// commit the worker — not the agent, which never sees a credential —
// pushes the branch with a lease on the commit it last recorded as
// pushed; the commit pushed is recorded in the step's STEP_FINISHED (or
// STEP_INTERRUPTED) event as pushed_commit, in the step's fenced
// transaction. A worker that takes the run over starts from that commit:
// what the worker before it committed and never pushed is lost, and its
// phase runs again.

// fleetGit is a fleet run's git state on this worker, reset at each load.
type fleetGit struct {
	ready  bool   // the worktree was provisioned since the load
	pushed string // the last pushed commit recorded ("" none: the remote branch must not exist)
	// The commit pushed for the step being finished (by its seq), for
	// its event.
	pushSeq    int
	pushCommit string
	// refused is a push the remote refused because someone else moved
	// the branch: the run stops with it.
	refused error
	// After a takeover the worktree starts at pushed, which may be
	// older than the newest change the database knows (recorded, never
	// pushed): the next change is counted from start, not from that.
	start    string
	startSeq int
}

// fromGit reports whether the run is a fleet run from a repository URL.
func (r *runner) fromGit() bool { return r.run.RepoURL != "" }

// loadFleetGit fits a fleet run's workspace to this worker: its worktree
// and workdir are this worker's (the run's worktree column names the API
// node's path, never used), isolation is always a worktree, and the last
// pushed commit is read from the run's step events.
func (r *runner) loadFleetGit() {
	r.git = fleetGit{}
	r.run.Isolation = string(config.IsolationWorktree)
	r.run.Worktree = r.s.WorktreePath(r.id)
	if r.run.Branch == "" {
		r.run.Branch = "loop/" + shortOf(r.id)
	}
	r.git.pushed = r.lastPushed()
}

// lastPushed is the newest pushed_commit of the run's step events.
func (r *runner) lastPushed() string {
	var newest int64
	pushed := ""
	for _, typ := range []events.Type{events.StepFinished, events.StepInterrupted} {
		evs, err := r.s.store.EventsOfType(r.ctx, r.id, typ)
		if err != nil {
			r.log.Warn("read the run's pushed commit", zap.Error(err))
			continue
		}
		for _, ev := range evs {
			var p struct {
				Pushed string `json:"pushed_commit"`
			}
			if ev.Seq > newest && json.Unmarshal([]byte(ev.Payload), &p) == nil && p.Pushed != "" {
				newest, pushed = ev.Seq, p.Pushed
			}
		}
	}
	return pushed
}

// prepareFleetWorkspace provisions a fleet run's worktree once per load:
// kept as it is when this worker's worktree is where the database says
// the run's changes stand (a restart of this worker: an adopted step
// may be working in it), otherwise (re)made at the last pushed commit,
// or the base commit before any push. A remote branch moved past the
// recorded commit by a push whose record was lost with its worker is
// set back to it (with a lease on what is there): that iteration runs
// again.
func (r *runner) prepareFleetWorkspace() *decision {
	if r.git.refused != nil {
		return &decision{status: api.RunAborted, reason: "fatal:branch_moved", event: events.RunAborted,
			description: fmt.Sprintf("%v. The run stops here: its pushed work is on %s up to %s",
				r.git.refused, r.run.Branch, shortOf(r.git.pushed))}
	}
	if r.git.ready {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.ctx, ledgerTimeout)
	defer cancel()
	point := r.ledgerPoint(ctx)
	if git.IsWorktree(r.run.Worktree) {
		if head, err := (git.Cmd{Dir: r.run.Worktree}).Output(ctx, "rev-parse", "HEAD"); err == nil && head == point {
			if d := r.checkSnapshot(ctx); d != nil {
				return d
			}
			r.git.ready = true
			return nil
		}
	}
	start := r.git.pushed
	if start == "" {
		start = r.run.BaseCommit
	}
	m := git.Mirrors{Dir: filepath.Join(r.s.opts.Home, "mirrors")}
	mirror, err := m.AddRunWorktree(ctx, git.RunWorktree{URL: r.run.RepoURL, Path: r.run.Worktree, Branch: r.run.Branch, Start: start})
	if err != nil {
		return &decision{status: api.RunAborted, reason: "fatal:worktree_create", event: events.RunAborted,
			description: fmt.Sprintf("could not make the run's worktree from %s at %s on this worker: %v; fix the problem, then `loopctl resume %s`",
				r.run.RepoURL, shortOf(start), err, shortOf(r.id))}
	}
	// Before anything of the repository runs (setup_command, the agent
	// and the project files it obeys, verify_command).
	if d := r.checkSnapshot(ctx); d != nil {
		return d
	}
	r.resetRemoteBranch(ctx, mirror)
	if start != point {
		r.git.start = start
		if n := len(r.hist.Steps); n > 0 {
			r.git.startSeq = r.hist.Steps[n-1].Seq
		}
	}
	if r.run.WorktreeState != "present" {
		if err := r.write(func(tx *storage.Tx) error { return tx.SetWorktreeState(r.id, "present") }); err != nil {
			r.log.Warn("record the worktree present", zap.Error(err))
		}
		r.run.WorktreeState = "present"
	}
	r.workdir = r.run.Worktree
	r.git.ready = true
	r.log.Info("worktree made from git", zap.String("repo_url", r.run.RepoURL), zap.String("branch", r.run.Branch),
		zap.String("start", start), zap.String("worktree", r.run.Worktree))
	return nil
}

// resetRemoteBranch sets the remote run branch back to the recorded
// pushed commit when it is elsewhere (a push that landed but whose record
// was lost with its worker), with a lease on where it is. It never stops
// the run: if it fails, the next push's lease decides.
func (r *runner) resetRemoteBranch(ctx context.Context, mirror string) {
	rem := git.Remote{URL: r.run.RepoURL}
	tip, err := git.RemoteBranch(ctx, mirror, rem, r.run.Branch)
	if err != nil || tip == r.git.pushed {
		if err != nil {
			r.log.Warn("read the run branch on the remote", zap.Error(err))
		}
		return
	}
	// The branch is this run's alone (its name holds the run's id):
	// what is there was pushed by a worker of this run. Set back to
	// nothing recorded, it is deleted (an empty Commit).
	if _, err := git.Push(ctx, git.PushInput{Dir: mirror, Remote: rem, Branch: r.run.Branch, Commit: r.git.pushed, Expect: tip}); err != nil {
		r.log.Warn("set the run branch back to its recorded commit", zap.String("from", tip), zap.String("to", r.git.pushed), zap.Error(err))
		return
	}
	r.log.Info("run branch set back to its recorded commit: a push whose record was lost", zap.String("from", tip), zap.String("to", r.git.pushed))
}

// holdBeforePushEnv names a test-only hook: when set to a directory, a
// worker that finds the file hold-<worker-id>-<stage> there writes
// held-<worker-id>-<stage>-<seq> and waits until the hold file is gone;
// stage "check" is before its lease check, "push" after it, right before
// the push of a run's branch. The end-to-end tests of a late push hold a
// worker there while another takes its run over. Unset (production), it
// costs one Getenv per push.
const holdBeforePushEnv = "LOOPD_TEST_HOLD_BEFORE_PUSH"

// staleResets bounds how often one push sets back a late push of a
// worker that lost the run before it gives up for this step (the next
// step's push tries again).
const staleResets = 3

// pushChange pushes a fleet run's branch after the ledger commit of step
// seq. A refused lease stops the run (prepareFleetWorkspace, before the
// next step) — unless what moved the branch is a late push of a worker
// that lost this run, which is set back and the push made again. Any
// other failure is logged and the next step's push carries this commit
// too.
func (r *runner) pushChange(ctx context.Context, seq int, commit string) {
	// A worker that lost the run pushes nothing: its push would move the
	// branch under the run's new owner. The check and the push are not
	// atomic (a worker can freeze between them): the owner's set-back
	// below covers that.
	r.holdBeforePush(ctx, "check", seq)
	if !r.mayPush(ctx) {
		return
	}
	r.holdBeforePush(ctx, "push", seq)
	m := git.Mirrors{Dir: filepath.Join(r.s.opts.Home, "mirrors")}
	mirror := m.Path(r.run.RepoURL)
	rem := git.Remote{URL: r.run.RepoURL}
	for resets := 0; ; resets++ {
		_, err := git.Push(ctx, git.PushInput{Dir: mirror, Remote: rem, Branch: r.run.Branch, Commit: commit, Expect: r.git.pushed})
		var ref *git.Refusal
		switch {
		case err == nil:
			r.git.pushed, r.git.pushSeq, r.git.pushCommit = commit, seq, commit
			r.log.Debug("run branch pushed", zap.Int("seq", seq), zap.String("commit", commit))
			return
		case errors.As(err, &ref) && ref.Kind == git.RefusedRemoteMoved:
			if resets < staleResets && r.setBackStalePush(ctx, m, rem) {
				continue
			}
			r.git.refused = err
			r.log.Warn("run branch push refused: someone else moved it", zap.Int("seq", seq), zap.Error(err))
			return
		default:
			r.log.Warn("push the run branch", zap.Int("seq", seq), zap.Error(err))
			return
		}
	}
}

// mayPush reports whether this worker still holds the run's lease, by its
// own book and then by the database, right before a push.
func (r *runner) mayPush(ctx context.Context) bool {
	if r.s.lease == nil {
		return true
	}
	if e, held := r.s.lease.epoch(r.id); !held || e != r.epoch || r.s.guardFired() {
		r.log.Warn("run branch not pushed: this worker no longer holds the run's lease", zap.Int64("epoch", r.epoch))
		return false
	}
	ok, err := r.s.store.LeaseHeld(ctx, storage.Lease{RunID: r.id, Owner: r.s.lease.f.WorkerID, Epoch: r.epoch})
	if err != nil || !ok {
		// Unsure is no: the next step's push (if this worker still has
		// the run then) carries this commit too.
		r.log.Warn("run branch not pushed: the run's lease is not this worker's, or could not be checked",
			zap.Int64("epoch", r.epoch), zap.Error(err))
		return false
	}
	return true
}

// holdBeforePush is the holdBeforePushEnv test hook.
func (r *runner) holdBeforePush(ctx context.Context, stage string, seq int) {
	dir := os.Getenv(holdBeforePushEnv)
	if dir == "" || r.s.lease == nil {
		return
	}
	hold := filepath.Join(dir, "hold-"+r.s.lease.f.WorkerID+"-"+stage)
	if _, err := os.Stat(hold); err != nil {
		return
	}
	_ = atomicfile.Write(filepath.Join(dir, fmt.Sprintf("held-%s-%s-%d", r.s.lease.f.WorkerID, stage, seq)), []byte(r.id+"\n"))
	for {
		if _, err := os.Stat(hold); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// setBackStalePush sets the run's branch on the remote back to the last
// commit this worker recorded as pushed when what moved it is a late push
// of a worker that lost the run (git.Mirrors.StalePush: ledger commits of
// this run from an older lease epoch), with a lease on what it found. A
// person's commit is never set back: false, and the run stops.
func (r *runner) setBackStalePush(ctx context.Context, m git.Mirrors, rem git.Remote) bool {
	if r.s.lease == nil || r.epoch == 0 {
		return false
	}
	mirror := m.Path(r.run.RepoURL)
	tip, err := git.RemoteBranch(ctx, mirror, rem, r.run.Branch)
	if err != nil {
		r.log.Warn("read the run branch on the remote", zap.Error(err))
		return false
	}
	stale, err := m.StalePush(ctx, r.run.RepoURL, tip, r.git.pushed, r.run.BaseCommit, r.id, r.epoch)
	if err != nil {
		r.log.Warn("read what moved the run branch", zap.String("tip", tip), zap.Error(err))
		return false
	}
	if !stale {
		return false
	}
	if _, err := git.Push(ctx, git.PushInput{Dir: mirror, Remote: rem, Branch: r.run.Branch, Commit: r.git.pushed, Expect: tip}); err != nil {
		r.log.Warn("set back a late push of a worker that lost the run", zap.String("from", tip), zap.Error(err))
		// The branch may have moved again meanwhile: the next push reads it anew.
		return true
	}
	r.log.Warn("run branch set back: a worker that lost the run pushed to it late", zap.String("from", tip),
		zap.String("to", r.git.pushed), zap.Int64("epoch", r.epoch))
	return true
}

// pushedPayload adds the commit pushed for st to its event's payload.
func (r *runner) pushedPayload(st *storage.Step, p map[string]any) map[string]any {
	if r.fromGit() && r.git.pushCommit != "" && r.git.pushSeq == st.Seq {
		p["pushed_commit"] = r.git.pushCommit
	}
	return p
}

// checkSnapshot checks, for a run started through LOOPD_URL, that its
// base commit holds exactly the files the run was built from: the API
// node validated its config and judged its trust on the files loopctl
// sent (the RUN_CREATED event keeps their hashes), and nothing but this
// check ties them to the commit the worktree is made from. A sender that
// sent a trusted config with another commit (one with a hook in
// .claude/settings.json, say) gets its run stopped here, with nothing of
// the commit run. A run created from a workspace path (a daemon that
// sees the clone) has no snapshot: its files were read there.
func (r *runner) checkSnapshot(ctx context.Context) *decision {
	stop := func(why string) *decision {
		return &decision{status: api.RunAborted, reason: "fatal:snapshot_mismatch", event: events.RunAborted,
			description: fmt.Sprintf("the run's base commit %s of %s is not what the run was created from: %s; nothing of it was run. "+
				"Start the run again from a clone at the commit you mean (loopctl start -C CLONE)", shortOf(r.run.BaseCommit), r.run.RepoURL, why)}
	}
	evs, err := r.s.store.EventsOfType(ctx, r.id, events.RunCreated)
	if err != nil {
		return stop("its RUN_CREATED event cannot be read: " + err.Error())
	}
	var man *snapshotManifest
	for _, ev := range evs {
		var p struct {
			Snapshot *snapshotManifest `json:"snapshot"`
		}
		if err := json.Unmarshal([]byte(ev.Payload), &p); err != nil {
			return stop("its RUN_CREATED event cannot be decoded: " + err.Error())
		}
		man = p.Snapshot
	}
	if man == nil {
		return nil
	}
	if man.Commit != r.run.BaseCommit {
		return stop(fmt.Sprintf("its files were read at commit %s", shortOf(man.Commit)))
	}
	got, err := trust.ReadCommitted(ctx, r.run.Worktree, man.Commit, slices.Sorted(maps.Keys(man.Files)))
	if err != nil {
		return stop("its files cannot be read there: " + err.Error())
	}
	if probs := trust.SnapshotMismatch(got, man.Files); len(probs) > 0 {
		r.log.Warn("a fleet run's commit is not what it was created from", zap.Strings("files", probs))
		return stop(strings.Join(probs, "; "))
	}
	return nil
}
