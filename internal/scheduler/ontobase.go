package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/atomicfile"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/storage"
)

// ontoBaseFile keeps, in the run's directory, the last merge of its base
// that resume --onto-base made: the runner counts the next iteration's
// change from its Point and tells the agent about it in the next prompt.
const ontoBaseFile = "onto-base.json"

// holdAfterOntoBaseEnv names a test-only hook: when set to a file path,
// resume --onto-base writes that file right after git merged the base into
// the worktree (before loopd commits or records anything) and holds the
// request until shutdown. The end-to-end test kills the daemon there.
const holdAfterOntoBaseEnv = "LOOPD_TEST_HOLD_AFTER_ONTO_BASE"

// ontoBase is a merge of the base branch into a run's branch, as recorded
// in ontoBaseFile and in the RUN_RESUMED event's payload (onto_base).
type ontoBase struct {
	BaseBranch  string   `json:"base_branch"`
	BaseCommit  string   `json:"base_commit"`
	Point       string   `json:"ledger_point"` // the merge commit (clean) or the conflicted merge's snapshot
	Clean       bool     `json:"clean"`
	Conflicts   []string `json:"conflicts"`
	SnapshotRef string   `json:"snapshot_ref,omitempty"`
	// AfterSeq and AfterIteration are the run's last step and iteration
	// when the merge was made: the first implementation step after it is
	// counted from Point.
	AfterSeq       int                  `json:"after_seq"`
	AfterIteration int                  `json:"after_iteration"`
	Refusal        *landing.LastRefusal `json:"land_refusal,omitempty"`
}

func readOntoBase(dir string) *ontoBase {
	b, err := os.ReadFile(filepath.Join(dir, ontoBaseFile))
	if err != nil {
		return nil
	}
	var o ontoBase
	if json.Unmarshal(b, &o) != nil || o.Point == "" {
		return nil
	}
	return &o
}

// ResumeOntoBase is `loopctl resume RUN --onto-base`: it merges the current
// tip of an ended worktree run's base branch into the run's branch in its
// worktree (conflicts left in the files, for the agent), records the merge
// in the change ledger, and resumes the run. A request cut after git
// merged (a daemon killed) is run again: the merge it made is found, not
// made twice. Refusals are *InputError (exit 64) and change nothing.
func (s *Scheduler) ResumeOntoBase(ctx context.Context, runID string, sets []string) error {
	return s.resumeOntoBase(ctx, runID, sets, "")
}

// resumeOntoBase is ResumeOntoBase; at, when set, is the base commit to
// merge instead of the base branch's tip: the one a cut request already
// merged (cutOntoBase), which plain resume finishes recording.
func (s *Scheduler) resumeOntoBase(ctx context.Context, runID string, sets []string, at string) error {
	run, err := s.store.Run(ctx, runID)
	if err != nil {
		return err
	}
	short := shortOf(run.ID)
	refuse := func(format string, args ...any) error {
		return &InputError{Msg: "resume --onto-base refused: " + fmt.Sprintf(format, args...)}
	}
	switch {
	case run.Isolation != string(config.IsolationWorktree):
		return refuse("run %s ran in place (isolation=in_place): there is no run branch to merge its base into; `loopctl resume %s` continues it", short, short)
	case !run.Status.Terminal():
		return refuse("run %s is %s: --onto-base merges into the worktree of a run that has ended; stop it first (loopctl stop %s), then resume it with --onto-base",
			short, run.Status, short)
	case run.LandedCommit != "":
		return refuse("run %s has already landed (as %s): start a new run to go on", short, run.LandedCommit)
	case run.BaseBranch == "":
		return refuse("run %s started from a detached HEAD: it has no base branch to merge", short)
	case run.WorktreeState == "removed" || run.WorktreeState == "gone" || run.WorktreeState == "" || !git.IsWorktree(run.Worktree):
		return refuse("run %s has no worktree to merge into (%s is gone); every recorded iteration is on branch %s; start a new run to go on",
			short, run.Worktree, run.Branch)
	}
	if _, busy := s.ontoBusy.LoadOrStore(run.ID, struct{}{}); busy {
		return &StateError{Msg: fmt.Sprintf("run %s is already being resumed with --onto-base", short)}
	}
	defer s.ontoBusy.Delete(run.ID)
	base := at
	if base == "" {
		base, err = git.Cmd{Dir: run.Workspace}.Output(ctx, "rev-parse", "-q", "--verify", "refs/heads/"+run.BaseBranch+"^{commit}")
		if err != nil || base == "" {
			return refuse("the base branch %s no longer exists in %s", run.BaseBranch, run.Workspace)
		}
	}
	steps, err := s.store.StepsLight(ctx, run.ID)
	if err != nil {
		return err
	}
	onto := &ontoBase{BaseBranch: run.BaseBranch, BaseCommit: base}
	for _, st := range steps {
		onto.AfterSeq, onto.AfterIteration = max(onto.AfterSeq, st.Seq), max(onto.AfterIteration, st.Iteration)
	}
	dir := filepath.Join(s.opts.Home, "runs", run.ID)
	onto.Refusal = landing.ReadLastRefusal(dir)
	if onto.Refusal != nil && onto.Refusal.BaseBranch != run.BaseBranch {
		onto.Refusal = nil
	}
	onto.SnapshotRef = git.SnapshotRef(run.ID, 0)[:len("refs/loop/"+run.ID+"/")] + "merge-" + strconv.Itoa(onto.AfterSeq)
	ledger := &git.Ledger{Dir: run.Worktree, RunID: run.ID, Short: short}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	defer cancel()
	m, err := ledger.MergeBase(gctx, git.MergeBaseInput{BaseBranch: run.BaseBranch, Base: base, SnapshotRef: onto.SnapshotRef,
		AfterMerge: func() {
			if hold := os.Getenv(holdAfterOntoBaseEnv); hold != "" {
				// Whole: a test polls for the file and reads it at once.
				_ = atomicfile.Write(hold, []byte(base+"\n"))
				<-s.detach
			}
		}})
	if errors.Is(err, git.ErrNothingToMerge) {
		return refuse("nothing to merge: %s already has every commit of %s (%s); `loopctl resume %s` continues the run, `loopctl land %s` lands it",
			run.Branch, run.BaseBranch, base[:min(len(base), 12)], short, short)
	}
	if err != nil {
		return &InputError{Msg: "resume --onto-base: " + err.Error()}
	}
	onto.Point, onto.Clean, onto.Conflicts = m.Point, m.Clean, m.Conflicts
	if m.Clean {
		onto.SnapshotRef = ""
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(onto)
	if err != nil {
		return err
	}
	// Before the run is resumed: a runner that starts finds it.
	if err := atomicfile.Write(filepath.Join(dir, ontoBaseFile), b); err != nil {
		return fmt.Errorf("record the merge of %s: %w", run.BaseBranch, err)
	}
	s.log.Info("merged the base branch into the run's branch", zap.String("run", run.ID), zap.String("base", base),
		zap.Bool("clean", m.Clean), zap.Strings("conflicts", m.Conflicts), zap.Bool("reused", m.Reused))
	return s.resume(ctx, run.ID, sets, onto)
}

// cutOntoBase finds a merge of the base branch that a cut resume
// --onto-base (its daemon killed after git merged, before loopd recorded
// the merge and resumed the run) left in an ended worktree run's worktree:
// a MERGE_HEAD from the base branch, or a HEAD that is loopd's merge
// commit (its Loop-Merge trailer), for a base commit that ontoBaseFile
// does not record. It returns that commit, "" when there is none. A plain
// resume that went on without it would leave the merge in progress under
// an agent never told about it, and count the base's changes as the
// agent's.
func (s *Scheduler) cutOntoBase(ctx context.Context, run storage.Run) string {
	if run.Isolation != string(config.IsolationWorktree) || !run.Status.Terminal() || run.LandedCommit != "" ||
		run.BaseBranch == "" || run.WorktreeState != "present" || !git.IsWorktree(run.Worktree) {
		return ""
	}
	recorded := ""
	if o := readOntoBase(filepath.Join(s.opts.Home, "runs", run.ID)); o != nil {
		recorded = o.BaseCommit
	}
	gctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	wt := git.Cmd{Dir: run.Worktree}
	if mh, _ := wt.Output(gctx, "rev-parse", "-q", "--verify", "MERGE_HEAD"); mh != "" {
		// A recorded merge in progress is the agent's to complete (the
		// runner reads the record), and only a merge of the base branch
		// is loopd's to finish: one someone started by hand is theirs.
		if mh == recorded {
			return ""
		}
		if _, err := (git.Cmd{Dir: run.Workspace}).Run(gctx, "merge-base", "--is-ancestor", mh, "refs/heads/"+run.BaseBranch); err == nil {
			return mh
		}
		return ""
	}
	body, err := wt.Output(gctx, "log", "-1", "--format=%B", "HEAD")
	if err != nil {
		return ""
	}
	prefix := "Loop-Merge: " + run.ID + "/"
	for line := range strings.SplitSeq(body, "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok && c != "" && c != recorded {
			return c
		}
	}
	return ""
}

// ontoBaseNote is what the next prompt says about a merge of the base
// branch that no implementation step has answered yet ("" when none).
func (r *runner) ontoBaseNote() string {
	o := r.onto
	if o == nil {
		return ""
	}
	for _, st := range r.hist.Steps {
		if st.Seq > o.AfterSeq && st.Phase == api.PhaseImplementation && (st.Status == api.StepSucceeded || st.Status == api.StepFailed) {
			return ""
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## The base branch was merged into your branch\n\n%s (at %s) has been merged into this branch (%s).\n",
		o.BaseBranch, o.BaseCommit[:min(len(o.BaseCommit), 12)], r.run.Branch)
	if o.Clean {
		b.WriteString("It merged without conflicts. Make sure everything still works together.\n")
	} else {
		fmt.Fprintf(&b, "It left conflicts in %d file(s), marked in the files with <<<<<<<, ======= and >>>>>>>:\n", len(o.Conflicts))
		for _, f := range o.Conflicts {
			fmt.Fprintf(&b, "- %s\n", f)
		}
		b.WriteString("Resolve each conflict keeping what both sides meant, and remove every marker. " +
			"Do not abort the merge (git merge --abort): your changes are recorded as the merge's completion.\n")
	}
	if ref := o.Refusal; ref != nil {
		fmt.Fprintf(&b, "\nLanding this branch into %s was refused (%s): %s\n", o.BaseBranch, ref.Kind, r.secrets.String(firstLine(ref.Message)))
		if out := strings.TrimRight(ref.OutputTail, "\n"); out != "" {
			fmt.Fprintf(&b, "\nThe failing output of the combination:\n```\n%s\n```\n", r.secrets.String(out))
		}
	}
	return b.String()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
