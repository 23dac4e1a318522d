package landing

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/atomicfile"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/shquote"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
)

// landTailBytes bounds the failing verification output a refusal carries.
const landTailBytes = 4 << 10

// landProgressEvery is how often a long verification reports that it is
// still running, so that a user can tell it from a hang.
const landProgressEvery = 15 * time.Second

// LandOptions say how to land a run.
type LandOptions struct {
	Squash   bool   // one commit on the base branch instead of a merge
	Message  string // the merge or squash commit's message; "" for the default
	NoVerify bool   // land without testing the combination
	// Checkout is the checkout whose base branch moves; "" for the run's
	// workspace. A backlog lands its task runs into its integration
	// branch, checked out in the backlog's own worktree.
	Checkout string
	// Progress, when set, is told what the land is doing, a line at a
	// time (a long verification says it is still running).
	Progress func(string)
}

// Refusal is a land that did not happen, and why: the user's checkout is
// as it was. Kind is what the user must change; Hand, when set, is the
// shell commands that finish the land by hand.
type Refusal struct {
	Kind    git.RefusalKind
	Message string
	Files   []string // conflicting or uncommitted files (capped)
	Hand    []string

	RunID, Branch, BaseBranch string
	// OutputTail and LogPath are the failing verification's, for a
	// refusal of kind verify_failed.
	OutputTail, LogPath string
}

func (r *Refusal) Error() string { return r.Message }

// API is the refusal as the JSON API answers it.
func (r *Refusal) API() *api.LandRefusal {
	return &api.LandRefusal{RunID: r.RunID, Kind: string(r.Kind), Message: r.Message, Branch: r.Branch,
		BaseBranch: r.BaseBranch, Files: r.Files, Hand: r.Hand, OutputTail: r.OutputTail, LogPath: r.LogPath}
}

// asRefusal makes a refusal found in err (git's, or one of this
// package's) a *Refusal of run; other errors are returned as they are.
func asRefusal(run storage.Run, err error) error {
	out, ok := errors.AsType[*Refusal](err)
	if !ok {
		ref, ok := errors.AsType[*git.Refusal](err)
		if !ok {
			return err
		}
		out = &Refusal{Kind: ref.Kind, Message: ref.Message, Files: ref.Files, Hand: ref.Hand}
	}
	out.RunID, out.Branch, out.BaseBranch = run.ID, run.Branch, run.BaseBranch
	return out
}

// Verification is how a land re-runs a run's verify_command on the
// combination of the run's branch and a base branch that moved: the same
// commands in the same environment a verification step of the run gets.
type Verification struct {
	Commands []string // verify_command, in order; none: the run has no verification
	Env      []string
	Dir      string // where the commands run: the worktree, or its subdirectory the workspace is
	// Judge decides whether the verification passed, as a verification
	// step of the run would be decided: its exit code (-1 when it did not
	// exit on its own), then the test results in its output (logPath) and
	// in a report written since started.
	Judge func(exitCode int, logPath string, started time.Time) (passed bool, why string)
}

// Verifier builds a run's Verification in the worktree directory dir;
// iteration is the run's last iteration. An env_file the user has not
// trusted in its present content is an *UntrustedEnvError.
type Verifier interface {
	LandVerification(ctx context.Context, run storage.Run, dir string, iteration int) (Verification, error)
}

// UntrustedEnvError is a run's env_file that changed since the user
// trusted it (or was never trusted): a land's verification does not run
// with it.
type UntrustedEnvError struct{ Err error }

func (e *UntrustedEnvError) Error() string { return e.Err.Error() }
func (e *UntrustedEnvError) Unwrap() error { return e.Err }

// Land lands run's branch into the branch it started from (see
// docs/workspaces.md, "Landing a run"): a fast-forward when the base has
// not moved and the run's own last verification passed, else a merge (or
// a squash) whose combination verify_command tests first in the run's
// worktree. What does not land is a *Refusal and leaves the user's
// checkout untouched. The land belongs to ctx: ended before git moves the
// checkout, it kills the verification and nothing lands; once the
// checkout has moved, the land is recorded whatever ctx says.
func (l *Lander) Land(ctx context.Context, run storage.Run, opts LandOptions) (*api.LandResult, error) {
	if opts.Progress == nil {
		opts.Progress = func(string) {}
	}
	if run.Branch != "" && run.BaseBranch != "" {
		opts.Progress(fmt.Sprintf("landing %s into %s in %s", run.Branch, run.BaseBranch, run.Workspace))
	}
	res, err := l.land(ctx, run, opts)
	if err != nil {
		err = asRefusal(run, err)
		if ref, ok := errors.AsType[*Refusal](err); ok && (ref.Kind == git.RefusedConflict || ref.Kind == git.RefusedVerifyFailed) {
			l.offerOntoBase(run, ref)
		}
		return nil, err
	}
	return res, nil
}

// LastRefusalFile is where the last land refusal that the run itself can
// fix (conflict, verify_failed) is kept, in the run's directory: `loopctl
// resume --onto-base` tells the agent what it said.
const LastRefusalFile = "land-refusal.json"

// LastRefusal is the land refusal kept in LastRefusalFile.
type LastRefusal struct {
	Kind       string   `json:"kind"`
	Message    string   `json:"message"`
	Files      []string `json:"files,omitempty"`
	OutputTail string   `json:"output_tail,omitempty"`
	LogPath    string   `json:"log_path,omitempty"`
	BaseBranch string   `json:"base_branch"`
	At         int64    `json:"at"`
}

// ReadLastRefusal reads the run's last kept refusal (nil when there is none).
func ReadLastRefusal(runDir string) *LastRefusal {
	b, err := os.ReadFile(filepath.Join(runDir, LastRefusalFile))
	if err != nil {
		return nil
	}
	var r LastRefusal
	if json.Unmarshal(b, &r) != nil {
		return nil
	}
	return &r
}

// offerOntoBase adds the way forward that lets the loop fix a conflict or
// a failing combination itself, and keeps the refusal for it.
func (l *Lander) offerOntoBase(run storage.Run, ref *Refusal) {
	cmd := "loopctl resume " + shortID(run.ID) + " --onto-base"
	ref.Message += fmt.Sprintf("\nlet the loop fix it: %s merges %s into %s in the run's worktree (conflicts left in the files) and the agent goes on from there",
		cmd, run.BaseBranch, run.Branch)
	ref.Hand = append([]string{cmd + "   # or, by hand:"}, ref.Hand...)
	rec := LastRefusal{Kind: string(ref.Kind), Message: ref.Message, Files: ref.Files, OutputTail: ref.OutputTail,
		LogPath: ref.LogPath, BaseBranch: run.BaseBranch, At: time.Now().UnixMilli()}
	dir := l.runDir(run.ID)
	if err := os.MkdirAll(dir, 0o700); err == nil {
		b, err := json.Marshal(rec)
		if err == nil {
			err = atomicfile.Write(filepath.Join(dir, LastRefusalFile), b)
		}
		if err != nil {
			l.log.Warn("could not keep the land refusal for resume --onto-base", zap.String("run_id", run.ID), zap.Error(err))
		}
	}
}

// refuseEarly refuses the runs that have nothing to land, or not yet.
func refuseEarly(ctx context.Context, run storage.Run) error {
	switch {
	case !run.Status.Terminal():
		return &git.Refusal{Kind: git.RefusedActive,
			Message: fmt.Sprintf("run %s is %s: land it once it has ended (loopctl wait %s, or loopctl stop %s)",
				run.ID, run.Status, shortID(run.ID), shortID(run.ID))}
	case run.Isolation != "worktree" || run.Branch == "":
		// Only a workspace in git has a ledger that diff can show: outside
		// git, pointing at diff would send the user to a second error.
		shows := fmt.Sprintf(" (loopctl diff %s shows them)", shortID(run.ID))
		if _, err := git.TopLevel(ctx, run.Workspace); errors.Is(err, git.ErrNotRepository) {
			shows = ""
		}
		return &git.Refusal{Kind: git.RefusedNotWorktree,
			Message: fmt.Sprintf("run %s ran in place: its changes are already in %s%s; only a worktree run (isolation=worktree) has a branch to land",
				run.ID, run.Workspace, shows)}
	case run.BaseBranch == "":
		return &git.Refusal{Kind: git.RefusedWrongBranch,
			Message: fmt.Sprintf("run %s started from a detached HEAD: there is no base branch to land into", run.ID),
			Hand: []string{"cd " + run.Workspace, "git switch <the branch to land into>",
				"git merge " + run.Branch + "   # resolve any conflicts, run your tests, then git commit"}}
	}
	return nil
}

func (l *Lander) land(ctx context.Context, run storage.Run, opts LandOptions) (*api.LandResult, error) {
	fleet := run.RepoURL != ""
	if fleet {
		// A fleet run's branch is on its repository, pushed by the
		// workers (docs/fleet.md): always a worktree run's branch.
		run.Isolation = "worktree"
		if run.Branch == "" {
			run.Branch = "loop/" + shortID(run.ID)
		}
	}
	if err := refuseEarly(ctx, run); err != nil {
		return nil, err
	}
	if fleet {
		if err := fetchFleetBranch(ctx, run); err != nil {
			return nil, err
		}
		// The run's directory is on the workers that ran it; the land's
		// intent file (recovered at this node's restart) goes in this
		// node's.
		if err := os.MkdirAll(filepath.Join(l.home, "runs", run.ID), 0o700); err != nil {
			return nil, fmt.Errorf("create the run's directory for its land: %w", err)
		}
	}
	in := git.LandInput{Checkout: cmp.Or(opts.Checkout, run.Workspace), Branch: run.Branch, BaseBranch: run.BaseBranch,
		BaseCommit: run.BaseCommit, Squash: opts.Squash, Message: opts.Message}
	if in.Message == "" {
		in.Message = defaultLandMessage(run, opts.Squash)
	}
	release, err := l.begin(ctx, run)
	if err != nil {
		return nil, err
	}
	defer release()

	plan, err := git.PlanLand(ctx, in)
	var ref *git.Refusal
	if errors.As(err, &ref) && ref.Kind == git.RefusedBranchMissing {
		return nil, l.branchMissing(ctx, run, ref)
	}
	if err != nil {
		return nil, err
	}
	res := &api.LandResult{RunID: run.ID, Branch: run.Branch, BaseBranch: run.BaseBranch, Mode: string(plan.Mode),
		Checkout: in.Checkout, BaseMoved: plan.Moved}
	if opts.Message != "" && plan.Mode == git.LandFastForward {
		// Like git merge -m, a fast-forward makes no commit to carry the
		// message; saying so beats a message that silently goes nowhere.
		w := fmt.Sprintf("--message is not used: %s has not moved, so land fast-forwards it to the run's last commit and makes no new commit; "+
			"--squash --message makes one commit with it", run.BaseBranch)
		res.Warnings = append(res.Warnings, w)
		opts.Progress("warning: " + w)
	}
	if err := l.verify(ctx, run, plan, opts, res); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("land abandoned before the checkout was touched: %w", err)
	}
	if err := l.apply(ctx, run, plan, res); err != nil {
		return nil, err
	}
	return res, nil
}

// begin takes for a land (or a push) of run what must be its own while
// it works: the run (a clean leaves its worktree alone, a resume is
// refused) and the repository (one land into it at a time). release gives
// them back.
func (l *Lander) begin(ctx context.Context, run storage.Run) (release func(), err error) {
	common, err := git.Cmd{Dir: run.Workspace}.Output(ctx, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("find the repository of %s: %w", run.Workspace, err)
	}
	// A clean of this run must not remove the worktree a land tests in.
	if _, busy := l.busy.LoadOrStore(run.ID, struct{}{}); busy {
		return nil, &git.Refusal{Kind: git.RefusedBusy, Message: "a land of this run is already under way"}
	}
	// Resume refuses a run being landed from now on; one resumed just
	// before is caught here.
	if cur, err := l.store.RunFlags(ctx, run.ID); err != nil {
		l.busy.Delete(run.ID)
		return nil, err
	} else if !cur.Status.Terminal() {
		l.busy.Delete(run.ID)
		return nil, &git.Refusal{Kind: git.RefusedActive, Message: fmt.Sprintf("run %s is %s again: land it once it has ended", run.ID, cur.Status)}
	}
	mu, _ := l.locks.LoadOrStore(common, &sync.Mutex{})
	if !mu.(*sync.Mutex).TryLock() {
		l.busy.Delete(run.ID)
		return nil, &git.Refusal{Kind: git.RefusedBusy,
			Message: "another land into this repository is under way; run loopctl land again when it has finished"}
	}
	return func() {
		mu.(*sync.Mutex).Unlock()
		l.busy.Delete(run.ID)
	}, nil
}

// verify decides whether what is about to land was tested, testing the
// combination when the base has moved, and says so in res.
func (l *Lander) verify(ctx context.Context, run storage.Run, plan *git.LandPlan, opts LandOptions, res *api.LandResult) error {
	steps, err := l.store.StepsLight(ctx, run.ID)
	if err != nil {
		return err
	}
	lastIteration := 0
	for _, st := range steps {
		lastIteration = max(lastIteration, st.Iteration)
	}
	var lv Verification
	if !opts.NoVerify {
		if lv, err = l.verifier.LandVerification(ctx, run, run.Worktree, lastIteration); err != nil {
			if _, ok := errors.AsType[*UntrustedEnvError](err); ok {
				return &git.Refusal{Kind: git.RefusedUntrustedEnv,
					Message: fmt.Sprintf("verify_command cannot run: %v", err),
					Hand: []string{"loopctl trust -C " + run.Workspace + "   # after reviewing it; then loopctl land " + shortID(run.ID) + " again",
						"# or land by hand: cd " + run.Workspace + " && git merge " + run.Branch}}
			}
			return err
		}
	}
	switch {
	case opts.NoVerify:
		res.Note = "not verified: --no-verify"
	case len(lv.Commands) == 0:
		res.Note = "not verified: the run has no verify_command"
	case !plan.Moved && run.Kind == storage.KindBacklog:
		// A backlog's branch is its tasks' lands, each tested together
		// with what landed before it: that is its verification.
		if why := l.backlogUntested(ctx, run, plan.RunTip); why != "" {
			return &git.Refusal{Kind: git.RefusedUntested,
				Message: fmt.Sprintf("%s is not all tested: %s; land it anyway with loopctl land %s --no-verify, or by hand", run.Branch, why, shortID(run.ID)),
				Hand:    []string{"cd " + run.Workspace, "git merge " + run.Branch + "   # then run your tests"}}
		}
		res.Verified, res.TestedCommit = true, plan.RunTip
		opts.Progress(fmt.Sprintf("%s has not moved since the backlog started: every task's land into %s was tested with what landed before it",
			run.BaseBranch, run.Branch))
	case !plan.Moved:
		// The base has not moved: what lands is the run's last commit,
		// and the run's own last verification says whether it passed.
		if passed, _ := LastVerification(steps); !passed {
			return &git.Refusal{Kind: git.RefusedUntested,
				Message: fmt.Sprintf("the last commit of %s did not pass verification in the run (its last verification failed or never ran); "+
					"land it anyway with loopctl land %s --no-verify, or by hand", run.Branch, shortID(run.ID)),
				Hand: []string{"cd " + run.Workspace, "git merge " + run.Branch + "   # then run your tests"}}
		}
		res.Verified, res.TestedCommit = true, plan.RunTip
		opts.Progress(fmt.Sprintf("%s has not moved since the run started: the run's own last verification of %s stands",
			run.BaseBranch, shortCommit(plan.RunTip)))
	default:
		opts.Progress(fmt.Sprintf("%s has moved since the run started (%s → %s): testing the merge of the two, %s, in %s",
			run.BaseBranch, shortCommit(run.BaseCommit), shortCommit(plan.BaseTip), shortCommit(plan.Combined), run.Worktree))
		if err := l.verifyCombination(ctx, run, plan, lv, opts.Progress); err != nil {
			return err
		}
		res.Verified, res.TestedCommit = true, plan.Combined
		opts.Progress("verify_command passed on the combination")
	}
	return nil
}

// apply moves the base branch and records the land, writing down first
// what is about to land.
func (l *Lander) apply(ctx context.Context, run storage.Run, plan *git.LandPlan, res *api.LandResult) error {
	// A daemon that dies between git's fast-forward and the record below
	// leaves the base branch moved, and the next daemon records the land
	// from the intent (recoverLandedIntents) instead of forgetting it.
	intent := landedIntent{Checkout: plan.Input.Checkout, BaseBranch: run.BaseBranch, Commit: plan.Target, Payload: map[string]any{
		"run_id": run.ID, "branch": run.Branch, "base_branch": run.BaseBranch, "commit": plan.Target,
		"mode": string(plan.Mode), "verified": res.Verified, "tested_commit": res.TestedCommit,
	}}
	intentPath := filepath.Join(l.runDir(run.ID), landedIntentFile)
	if err := writeJSONFile(intentPath, intent); err != nil {
		return fmt.Errorf("land abandoned before the checkout was touched: %w", err)
	}
	if err := git.ApplyLand(ctx, plan); err != nil {
		os.Remove(intentPath)
		return err
	}
	res.Commit = plan.Target
	// The checkout has moved: record it even if the request has gone.
	err := l.store.Write(context.WithoutCancel(ctx), func(tx *storage.Tx) error {
		return tx.RecordLanded(run.ID, plan.Target, intent.Payload)
	})
	if err != nil {
		// The intent stays: the next daemon records the land from it.
		return fmt.Errorf("%s landed as %s but recording it failed (the daemon records it when it next starts): %w", run.Branch, plan.Target, err)
	}
	os.Remove(intentPath)
	l.log.Info("run landed", zap.String("run_id", run.ID), zap.String("mode", string(plan.Mode)),
		zap.String("commit", plan.Target), zap.Bool("verified", res.Verified))
	return nil
}

// branchMissing completes the refusal of a run whose branch was deleted:
// its ledger commits stay in the repository until git collects them, and
// "nothing to land" would send away a user whose work is one command from
// being back. A run that ended before its worktree was made never had a
// branch: "no longer exists" would send the user looking for who deleted it.
func (l *Lander) branchMissing(ctx context.Context, run storage.Run, ref *git.Refusal) error {
	steps, err := l.store.StepsLight(ctx, run.ID)
	if err != nil {
		return err
	}
	if run.WorktreeState == "" && len(steps) == 0 {
		// The run ended before it started (stopped while PENDING): its
		// worktree and branch were named, never made.
		ref.Message = fmt.Sprintf("run %s ended %s before its first step: loopd never made its branch %s, so there is nothing to land",
			run.ID, run.Status, run.Branch)
		return ref
	}
	last := ""
	for _, st := range steps {
		if st.ChangeCommit != "" {
			last = st.ChangeCommit
		}
	}
	if !git.CommitExists(ctx, run.Workspace, last) {
		return ref
	}
	ref.Message = fmt.Sprintf("the run's branch %s no longer exists, but its last commit %s is still in the repository: "+
		"recreate the branch, then land again", run.Branch, shortCommit(last))
	ref.Hand = []string{"git -C " + run.Workspace + " branch " + run.Branch + " " + last + "   # then loopctl land " + shortID(run.ID) + " again"}
	return ref
}

// verifyCombination runs verify_command on plan.Combined, checked out
// detached in the run's worktree (the run's branch does not move), and
// puts the worktree back on the branch whatever happens.
func (l *Lander) verifyCombination(ctx context.Context, run storage.Run, plan *git.LandPlan, lv Verification, progress func(string)) error {
	hand := []string{"cd " + run.Workspace, "git merge " + run.Branch + "   # resolve, run your tests, git commit",
		"# or land without testing the combination: loopctl land " + shortID(run.ID) + " --no-verify"}
	l.clearStaleLocks(ctx, run.Worktree)
	if err := prepareWorktree(ctx, run, hand); err != nil {
		return err
	}
	dir := l.runDir(run.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	stamp := strconv.FormatInt(time.Now().UnixMilli(), 10)
	logPath := filepath.Join(dir, "land-"+stamp+".log")
	// The marker lets the next daemon, if this one dies, stop the
	// verification and put the worktree back on its branch before the
	// run can be resumed into it (see recoverLands).
	mark := landMarker{Tag: "loopd-land-" + run.ID + "-" + stamp, Worktree: run.Worktree, Branch: run.Branch,
		StatusPath: filepath.Join(dir, "land-exits")}
	if err := writeLandMarker(dir, mark); err != nil {
		return err
	}
	if err := git.CheckoutDetached(ctx, run.Worktree, plan.Combined); err != nil {
		_ = os.Remove(filepath.Join(dir, landMarkerFile))
		return fmt.Errorf("check out the combination in %s: %w", run.Worktree, err)
	}
	defer func() {
		if err := git.RestoreBranch(ctx, run.Worktree, run.Branch); err != nil {
			l.log.Error("could not put the worktree back on its branch", zap.String("worktree", run.Worktree), zap.Error(err))
			return // the marker stays: the next daemon tries again
		}
		_ = os.Remove(filepath.Join(dir, landMarkerFile))
	}()
	if err := ctx.Err(); err != nil { // the checkout was let finish; what follows is not started
		return fmt.Errorf("land abandoned before verification, nothing landed: %w", err)
	}
	proc, err := supervise.Start(supervise.Spec{
		Dir: lv.Dir, Commands: lv.Commands, Env: lv.Env, LogPath: logPath,
		StatusPath: mark.StatusPath, Tag: mark.Tag,
	})
	if err != nil {
		return fmt.Errorf("start verify_command: %w", err)
	}
	progress("running verify_command (output: " + logPath + ")")
	started := time.Now()
	tick := time.NewTicker(landProgressEvery)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-proc.Done():
			waiting = false
		case <-tick.C:
			progress(fmt.Sprintf("verify_command still running (%s)", time.Since(started).Round(time.Second)))
		case <-ctx.Done():
			proc.Terminate(l.grace)
			<-proc.Done()
			return fmt.Errorf("land abandoned during verification, nothing landed: %w", ctx.Err())
		}
	}
	ex := proc.Exit()
	code := ex.Code
	if !ex.Recorded || ex.Signal != 0 {
		code = -1
	}
	passed, why := lv.Judge(code, logPath, started)
	if passed {
		return nil
	}
	if code == -1 {
		why = ex.String()
	}
	return &Refusal{Kind: git.RefusedVerifyFailed, Hand: hand, LogPath: logPath, OutputTail: fileTail(logPath, landTailBytes),
		Message: fmt.Sprintf("%s has moved since the run started, and the merge of %s into it fails verify_command (%s): nothing landed",
			run.BaseBranch, run.Branch, why)}
}

// backlogUntested says why a backlog's integration branch at tip is not
// known tested ("" when it is): its last land was not verified, or the
// branch moved after it.
func (l *Lander) backlogUntested(ctx context.Context, run storage.Run, tip string) string {
	tasks, err := l.store.Tasks(ctx, run.ID)
	if err != nil {
		return err.Error()
	}
	// The tip's own land decides: a verified land tested the tip, which
	// holds every land before it.
	var last *storage.Task
	landed := 0
	for i := range tasks {
		if tasks[i].LandedCommit != "" {
			landed++
			if tasks[i].LandedCommit == tip {
				last = &tasks[i]
			}
		}
	}
	switch {
	case landed == 0:
		return "no task has landed in it"
	case last == nil:
		return fmt.Sprintf("its tip %s is not a task's land: it moved after the last one", shortCommit(tip))
	case !last.Verified:
		return fmt.Sprintf("the land of task %s was not verified (its task run has no verify_command)", last.ID)
	}
	return ""
}

// prepareWorktree makes sure the run's worktree can test the combination:
// it is there, on the run's branch, without uncommitted changes.
func prepareWorktree(ctx context.Context, run storage.Run, hand []string) error {
	if fi, err := os.Stat(run.Worktree); err != nil || !fi.IsDir() || run.WorktreeState == "gone" || run.WorktreeState == "removed" {
		return &git.Refusal{Kind: git.RefusedWorktreeGone, Hand: hand,
			Message: fmt.Sprintf("%s has moved and the combination must be tested in the run's worktree, but %s is gone", run.BaseBranch, run.Worktree)}
	}
	// A land killed mid-verification (the daemon died) left the worktree
	// detached at the merge it tested: put it back on the branch first.
	if _, err := (git.Cmd{Dir: run.Worktree}).Output(ctx, "symbolic-ref", "-q", "HEAD"); err != nil {
		if err := git.RestoreBranch(ctx, run.Worktree, run.Branch); err != nil {
			return fmt.Errorf("put the worktree %s back on %s: %w", run.Worktree, run.Branch, err)
		}
	}
	if files, err := git.TrackedChanges(ctx, run.Worktree); err != nil {
		return err
	} else if len(files) > 0 {
		return &git.Refusal{Kind: git.RefusedDirty, Files: files, Hand: hand,
			Message: fmt.Sprintf("the run's worktree %s has uncommitted changes in %s: commit or discard them there first",
				run.Worktree, git.FileList(files))}
	}
	return nil
}

func defaultLandMessage(run storage.Run, squash bool) string {
	if !squash {
		return fmt.Sprintf("Merge branch '%s' into %s\n\nloop run %s", run.Branch, run.BaseBranch, run.ID)
	}
	title := run.Name
	if title == "" {
		title, _, _ = strings.Cut(strings.TrimSpace(run.Goal), "\n")
	}
	if title == "" {
		title = "loop run " + shortID(run.ID)
	}
	if len(title) > 72 {
		title = strings.TrimSpace(title[:69]) + "..."
	}
	return fmt.Sprintf("%s\n\nSquashed from branch %s (loop run %s).", title, run.Branch, run.ID)
}

// LastVerification reports whether a run's last commit was verified: its
// last verification step passed and no implementation step after it
// changed anything; seq is that verification step's (0 when there is none).
func LastVerification(steps []storage.Step) (passed bool, seq int) {
	for i := len(steps) - 1; i >= 0; i-- {
		st := &steps[i]
		switch st.Phase {
		case api.PhaseImplementation:
			if st.ChangeCommit != "" || st.Status == api.StepRunning {
				return false, 0 // changed after the last verification: untested
			}
		case api.PhaseVerification:
			return st.Status == api.StepSucceeded, st.Seq
		}
	}
	return false, 0
}

// clearStaleLocks removes the git locks a git killed mid-write (by an
// older loopd's shutdown, a crash, an OOM kill) left in a run's worktree,
// which loopd made: every land of the run would fail on them until they
// were removed by hand. A lock a live git holds stays.
func (l *Lander) clearStaleLocks(ctx context.Context, worktree string) {
	if fi, err := os.Stat(worktree); err != nil || !fi.IsDir() {
		return
	}
	removed, err := git.ClearStaleLocks(ctx, worktree)
	if err != nil {
		l.log.Warn("could not check the worktree for stale git locks", zap.String("worktree", worktree), zap.Error(err))
	}
	for _, lock := range removed {
		l.log.Info("removed a stale git lock a killed git left in a run's worktree", zap.String("lock", lock))
	}
}

// fetchFleetBranch fetches a fleet run's branch from its repository into
// the user's checkout, as the local branch of the same name, which the
// usual land then merges. The fetch never rewrites that local branch
// (no '+'): commits someone made on it locally are not dropped, the land
// is refused instead.
func fetchFleetBranch(ctx context.Context, run storage.Run) error {
	ref := "refs/heads/" + run.Branch
	_, err := git.Cmd{Dir: run.Workspace, Group: true}.Run(ctx, "fetch", "--quiet", "--no-tags", "--", run.RepoURL, ref+":"+ref)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("fetch %s from %s: %w", run.Branch, run.RepoURL, ctx.Err())
	}
	return &git.Refusal{Kind: git.RefusedBranchMissing,
		Message: fmt.Sprintf("could not fetch the run's branch %s from %s into %s (%v): nothing landed; "+
			"a run that changed nothing pushed no branch", run.Branch, run.RepoURL, run.Workspace, err),
		Hand: []string{"git -C " + shquote.Quote(run.Workspace) + " fetch " + shquote.Quote(run.RepoURL) + " " + shquote.Quote(run.Branch) + "   # see what is there"}}
}
