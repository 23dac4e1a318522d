package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/filetail"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/scheduler"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
)

// landTailBytes bounds the failing verification output a refusal carries.
const landTailBytes = 4 << 10

// landProgressEvery is how often a long verification reports that it is
// still running, so that a user can tell it from a hang; landKeepalive is
// how often the stream carries a line at all (loopctl gives up on a daemon
// silent for more than 15s plus its request timeout).
const (
	landProgressEvery = 15 * time.Second
	landKeepalive     = 5 * time.Second
)

// handleLand lands a worktree run's branch. A land can run a long
// verification, so it answers with an NDJSON stream: progress lines, then
// one result, refusal or error. The land belongs to the request: if
// loopctl goes away or the daemon shuts down, the verification is killed
// and nothing lands.
func (d *Daemon) handleLand(w http.ResponseWriter, r *http.Request) {
	var req api.LandRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	run, err := d.resolve(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	send := func(m api.LandMessage) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(m)
		if flusher != nil {
			flusher.Flush()
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// The keepalive: loopctl takes a silence of more than the progress
	// interval (plus its timeout) for a frozen daemon, and some git work
	// (a checkout of a huge tree) says nothing for a while. An empty
	// progress line is not shown.
	wg.Go(func() {
		tick := time.NewTicker(landKeepalive)
		defer tick.Stop()
		for {
			select {
			case <-d.closing:
				cancel()
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				send(api.LandMessage{Progress: ""})
			}
		}
	})
	if run.Branch != "" && run.BaseBranch != "" {
		send(api.LandMessage{Progress: fmt.Sprintf("landing %s into %s in %s", run.Branch, run.BaseBranch, run.Workspace)})
	}
	res, err := d.land(ctx, run, req, func(msg string) { send(api.LandMessage{Progress: msg}) })
	var ref *git.Refusal
	switch {
	case err == nil:
		send(api.LandMessage{Result: res})
	case errors.As(err, &ref):
		d.log.Info("land refused", zap.String("run_id", run.ID), zap.String("kind", string(ref.Kind)))
		send(api.LandMessage{Refusal: refusalJSON(run, err, ref)})
	default:
		d.log.Error("land failed", zap.String("run_id", run.ID), zap.Error(err))
		send(api.LandMessage{Error: d.failure(fmt.Errorf("land %s: %w", run.ID, err))})
	}
}

// verifyRefusal is a git.Refusal with the failing verification's output.
type verifyRefusal struct {
	git.Refusal
	tail, log string
}

// Unwrap makes a verifyRefusal a *git.Refusal for errors.As.
func (v *verifyRefusal) Unwrap() error { return &v.Refusal }

func refusalJSON(run storage.Run, err error, ref *git.Refusal) *api.LandRefusal {
	out := &api.LandRefusal{RunID: run.ID, Kind: string(ref.Kind), Message: ref.Message, Branch: run.Branch,
		BaseBranch: run.BaseBranch, Files: ref.Files, Hand: ref.Hand}
	if vr, ok := errors.AsType[*verifyRefusal](err); ok {
		out.OutputTail, out.LogPath = vr.tail, vr.log
	}
	return out
}

// land lands run's branch (see docs/workspaces.md, "Landing a run"). Every
// refusal is a *git.Refusal and leaves the user's checkout untouched.
func (d *Daemon) land(ctx context.Context, run storage.Run, req api.LandRequest, progress func(string)) (*api.LandResult, error) {
	in := git.LandInput{Checkout: run.Workspace, Branch: run.Branch, BaseBranch: run.BaseBranch,
		BaseCommit: run.BaseCommit, Squash: req.Squash, Message: req.Message}
	switch {
	case !run.Status.Terminal():
		return nil, &git.Refusal{Kind: git.RefusedActive,
			Message: fmt.Sprintf("run %s is %s: land it once it has ended (loopctl wait %s, or loopctl stop %s)",
				run.ID, run.Status, shortID(run.ID), shortID(run.ID))}
	case run.Isolation != "worktree" || run.Branch == "":
		// Only a workspace in git has a ledger that diff can show: outside
		// git, pointing at diff would send the user to a second error.
		shows := fmt.Sprintf(" (loopctl diff %s shows them)", shortID(run.ID))
		if _, err := git.TopLevel(ctx, run.Workspace); errors.Is(err, git.ErrNotRepository) {
			shows = ""
		}
		return nil, &git.Refusal{Kind: git.RefusedNotWorktree,
			Message: fmt.Sprintf("run %s ran in place: its changes are already in %s%s; only a worktree run (isolation=worktree) has a branch to land",
				run.ID, run.Workspace, shows)}
	case run.BaseBranch == "":
		return nil, &git.Refusal{Kind: git.RefusedWrongBranch,
			Message: fmt.Sprintf("run %s started from a detached HEAD: there is no base branch to land into", run.ID),
			Hand: []string{"cd " + run.Workspace, "git switch <the branch to land into>",
				"git merge " + run.Branch + "   # resolve any conflicts, run your tests, then git commit"}}
	}
	if in.Message == "" {
		in.Message = defaultLandMessage(run, req.Squash)
	}
	common, err := git.Cmd{Dir: run.Workspace}.Output(ctx, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("find the repository of %s: %w", run.Workspace, err)
	}
	// A clean of this run must not remove the worktree a land tests in.
	if _, busy := d.landing.LoadOrStore(run.ID, struct{}{}); busy {
		return nil, &git.Refusal{Kind: git.RefusedBusy, Message: "a land of this run is already under way"}
	}
	defer d.landing.Delete(run.ID)
	// Resume refuses a run being landed from now on; one resumed just
	// before is caught here.
	if cur, err := d.store.RunFlags(ctx, run.ID); err != nil {
		return nil, err
	} else if !cur.Status.Terminal() {
		return nil, &git.Refusal{Kind: git.RefusedActive, Message: fmt.Sprintf("run %s is %s again: land it once it has ended", run.ID, cur.Status)}
	}
	mu, _ := d.landLocks.LoadOrStore(common, &sync.Mutex{})
	if !mu.(*sync.Mutex).TryLock() {
		return nil, &git.Refusal{Kind: git.RefusedBusy,
			Message: "another land into this repository is under way; run loopctl land again when it has finished"}
	}
	defer mu.(*sync.Mutex).Unlock()

	plan, err := git.PlanLand(ctx, in)
	var ref *git.Refusal
	if errors.As(err, &ref) && ref.Kind == git.RefusedBranchMissing {
		return nil, d.branchMissing(ctx, run, ref)
	}
	if err != nil {
		return nil, err
	}
	res := &api.LandResult{RunID: run.ID, Branch: run.Branch, BaseBranch: run.BaseBranch, Mode: string(plan.Mode),
		Checkout: run.Workspace, BaseMoved: plan.Moved}
	if req.Message != "" && plan.Mode == git.LandFastForward {
		// Like git merge -m, a fast-forward makes no commit to carry the
		// message; saying so beats a message that silently goes nowhere.
		w := fmt.Sprintf("--message is not used: %s has not moved, so land fast-forwards it to the run's last commit and makes no new commit; "+
			"--squash --message makes one commit with it", run.BaseBranch)
		res.Warnings = append(res.Warnings, w)
		progress("warning: " + w)
	}
	steps, err := d.store.StepsLight(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	lastIteration := 0
	for _, st := range steps {
		lastIteration = max(lastIteration, st.Iteration)
	}
	var lv scheduler.LandVerification
	if !req.NoVerify {
		if lv, err = d.sched.LandVerification(ctx, run, run.Worktree, lastIteration); err != nil {
			if scheduler.IsUntrustedEnv(err) {
				return nil, &git.Refusal{Kind: git.RefusedUntrustedEnv,
					Message: fmt.Sprintf("verify_command cannot run: %v", err),
					Hand: []string{"loopctl trust -C " + run.Workspace + "   # after reviewing it; then loopctl land " + shortID(run.ID) + " again",
						"# or land by hand: cd " + run.Workspace + " && git merge " + run.Branch}}
			}
			return nil, err
		}
	}
	switch {
	case req.NoVerify:
		res.Note = "not verified: --no-verify"
	case len(lv.Commands) == 0:
		res.Note = "not verified: the run has no verify_command"
	case !plan.Moved:
		// The base has not moved: what lands is the run's last commit,
		// and the run's own last verification says whether it passed.
		if passed, _ := scheduler.LastVerification(steps); !passed {
			return nil, &git.Refusal{Kind: git.RefusedUntested,
				Message: fmt.Sprintf("the last commit of %s did not pass verification in the run (its last verification failed or never ran); "+
					"land it anyway with loopctl land %s --no-verify, or by hand", run.Branch, shortID(run.ID)),
				Hand: []string{"cd " + run.Workspace, "git merge " + run.Branch + "   # then run your tests"}}
		}
		res.Verified, res.TestedCommit = true, plan.RunTip
		progress(fmt.Sprintf("%s has not moved since the run started: the run's own last verification of %s stands",
			run.BaseBranch, shortCommit(plan.RunTip)))
	default:
		progress(fmt.Sprintf("%s has moved since the run started (%s → %s): testing the merge of the two, %s, in %s",
			run.BaseBranch, shortCommit(run.BaseCommit), shortCommit(plan.BaseTip), shortCommit(plan.Combined), run.Worktree))
		if err := d.verifyCombination(ctx, run, plan, lv, progress); err != nil {
			return nil, err
		}
		res.Verified, res.TestedCommit = true, plan.Combined
		progress("verify_command passed on the combination")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("land abandoned before the checkout was touched: %w", err)
	}
	// What is about to land is written down first: a daemon that dies
	// between git's fast-forward and the record below leaves the base
	// branch moved, and the next daemon records the land from this
	// (recoverLands) instead of forgetting it.
	intent := landedIntent{Checkout: run.Workspace, BaseBranch: run.BaseBranch, Commit: plan.Target, Payload: map[string]any{
		"run_id": run.ID, "branch": run.Branch, "base_branch": run.BaseBranch, "commit": plan.Target,
		"mode": string(plan.Mode), "verified": res.Verified, "tested_commit": res.TestedCommit,
	}}
	runDir := filepath.Join(d.opts.Home, "runs", run.ID)
	if err := writeJSONFile(filepath.Join(runDir, landedIntentFile), intent); err != nil {
		return nil, fmt.Errorf("land abandoned before the checkout was touched: %w", err)
	}
	if err := git.ApplyLand(ctx, plan); err != nil {
		os.Remove(filepath.Join(runDir, landedIntentFile))
		return nil, err
	}
	res.Commit = plan.Target
	// The checkout has moved: record it even if the request has gone.
	err = d.store.Write(context.WithoutCancel(ctx), func(tx *storage.Tx) error {
		return tx.RecordLanded(run.ID, plan.Target, intent.Payload)
	})
	if err != nil {
		// The intent stays: the next daemon records the land from it.
		return nil, fmt.Errorf("%s landed as %s but recording it failed (the daemon records it when it next starts): %w", run.Branch, plan.Target, err)
	}
	os.Remove(filepath.Join(runDir, landedIntentFile))
	d.log.Info("run landed", zap.String("run_id", run.ID), zap.String("mode", string(plan.Mode)),
		zap.String("commit", plan.Target), zap.Bool("verified", res.Verified))
	return res, nil
}

// branchMissing completes the refusal of a run whose branch was deleted:
// its ledger commits stay in the repository until git collects them, and
// "nothing to land" would send away a user whose work is one command from
// being back. A run that ended before its worktree was made never had a
// branch: "no longer exists" would send the user looking for who deleted it.
func (d *Daemon) branchMissing(ctx context.Context, run storage.Run, ref *git.Refusal) error {
	steps, err := d.store.StepsLight(ctx, run.ID)
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
func (d *Daemon) verifyCombination(ctx context.Context, run storage.Run, plan *git.LandPlan, lv scheduler.LandVerification, progress func(string)) error {
	hand := []string{"cd " + run.Workspace, "git merge " + run.Branch + "   # resolve, run your tests, git commit",
		"# or land without testing the combination: loopctl land " + shortID(run.ID) + " --no-verify"}
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
	dir := filepath.Join(d.opts.Home, "runs", run.ID)
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
			d.log.Error("could not put the worktree back on its branch", zap.String("worktree", run.Worktree), zap.Error(err))
			return // the marker stays: the next daemon tries again
		}
		_ = os.Remove(filepath.Join(dir, landMarkerFile))
	}()
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
			proc.Terminate(d.opts.Grace)
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
	return &verifyRefusal{log: logPath, tail: fileTail(logPath, landTailBytes), Refusal: git.Refusal{
		Kind: git.RefusedVerifyFailed, Hand: hand,
		Message: fmt.Sprintf("%s has moved since the run started, and the merge of %s into it fails verify_command (%s): nothing landed",
			run.BaseBranch, run.Branch, why)}}
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

// fileTail is the last n bytes of a file, from a line start when it can.
func fileTail(path string, n int64) string {
	b, fi, err := filetail.Read(path, n)
	if err != nil {
		return ""
	}
	s := string(b)
	if fi.Size() > n {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.ToValidUTF8(s, "")
}

func shortID(id string) string { return id[:min(len(id), 8)] }

func shortCommit(c string) string { return c[:min(len(c), 12)] }

// landMarkerFile, in a run's directory, says a land is testing in the
// run's worktree (detached at the merge under test).
const landMarkerFile = "landing.json"

type landMarker struct {
	Tag        string `json:"tag"` // the verification's supervise tag
	Worktree   string `json:"worktree"`
	Branch     string `json:"branch"`
	StatusPath string `json:"status_path"`
}

func writeLandMarker(dir string, m landMarker) error {
	if err := writeJSONFile(filepath.Join(dir, landMarkerFile), m); err != nil {
		return fmt.Errorf("write land marker: %w", err)
	}
	return nil
}

// landedIntentFile, in a run's directory, says a land is about to move
// (or has moved) the base branch and not recorded it yet.
const landedIntentFile = "landed.json"

type landedIntent struct {
	Checkout   string         `json:"checkout"`
	BaseBranch string         `json:"base_branch"`
	Commit     string         `json:"commit"`  // what the base branch is moved to
	Payload    map[string]any `json:"payload"` // RUN_LANDED's
}

func writeJSONFile(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// recoverLandedIntents records the lands whose base branch moved just
// before the previous daemon died, before it could record them: the
// branch holds the commit the intent names. An intent whose commit is not
// on the branch never landed, and is dropped.
func (d *Daemon) recoverLandedIntents(ctx context.Context) {
	intents, _ := filepath.Glob(filepath.Join(d.opts.Home, "runs", "*", landedIntentFile))
	for _, path := range intents {
		runID := filepath.Base(filepath.Dir(path))
		b, err := os.ReadFile(path)
		var in landedIntent
		if err == nil {
			err = json.Unmarshal(b, &in)
		}
		if err != nil || in.Commit == "" || in.BaseBranch == "" || in.Checkout == "" {
			// Written before git was run: a torn one never landed.
			d.log.Warn("unreadable land intent removed", zap.String("path", path), zap.Error(err))
			_ = os.Remove(path)
			continue
		}
		run, err := d.store.Run(ctx, runID)
		if err != nil {
			d.log.Warn("land intent of an unknown run removed", zap.String("path", path), zap.Error(err))
			_ = os.Remove(path)
			continue
		}
		landed := run.LandedCommit == in.Commit
		if !landed {
			_, err := git.Cmd{Dir: in.Checkout}.Output(ctx, "merge-base", "--is-ancestor", in.Commit, "refs/heads/"+in.BaseBranch)
			if err == nil {
				err = d.store.Write(ctx, func(tx *storage.Tx) error { return tx.RecordLanded(run.ID, in.Commit, in.Payload) })
				if err != nil {
					d.log.Error("could not record a land the previous daemon made", zap.String("run_id", run.ID), zap.Error(err))
					continue // the intent stays: the next start tries again
				}
				d.log.Info("recorded a land the previous daemon made but did not record",
					zap.String("run_id", run.ID), zap.String("base_branch", in.BaseBranch), zap.String("commit", in.Commit))
			}
		}
		_ = os.Remove(path)
	}
}

// recoverLands finishes what lands cut short by a daemon that died: the
// verification still running in a worktree is stopped (nothing will land
// it), and the worktree is put back on its run's branch, so that a resumed
// run never works on a detached merge. The user's checkout was never
// touched by them. Called at startup, before any run is recovered.
func (d *Daemon) recoverLands(ctx context.Context) {
	marks, _ := filepath.Glob(filepath.Join(d.opts.Home, "runs", "*", landMarkerFile))
	for _, path := range marks {
		b, err := os.ReadFile(path)
		var m landMarker
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil || m.Tag == "" || m.Worktree == "" || m.Branch == "" {
			d.log.Warn("unreadable land marker removed", zap.String("path", path), zap.Error(err))
			_ = os.Remove(path)
			continue
		}
		if id, ok := supervise.Find(m.Tag); ok {
			if proc, err := supervise.Adopt(id, m.Tag, m.StatusPath); err == nil {
				proc.Terminate(d.opts.Grace)
				select {
				case <-proc.Done():
				case <-time.After(d.opts.Grace + 5*time.Second):
					d.log.Warn("a cut-short land's verification did not stop", zap.String("tag", m.Tag))
				}
			}
		}
		if _, err := os.Stat(m.Worktree); err == nil {
			if err := git.RestoreBranch(ctx, m.Worktree, m.Branch); err != nil {
				d.log.Error("could not put a worktree back on its branch after a cut-short land",
					zap.String("worktree", m.Worktree), zap.Error(err))
				continue
			}
		}
		_ = os.Remove(path)
		d.log.Info("a land cut short by the previous daemon was undone; nothing had landed",
			zap.String("worktree", m.Worktree), zap.String("branch", m.Branch))
	}
}
