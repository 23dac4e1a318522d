package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/shquote"
	"github.com/loopd/loopd/internal/termtext"
)

// A fleet run (one with a repo_url, reached through LOOPD_URL) is landed
// by loopctl itself, in the user's clone: the API node need not see it,
// and the combination of a moved base branch and the run's branch is
// tested here, in a temporary worktree of the clone, not in the run's
// worktree on a worker. The API node gives the run's verification as
// frozen when the run was created (never the clone's .loop/config) and
// records the land. See docs/fleet.md, "Getting the work back".

// landDirName is the directory in the clone's git directory that holds a
// land's temporary worktree, its pid file and its intent: inside .git, so
// the user's checkout never shows it, and found again by the next land
// when loopctl was killed.
const landDirName = "loopd-land"

// fleetLand is one land of a fleet run in a clone.
type fleetLand struct {
	o     *landOptions
	c     *api.Client
	ref   api.RunRef
	run   api.Run
	clone string // the clone's top level
	dir   string // <git-common-dir>/loopd-land
	short string
	info  api.LocalLand // what the verification runs (not asked with --no-verify)
}

// landedIntent is written before the base branch moves: a loopctl killed
// between the move and the record leaves it, and the next land records
// the land from it.
type landedIntent struct {
	BaseBranch string            `json:"base_branch"`
	Request    api.LandedRequest `json:"request"`
}

func (o *landOptions) landFleet(ctx context.Context, c *api.Client, ref api.RunRef, run api.Run, remote string) error {
	clone, err := o.landClone(ctx, run)
	if err != nil {
		return err
	}
	common, err := git.Cmd{Dir: clone}.Output(ctx, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return fmt.Errorf("find the git directory of %s: %w", clone, err)
	}
	fl := &fleetLand{o: o, c: c, ref: ref, run: run, clone: clone, dir: filepath.Join(common, landDirName),
		short: run.ID[:min(8, len(run.ID))]}
	if fl.run.Branch == "" {
		fl.run.Branch = "loop/" + fl.short
	}
	var res *api.LandResult
	if o.Push {
		res, err = fl.push(ctx, remote)
	} else {
		res, err = fl.land(ctx)
	}
	if ae, ok := errors.AsType[*api.Error](err); ok && ae.Code == api.CodeForbidden {
		// Another user's run: a refusal of the land, not of the token.
		return &exitError{code: exitUsage, msg: "land refused: " + ae.Message + "\n  nothing was changed"}
	}
	var ref2 *git.Refusal
	if errors.As(err, &ref2) {
		return o.refused(&api.LandRefusal{RunID: run.ID, Kind: string(ref2.Kind), Message: ref2.Message, Branch: fl.run.Branch,
			BaseBranch: run.BaseBranch, Files: ref2.Files, Hand: ref2.Hand})
	}
	var vf *verifyFailed
	if errors.As(err, &vf) {
		return o.refused(vf.refusal)
	}
	if err != nil {
		return err
	}
	if res.Push != nil {
		return o.printPush(res)
	}
	return o.printLanded(res)
}

// landClone is the clone a fleet run lands in: the git top level of -C
// or the current directory, else the run's workspace when it is a clone
// here (the same machine as the API node).
func (o *landOptions) landClone(ctx context.Context, run api.Run) (string, error) {
	dir := o.Dir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if top, err := git.TopLevel(ctx, dir); err == nil {
		return top, nil
	}
	// Only without -C: a -C that names no repository is a mistake to
	// report, not a reason to land somewhere else.
	if o.Dir == "" && run.Workspace != "" {
		if top, err := git.TopLevel(ctx, run.Workspace); err == nil {
			return top, nil
		}
	}
	return "", usageErrorf("run %s is a fleet run of %s: run loopctl land in your clone of it (or give -C CLONE); %s is not in a git repository",
		run.ID, run.RepoURL, dir)
}

func (fl *fleetLand) progress(msg string) {
	if !fl.o.JSON {
		fmt.Fprintln(fl.o.Err, termtext.Quote(msg)) // names branches and paths: a repository's bytes
	}
}

// begin takes the run's land lock in the clone (one land or push of the
// run in this clone at a time; a lock held by a killed loopctl went with
// its process) and clears what a killed land left. release gives the lock
// back.
func (fl *fleetLand) begin(ctx context.Context) (release func(), err error) {
	if err := os.MkdirAll(fl.dir, 0o700); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(fl.dir, fl.run.ID+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, &git.Refusal{Kind: git.RefusedBusy, Message: "a land of this run in " + fl.clone + " is already under way"}
	}
	fl.cleanStale(ctx)
	return func() { lock.Close() }, nil
}

// ready refuses a run with nothing to land yet, asks the API node what
// the verification runs (refused for another user's run before the clone
// is touched), and fetches the run's branch into the clone.
func (fl *fleetLand) ready(ctx context.Context, needInfo bool) error {
	run := fl.run
	switch {
	case !run.Status.Terminal():
		return &git.Refusal{Kind: git.RefusedActive,
			Message: fmt.Sprintf("run %s is %s: land it once it has ended (loopctl wait %s, or loopctl stop %s)", run.ID, run.Status, fl.short, fl.short)}
	case run.BaseBranch == "":
		return &git.Refusal{Kind: git.RefusedWrongBranch,
			Message: fmt.Sprintf("run %s started from a detached HEAD: there is no base branch to land into", run.ID)}
	}
	if needInfo {
		var err error
		if fl.info, err = fl.c.LocalLand(ctx, fl.ref, api.LocalLandQuery{}); err != nil {
			return err
		}
	}
	// A repository that lacks the run's base commit is not a clone of
	// the run's repository (or not one fetched since the run started):
	// its branches are not where the run's work goes.
	if !git.CommitExists(ctx, fl.clone, run.BaseCommit) {
		return &git.Refusal{Kind: git.RefusedWrongBranch,
			Message: fmt.Sprintf("%s does not have the run's base commit %s: run loopctl land in a clone of %s (git fetch it first), or give -C CLONE",
				fl.clone, shortCommit(run.BaseCommit), run.RepoURL)}
	}
	fl.progress(fmt.Sprintf("fetching %s from %s into %s", run.Branch, run.RepoURL, fl.clone))
	return fl.fetch(ctx)
}

func (fl *fleetLand) land(ctx context.Context) (*api.LandResult, error) {
	run := fl.run
	release, err := fl.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	if res, err := fl.recoverIntent(ctx); res != nil || err != nil {
		return res, err
	}
	if run.LandedCommit != "" {
		return nil, &git.Refusal{Kind: git.RefusedNothing,
			Message: fmt.Sprintf("run %s has landed already (as %s): there is nothing more to land", run.ID, shortCommit(run.LandedCommit))}
	}
	if err := fl.ready(ctx, !fl.o.NoVerify); err != nil {
		return nil, err
	}
	in := git.LandInput{Checkout: fl.clone, Branch: run.Branch, BaseBranch: run.BaseBranch, BaseCommit: run.BaseCommit,
		Squash: fl.o.Squash, Message: fl.o.Message}
	if in.Message == "" {
		in.Message = defaultFleetLandMessage(run, fl.o.Squash)
	}
	plan, err := git.PlanLand(ctx, in)
	if err != nil {
		return nil, err
	}
	res := &api.LandResult{RunID: run.ID, Branch: run.Branch, BaseBranch: run.BaseBranch, Mode: string(plan.Mode),
		Checkout: fl.clone, BaseMoved: plan.Moved}
	if fl.o.Message != "" && plan.Mode == git.LandFastForward {
		w := fmt.Sprintf("--message is not used: %s has not moved, so land fast-forwards it to the run's last commit and makes no new commit; "+
			"--squash --message makes one commit with it", run.BaseBranch)
		res.Warnings = append(res.Warnings, w)
		fl.progress("warning: " + w)
	}
	if err := fl.verify(ctx, plan, res); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("land abandoned before the checkout was touched: %w", err)
	}
	req := api.LandedRequest{Commit: plan.Target, Mode: string(plan.Mode), Verified: res.Verified, TestedCommit: res.TestedCommit}
	intent := filepath.Join(fl.dir, run.ID+".landed")
	b, _ := json.Marshal(landedIntent{BaseBranch: run.BaseBranch, Request: req})
	if err := os.WriteFile(intent, b, 0o600); err != nil {
		return nil, fmt.Errorf("land abandoned before the checkout was touched: %w", err)
	}
	if err := git.ApplyLand(ctx, plan); err != nil {
		os.Remove(intent)
		return nil, err
	}
	res.Commit = plan.Target
	// The clone has moved: record it even if loopctl is being stopped.
	if _, err := fl.c.RecordLanded(context.WithoutCancel(ctx), fl.ref, req); err != nil {
		return nil, fmt.Errorf("%s landed in %s as %s, but recording it failed (unless the run was recorded landed meanwhile, by another clone's land, "+
			"loopctl land %s again records it): %w", run.Branch, fl.clone, shortCommit(plan.Target), fl.short, err)
	}
	os.Remove(intent)
	return res, nil
}

// recoverIntent records a land a killed loopctl made but did not record:
// the base branch is where the intent says it went.
func (fl *fleetLand) recoverIntent(ctx context.Context) (*api.LandResult, error) {
	path := filepath.Join(fl.dir, fl.run.ID+".landed")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	var in landedIntent
	if json.Unmarshal(b, &in) != nil || fl.run.LandedCommit != "" {
		os.Remove(path)
		return nil, nil
	}
	tip, terr := git.Cmd{Dir: fl.clone}.Output(ctx, "rev-parse", "-q", "--verify", "refs/heads/"+in.BaseBranch)
	if terr != nil || tip != in.Request.Commit {
		os.Remove(path) // the base branch never moved there: nothing landed
		return nil, nil
	}
	fl.progress(fmt.Sprintf("%s is at %s, landed by an earlier loopctl land that did not record it: recording it", in.BaseBranch, shortCommit(in.Request.Commit)))
	if _, err := fl.c.RecordLanded(ctx, fl.ref, in.Request); err != nil {
		return nil, fmt.Errorf("record the earlier land of %s: %w", fl.run.Branch, err)
	}
	os.Remove(path)
	return &api.LandResult{RunID: fl.run.ID, Branch: fl.run.Branch, BaseBranch: in.BaseBranch, Mode: in.Request.Mode, Checkout: fl.clone,
		Commit: in.Request.Commit, Verified: in.Request.Verified, TestedCommit: in.Request.TestedCommit,
		BaseMoved: in.Request.Mode != string(git.LandFastForward), Note: map[bool]string{false: "not verified: as recorded by the earlier land"}[in.Request.Verified]}, nil
}

// fetch fetches the run's branch from its repository into the clone, as
// the local branch of the same name. The fetch never rewrites that local
// branch (no '+'): commits someone made on it locally are not dropped,
// the land is refused instead.
func (fl *fleetLand) fetch(ctx context.Context) error {
	run := fl.run
	ref := "refs/heads/" + run.Branch
	_, err := git.Cmd{Dir: fl.clone, Group: true}.Run(ctx, "fetch", "--quiet", "--no-tags", "--", run.RepoURL, ref+":"+ref)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("fetch %s from %s: %w", run.Branch, run.RepoURL, ctx.Err())
	}
	return &git.Refusal{Kind: git.RefusedBranchMissing,
		Message: fmt.Sprintf("could not fetch the run's branch %s from %s into %s (%v): nothing landed; "+
			"a run that changed nothing pushed no branch, and a local %s with commits of its own is not overwritten", run.Branch, run.RepoURL, fl.clone, err, run.Branch),
		Hand: []string{"git -C " + shquote.Quote(fl.clone) + " fetch " + shquote.Quote(run.RepoURL) + " " + shquote.Quote(run.Branch) + "   # see what is there"}}
}

// verifyFailed is a refusal with the failing verification's output.
type verifyFailed struct{ refusal *api.LandRefusal }

func (v *verifyFailed) Error() string { return v.refusal.Message }

// verify decides whether what is about to land was tested, testing the
// combination when the base has moved, and says so in res.
func (fl *fleetLand) verify(ctx context.Context, plan *git.LandPlan, res *api.LandResult) error {
	run := fl.run
	if fl.o.NoVerify {
		res.Note = "not verified: --no-verify"
		return nil
	}
	info := fl.info
	hand := []string{"cd " + shquote.Quote(fl.clone), "git merge " + shquote.Quote(run.Branch) + "   # resolve, run your tests, git commit",
		"# or land without testing the combination: loopctl land " + fl.short + " --no-verify"}
	switch {
	case len(info.VerifyCommands) == 0:
		res.Note = "not verified: the run has no verify_command"
		return nil
	case !plan.Moved:
		if !info.LastVerified || info.TestedCommit != plan.RunTip {
			return &git.Refusal{Kind: git.RefusedUntested,
				Message: fmt.Sprintf("the last commit of %s (%s) did not pass verification in the run (its last verification failed or never ran on it); "+
					"land it anyway with loopctl land %s --no-verify, or by hand", run.Branch, shortCommit(plan.RunTip), fl.short),
				Hand: []string{"cd " + shquote.Quote(fl.clone), "git merge " + shquote.Quote(run.Branch) + "   # then run your tests"}}
		}
		res.Verified, res.TestedCommit = true, plan.RunTip
		fl.progress(fmt.Sprintf("%s has not moved since the run started: the run's own last verification of %s stands",
			run.BaseBranch, shortCommit(plan.RunTip)))
		return nil
	}
	wt := filepath.Join(fl.dir, run.ID+".wt")
	fl.progress(fmt.Sprintf("%s has moved since the run started (%s → %s): testing the merge of the two, %s, in %s",
		run.BaseBranch, shortCommit(run.BaseCommit), shortCommit(plan.BaseTip), shortCommit(plan.Combined), wt))
	if _, err := (git.Cmd{Dir: fl.clone}).Run(ctx, "worktree", "add", "--quiet", "--detach", wt, plan.Combined); err != nil {
		return fmt.Errorf("make a worktree of %s to test the combination in: %w", fl.clone, err)
	}
	defer fl.removeWorktree(context.WithoutCancel(ctx))
	env, err := fl.verifyEnv(info, hand, wt)
	if err != nil {
		return err
	}
	logPath := filepath.Join(fl.dir, run.ID+"-"+strconv.FormatInt(time.Now().UnixMilli(), 10)+".log")
	env = append(env, "LOOP_RUN_ID="+run.ID, "LOOP_WORKSPACE="+wt, "LOOP_PHASE=verification",
		"LOOP_ITERATION="+strconv.Itoa(info.Iteration), "LOOP_CHECKOUT="+fl.clone)
	fl.progress("running verify_command (output: " + logPath + ")")
	code, why, err := fl.runVerify(ctx, info.VerifyCommands, wt, env, logPath)
	if err != nil {
		return err
	}
	if code == 0 {
		res.Verified, res.TestedCommit = true, plan.Combined
		fl.progress("verify_command passed on the combination")
		os.Remove(logPath) // a failing one's output stays: the refusal names it
		return nil
	}
	return &verifyFailed{refusal: &api.LandRefusal{RunID: run.ID, Kind: string(git.RefusedVerifyFailed), Branch: run.Branch,
		BaseBranch: run.BaseBranch, Hand: hand, LogPath: logPath, OutputTail: tailOf(logPath, 4<<10),
		Message: fmt.Sprintf("%s has moved since the run started, and the merge of %s into it fails verify_command (%s): nothing landed",
			run.BaseBranch, run.Branch, why)}}
}

// verifyEnv is the environment of the land's verification: loopctl's own
// without what reaches the fleet (the agent's steps never see it either),
// then the run's env file as a step of the run loads it: the worktree's
// (wt, the combination under test: what is committed there), and when
// the workspace picked it, only while its bytes are the ones the user
// trusted.
func (fl *fleetLand) verifyEnv(info api.LocalLand, hand []string, wt string) ([]string, error) {
	env := fleetEnviron()
	if info.EnvFile == "" {
		return env, nil
	}
	path := filepath.FromSlash(info.EnvFile)
	if !filepath.IsAbs(path) {
		path = filepath.Join(wt, path)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return env, nil // sets nothing
	}
	if err != nil {
		return nil, err
	}
	vars, err := config.ParseEnvFile(path, data)
	if err != nil {
		return nil, err
	}
	if info.EnvGuarded && len(vars) > 0 && sha256Hex(data) != info.EnvSHA256 {
		what := "is not trusted"
		if info.EnvSHA256 != "" {
			what = "is not the content that was trusted for the run"
		}
		return nil, &git.Refusal{Kind: git.RefusedUntrustedEnv, Hand: append([]string{"loopctl trust -C " + shquote.Quote(fl.clone) + "   # after reviewing it; then loopctl land " + fl.short + " again"}, hand[:2]...),
			Message: fmt.Sprintf("verify_command cannot run: the env file %s sets variables but %s; it was not loaded and nothing ran", path, what)}
	}
	return append(env, vars...), nil
}

// fleetEnviron is loopctl's environment without what reaches the fleet:
// the repository's commands (verify_command, pr_command) get no token.
func fleetEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "LOOPD_URL" || k == "LOOPD_TOKEN" || k == "LOOPD_STORE" || strings.HasPrefix(k, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// runVerify runs commands in dir, one after the other, each in its own
// process group (so that a kill reaches whatever it started), output to
// logPath. It returns the first failing command's exit code (-1: killed)
// and a description; 0 when all passed. The group's leader's pid is kept
// in the land directory while it runs: a loopctl killed meanwhile leaves
// it, and the next land kills what is left of the group.
func (fl *fleetLand) runVerify(ctx context.Context, commands []string, dir string, env []string, logPath string) (int, string, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, "", err
	}
	defer logf.Close()
	pidPath := filepath.Join(fl.dir, fl.run.ID+".pid")
	started := time.Now()
	for _, command := range commands {
		cmd := exec.Command("/bin/sh", "-c", command)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, logf, logf
		// Pdeathsig: loopctl killed (kill -9) takes the shell with it;
		// what the shell started is killed by the next land (pid file).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return 0, "", fmt.Errorf("start verify_command %q: %w", command, err)
		}
		_ = os.WriteFile(pidPath, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		tick := time.NewTicker(landProgressEvery)
		var werr error
	wait:
		for {
			select {
			case werr = <-done:
				break wait
			case <-tick.C:
				fl.progress(fmt.Sprintf("verify_command still running (%s)", time.Since(started).Round(time.Second)))
			case <-ctx.Done():
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				tick.Stop()
				os.Remove(pidPath)
				return 0, "", fmt.Errorf("land abandoned during verification, nothing landed: %w", ctx.Err())
			}
		}
		tick.Stop()
		// Whatever the command left running in its group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		os.Remove(pidPath)
		if werr != nil {
			code := -1
			if ee, ok := errors.AsType[*exec.ExitError](werr); ok {
				code = ee.ExitCode()
			}
			if code == -1 {
				return -1, fmt.Sprintf("%q was killed: %v", command, werr), nil
			}
			return code, fmt.Sprintf("%q exited %d", command, code), nil
		}
	}
	return 0, "", nil
}

// landProgressEvery is how often a long verification says it is still
// running.
const landProgressEvery = 15 * time.Second

// cleanStale removes what a land of this run killed mid-verification
// left: the rest of its verification's process group and its temporary
// worktree.
func (fl *fleetLand) cleanStale(ctx context.Context) {
	pidPath := filepath.Join(fl.dir, fl.run.ID+".pid")
	if b, err := os.ReadFile(pidPath); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			// Its own group: the leader's pid is the group's id, and the
			// lock we hold says no land of ours is running it.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		os.Remove(pidPath)
	}
	if _, err := os.Stat(filepath.Join(fl.dir, fl.run.ID+".wt")); err == nil {
		fl.progress("removing the worktree an earlier land of this run left (it was stopped mid-verification)")
		fl.removeWorktree(ctx)
	}
}

// removeWorktree removes the land's temporary worktree and git's record
// of it — of it only: never `git worktree prune`, which would also drop
// the records of the user's own worktrees whose directories are away (on
// a removable disk, say).
func (fl *fleetLand) removeWorktree(ctx context.Context) {
	wt := filepath.Join(fl.dir, fl.run.ID+".wt")
	if _, err := (git.Cmd{Dir: fl.clone}).Run(ctx, "worktree", "remove", "--force", "--force", wt); err == nil {
		return
	}
	// git could not (its directory half gone, say): remove the directory,
	// then git's record of this worktree, found by the gitdir it names.
	_ = os.RemoveAll(wt)
	admins, _ := filepath.Glob(filepath.Join(filepath.Dir(fl.dir), "worktrees", "*", "gitdir"))
	for _, a := range admins {
		if b, err := os.ReadFile(a); err == nil && filepath.Clean(strings.TrimSpace(string(b))) == filepath.Join(wt, ".git") {
			_ = os.RemoveAll(filepath.Dir(a))
		}
	}
}

func defaultFleetLandMessage(run api.Run, squash bool) string {
	if !squash {
		return fmt.Sprintf("Merge branch '%s' into %s\n\nloop run %s", run.Branch, run.BaseBranch, run.ID)
	}
	title := run.Name
	if title == "" {
		title, _, _ = strings.Cut(strings.TrimSpace(run.Goal), "\n")
	}
	if title == "" {
		title = "loop run " + run.ID[:min(8, len(run.ID))]
	}
	if len(title) > 72 {
		title = strings.TrimSpace(title[:69]) + "..."
	}
	return fmt.Sprintf("%s\n\nSquashed from branch %s (loop run %s).", title, run.Branch, run.ID)
}

// tailOf is the last n bytes of the file at path.
func tailOf(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
