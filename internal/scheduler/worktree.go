package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/atomicfile"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/workspace"
)

// ledgerTimeout bounds one step's ledger record: staging a huge file takes
// time, a git that hangs (a lock held forever) must not hold the run.
const ledgerTimeout = 2 * time.Minute

// holdAfterLedgerEnv names a test-only hook: when set to a file path, the
// daemon writes that file right after a step's ledger commit and then
// holds the runner (until shutdown), before the step's end is recorded in
// the database. The end-to-end test of a daemon killed between the two
// waits for the file and kills it.
const holdAfterLedgerEnv = "LOOPD_TEST_HOLD_AFTER_LEDGER"

// isWorktree reports whether the run has its own git worktree.
func (r *runner) isWorktree() bool { return r.run.Isolation == string(config.IsolationWorktree) }

// loadWorkspace decides where the run's steps run and how its changes are
// recorded, once per load: a worktree run works in its worktree (at the
// workspace's place in it: a workspace below the repository's top level
// maps to the same directory of the worktree); the paths of its frozen
// config that point into the checkout point into the worktree instead, so
// that the plan the agent checks off is the one the plan gate reads.
func (r *runner) loadWorkspace() {
	r.workdir, r.ledger, r.ledgerBase = r.run.Workspace, nil, ""
	if r.fromGit() {
		// A fleet run's workspace is its worktree on this worker: the
		// user's clone it was started from is on another machine.
		r.loadFleetGit()
		r.workdir = r.run.Worktree
		for _, p := range []*string{&r.cfg.PlanFile, &r.cfg.SpecFile, &r.cfg.VerifyReport} {
			if rel, err := filepath.Rel(r.run.Workspace, *p); *p != "" && err == nil && !strings.HasPrefix(rel, "..") {
				*p = filepath.Join(r.workdir, rel)
			}
		}
		r.ledger = &git.Ledger{Dir: r.run.Worktree, RunID: r.id, Short: shortOf(r.id), Epoch: r.epoch}
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, ledgerTimeout)
	defer cancel()
	// One git command (it runs at every load, recoveries included): is the
	// workspace in git, and where below its top level.
	prefix, err := git.Cmd{Dir: r.run.Workspace}.Output(ctx, "rev-parse", "--show-prefix")
	prefix = strings.TrimSuffix(prefix, "/")
	if r.isWorktree() {
		if err == nil && prefix != "" {
			r.workdir = filepath.Join(r.run.Worktree, filepath.FromSlash(prefix))
		} else {
			r.workdir = r.run.Worktree
		}
		for _, p := range []*string{&r.cfg.PlanFile, &r.cfg.SpecFile, &r.cfg.VerifyReport} {
			if rel, err := filepath.Rel(r.run.Workspace, *p); *p != "" && err == nil && !strings.HasPrefix(rel, "..") {
				*p = filepath.Join(r.workdir, rel)
			}
		}
		r.onto = readOntoBase(r.dir)
		r.ledger = &git.Ledger{Dir: r.run.Worktree, RunID: r.id, Short: shortOf(r.id), Merging: r.onto != nil}
		return
	}
	if err != nil {
		return // not a git repository: no ledger (changes stay null)
	}
	r.ledger = &git.Ledger{Dir: r.run.Workspace, Index: filepath.Join(r.dir, "ledger.index"), RunID: r.id, Short: shortOf(r.id)}
}

// prepareWorkspace runs before a step is planned. A worktree run gets its
// worktree when it first starts, and is ended with a clear reason when the
// worktree was removed under it; an in-place git run records its baseline
// snapshot before its first step.
func (r *runner) prepareWorkspace() *decision {
	if !r.isWorktree() {
		if r.ledger != nil && r.ledgerBase == "" && len(r.hist.Steps) == 0 {
			ctx, cancel := context.WithTimeout(r.ctx, ledgerTimeout)
			defer cancel()
			base, err := r.ledger.Baseline(ctx)
			if err != nil {
				r.log.Warn("record the workspace's baseline snapshot", zap.Error(err))
			}
			r.ledgerBase = base
		}
		return nil
	}
	if r.fromGit() {
		return r.prepareFleetWorkspace()
	}
	if r.run.WorktreeState == "" {
		if err := r.addWorktree(); err != nil {
			if errors.Is(err, errDetached) {
				return nil
			}
			return &decision{status: api.RunAborted, reason: "fatal:worktree_create", event: events.RunAborted,
				description: fmt.Sprintf("could not add the run's git worktree at %s on branch %s: %v; fix the problem, then `loopctl resume %s`",
					r.run.Worktree, r.run.Branch, err, shortOf(r.id))}
		}
		return nil
	}
	if r.run.WorktreeState == "present" && !git.IsWorktree(r.run.Worktree) {
		if err := r.write(func(tx *storage.Tx) error { return tx.SetWorktreeState(r.id, "gone") }); err != nil {
			r.log.Warn("record the worktree gone", zap.Error(err))
		}
		r.run.WorktreeState = "gone"
	}
	if r.run.WorktreeState != "present" {
		how := "was removed by hand"
		if r.run.WorktreeState == "removed" {
			how = "was removed by loopctl clean"
		}
		return &decision{status: api.RunAborted, reason: "fatal:worktree_gone", event: events.RunAborted,
			description: fmt.Sprintf("the run's worktree %s %s; nothing more can run there. "+
				"Every recorded iteration is on branch %s (git log %s, loopctl diff %s); start a new run to go on",
				r.run.Worktree, how, r.run.Branch, r.run.Branch, shortOf(r.id))}
	}
	return nil
}

// addWorktree adds the run's worktree and branch from its base commit and
// records it present. It is safe to repeat after a crash at any point: a
// worktree already added is only recorded.
func (r *runner) addWorktree() error {
	ctx, cancel := context.WithTimeout(r.ctx, ledgerTimeout)
	defer cancel()
	if !git.IsWorktree(r.run.Worktree) {
		if err := git.AddWorktree(ctx, r.run.Workspace, r.run.Worktree, r.run.Branch, r.run.BaseCommit); err != nil {
			return err
		}
	}
	// The workspace's place in the worktree exists even when git tracks
	// nothing below it (an untracked .loop/ in a subdirectory).
	if err := os.MkdirAll(r.workdir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", r.workdir, err)
	}
	if err := r.write(func(tx *storage.Tx) error { return tx.SetWorktreeState(r.id, "present") }); err != nil {
		return err
	}
	r.run.WorktreeState = "present"
	r.log.Info("worktree added", zap.String("worktree", r.run.Worktree), zap.String("branch", r.run.Branch),
		zap.String("base", r.run.BaseCommit))
	return nil
}

// recordChanges records what an implementation step left in the workspace
// (whatever its status: a failed or killed step's changes are recorded
// too) in the change ledger and on the step. It is idempotent: recording
// a step again after a crash finds its commit (see git.Ledger). With no
// ledger (not a git repository) the changes stay unknown.
func (r *runner) recordChanges(st *storage.Step) {
	if r.ledger == nil || st.Phase != api.PhaseImplementation {
		return
	}
	if r.isWorktree() && !git.IsWorktree(r.run.Worktree) {
		// Removed under the run: prepareWorkspace ends it.
		r.log.Warn("no ledger record: the run's worktree is gone", zap.Int("seq", st.Seq), zap.String("worktree", r.run.Worktree))
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, ledgerTimeout)
	defer cancel()
	before := r.ledgerPoint(ctx)
	var ch git.Change
	var err error
	if r.isWorktree() {
		ch, err = r.ledger.CommitWorktree(ctx, st.Seq, st.Iteration, before)
	} else if st.Seq == r.launched {
		// Started and watched by this runner since its load: never
		// recorded before, so there is no earlier record to look for.
		ch, err = r.ledger.SnapshotNew(ctx, st.Seq, st.Iteration, before)
	} else {
		ch, err = r.ledger.Snapshot(ctx, st.Seq, st.Iteration, before)
	}
	if err != nil {
		r.log.Warn("record the step's changes", zap.Int("seq", st.Seq), zap.Error(err))
		return
	}
	st.ChangeCommit, st.ChangeFiles = ch.Commit, ch.Files
	st.FilesChanged, st.Insertions, st.Deletions = &ch.FilesChanged, &ch.Insertions, &ch.Deletions
	st.BinaryFiles = &ch.BinaryFiles
	// The ledger is the workspace's progress: the same point as the
	// iteration before means nothing changed (no_progress).
	point := ch.Commit
	if point == "" {
		point = before
	}
	st.Fingerprint = "ledger:" + point
	if r.fromGit() && (ch.Commit != "" || (r.git.pushed != "" && point != r.git.pushed)) {
		// Also when nothing changed but an earlier push failed: the
		// branch catches up.
		r.pushChange(ctx, st.Seq, point)
	}
	r.log.Debug("ledger recorded", zap.Int("seq", st.Seq), zap.String("commit", ch.Commit), zap.Int("files", ch.FilesChanged))
	if hold := os.Getenv(holdAfterLedgerEnv); hold != "" {
		// Whole or not at all: a test polls for the file and reads it as
		// soon as it exists.
		_ = atomicfile.Write(hold, fmt.Appendf(nil, "%d %s\n", st.Seq, ch.Commit))
		<-r.s.detach
	}
}

// ledgerPoint is where the run's recorded changes stand: the newest
// step's ledger commit, else the run's start (its base commit, or an
// in-place run's baseline snapshot).
func (r *runner) ledgerPoint(ctx context.Context) string {
	// A merge of the base (resume --onto-base) after the newest change is
	// the point: the next change is the agent's, not the base's.
	if r.git.start != "" {
		// A fleet run taken over from its last pushed commit: changes
		// recorded before, never pushed, are not on this branch.
		for i := len(r.hist.Steps) - 1; i >= 0 && r.hist.Steps[i].Seq > r.git.startSeq; i-- {
			if c := r.hist.Steps[i].ChangeCommit; c != "" {
				return c
			}
		}
		return r.git.start
	}
	for i := len(r.hist.Steps) - 1; i >= 0; i-- {
		if c := r.hist.Steps[i].ChangeCommit; c != "" {
			if r.onto != nil && r.onto.AfterSeq >= r.hist.Steps[i].Seq {
				return r.onto.Point
			}
			return c
		}
	}
	if r.isWorktree() {
		if r.onto != nil {
			return r.onto.Point
		}
		return r.run.BaseCommit
	}
	return r.ledgerPoint0(ctx)
}

// ledgerPoint0 is an in-place run's baseline snapshot: the workspace as
// the run found it ("" when it has none).
func (r *runner) ledgerPoint0(ctx context.Context) string {
	if r.ledgerBase == "" {
		r.ledgerBase, _ = git.Cmd{Dir: r.run.Workspace}.Output(ctx, "rev-parse", "--verify", "-q", git.SnapshotRef(r.id, 0)+"^{commit}")
	}
	return r.ledgerBase
}

// fingerprint is the workspace's state after an implementation step, for
// no_progress, when the ledger has not given one: in the worktree for a
// worktree run, never the user's checkout.
func (r *runner) fingerprint(st *storage.Step) {
	if st.Fingerprint != "" {
		return
	}
	fp, err := workspace.Fingerprint(r.ctx, r.workdir)
	if err != nil {
		r.log.Warn("workspace fingerprint", zap.Error(err))
	}
	st.Fingerprint = fp
}
