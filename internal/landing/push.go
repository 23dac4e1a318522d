package landing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/atomicfile"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/prcommand"
	"github.com/loopd/loopd/internal/shquote"
	"github.com/loopd/loopd/internal/storage"
)

// ModePush is the mode of a LandResult and of a RUN_LANDED payload when
// the run's branch was pushed (loopctl land --push), not landed.
const ModePush = "push"

// pushCheckTimeout bounds the read of a remote (git ls-remote) that
// settles a push cut short, at startup: an unreachable remote must not
// hold the daemon's start.
const pushCheckTimeout = 15 * time.Second

// PushOptions say how to push a run's branch.
type PushOptions struct {
	// Remote is a remote's name, a URL or an absolute path; "" for the
	// base branch's upstream remote, else origin.
	Remote   string
	NoVerify bool // push without testing the combination when the base moved
	Progress func(string)
}

// PRCommand is the pr_command a push runs once the branch is on the
// remote: as the workspace's config says when the push is made.
type PRCommand struct {
	Command string // "" when none is configured
	Source  string // the config file that set it, for messages
}

// PRCommander finds the pr_command for a push of run. A pr_command from a
// workspace file the user has not trusted in its present content is an
// *UntrustedCommandError.
type PRCommander interface {
	PRCommand(ctx context.Context, run storage.Run) (PRCommand, error)
}

// UntrustedCommandError is a command from a workspace file that changed
// since the user trusted it (or was never trusted): loopd does not run it.
type UntrustedCommandError struct{ Err error }

func (e *UntrustedCommandError) Error() string { return e.Err.Error() }
func (e *UntrustedCommandError) Unwrap() error { return e.Err }

// Push pushes run's branch to a remote instead of landing it (see
// docs/workspaces.md, "Handing the work back"): the same verification a
// land makes (the combination tested when the base branch has moved),
// then git push --force-with-lease on where loopd last pushed the branch
// (a new branch must not exist yet), then pr_command when one is
// configured. The user's checkout is never touched. What does not happen
// is a *Refusal and changes nothing, on the remote either.
func (l *Lander) Push(ctx context.Context, run storage.Run, opts PushOptions) (*api.LandResult, error) {
	if opts.Progress == nil {
		opts.Progress = func(string) {}
	}
	res, err := l.push(ctx, run, opts)
	if err != nil {
		err = asRefusal(run, err)
		if ref, ok := errors.AsType[*Refusal](err); ok && (ref.Kind == git.RefusedConflict || ref.Kind == git.RefusedVerifyFailed) {
			l.offerOntoBase(run, ref)
		}
		return nil, err
	}
	return res, nil
}

func (l *Lander) push(ctx context.Context, run storage.Run, opts PushOptions) (*api.LandResult, error) {
	if err := refuseEarly(ctx, run); err != nil {
		return nil, err
	}
	release, err := l.begin(ctx, run)
	if err != nil {
		return nil, err
	}
	defer release()

	remote, err := git.ResolveRemote(ctx, run.Workspace, run.BaseBranch, opts.Remote)
	if err != nil {
		return nil, err
	}
	// Before anything is pushed: an untrusted pr_command refuses the
	// whole push, rather than leave a branch and no pull request.
	var pr PRCommand
	if l.prs != nil {
		if pr, err = l.prs.PRCommand(ctx, run); err != nil {
			if _, ok := errors.AsType[*UntrustedCommandError](err); ok {
				return nil, &git.Refusal{Kind: git.RefusedUntrustedPRCmd,
					Message: fmt.Sprintf("pr_command cannot run: %v; nothing was pushed", err),
					Hand: []string{"loopctl trust -C " + shquote.Quote(run.Workspace) + "   # after reviewing it; then loopctl land " + shortID(run.ID) + " --push again",
						"# or push by hand: git -C " + shquote.Quote(run.Workspace) + " push " + shquote.Quote(remote.URL) + " " + shquote.Quote(run.Branch)}}
			}
			return nil, &git.Refusal{Kind: git.RefusedBadConfig, Message: fmt.Sprintf("%v; nothing was pushed", err)}
		}
	}
	// A push a daemon that died left half recorded is settled first: the
	// lease below is on what is recorded.
	if in, path, ok := l.readPushIntent(run.ID); ok {
		if err := l.settlePush(ctx, run, in, path); err != nil {
			return nil, &git.Refusal{Kind: git.RefusedPushFailed,
				Message: fmt.Sprintf("a push of %s cut short by a daemon that stopped cannot be checked on %s: %v; nothing was pushed", in.Branch, remote, err)}
		}
	}
	in := git.LandInput{Checkout: run.Workspace, Branch: run.Branch, BaseBranch: run.BaseBranch, BaseCommit: run.BaseCommit, Push: true}
	plan, err := git.PlanLand(ctx, in)
	if ref, ok := errors.AsType[*git.Refusal](err); ok && ref.Kind == git.RefusedBranchMissing {
		return nil, l.branchMissing(ctx, run, ref)
	}
	if err != nil {
		return nil, err
	}
	opts.Progress(fmt.Sprintf("pushing %s to %s once it is verified", run.Branch, remote))
	res := &api.LandResult{RunID: run.ID, Branch: run.Branch, BaseBranch: run.BaseBranch, Mode: ModePush,
		Checkout: run.Workspace, BaseMoved: plan.Moved}
	if err := l.verify(ctx, run, plan, LandOptions{NoVerify: opts.NoVerify, Progress: opts.Progress}, res); err != nil {
		if ref, ok := errors.AsType[*git.Refusal](err); ok && ref.Kind == git.RefusedUntested {
			ref.Message = fmt.Sprintf("the last commit of %s did not pass verification in the run (its last verification failed or never ran): "+
				"nothing was pushed; push it anyway with loopctl land %s --push --no-verify", run.Branch, shortID(run.ID))
			ref.Hand = nil
		}
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("push abandoned before anything was pushed: %w", err)
	}
	expect, err := l.lastPushed(ctx, run.ID, remote.URL, run.Branch)
	if err != nil {
		return nil, err
	}
	push := &api.PushResult{Remote: remote.Name, URL: remote.URL, Branch: run.Branch, Commit: plan.RunTip, Previous: expect}
	res.Push, res.Commit = push, plan.RunTip
	payload := map[string]any{"run_id": run.ID, "branch": run.Branch, "base_branch": run.BaseBranch, "commit": plan.RunTip,
		"mode": ModePush, "verified": res.Verified, "tested_commit": res.TestedCommit, "push": push}
	// Written before git runs: a daemon killed during the push leaves
	// the intent, and the next one asks the remote whether it took it
	// (settlePush) instead of forgetting, or repeating, the push.
	intent := pushIntent{Checkout: run.Workspace, RemoteName: remote.Name, URL: remote.URL, Branch: run.Branch,
		Commit: plan.RunTip, Stage: stagePush, PRCommand: pr.Command != "", Payload: payload}
	intentPath := filepath.Join(l.runDir(run.ID), pushIntentFile)
	if err := os.MkdirAll(l.runDir(run.ID), 0o700); err != nil {
		return nil, err
	}
	if err := writeIntent(intentPath, intent); err != nil {
		return nil, fmt.Errorf("push abandoned before anything was pushed: %w", err)
	}
	upToDate, err := git.Push(ctx, git.PushInput{Dir: run.Workspace, Remote: remote, Branch: run.Branch, Commit: plan.RunTip, Expect: expect})
	if upToDate {
		push.Previous = plan.RunTip
	}
	if ref, ok := errors.AsType[*git.Refusal](err); ok && ref.Kind == git.RefusedRemoteMoved {
		// The lease failed; a branch already at this very commit (pushed
		// by hand, say) is no one's work lost.
		if at, err2 := git.RemoteBranch(ctx, run.Workspace, remote, run.Branch); err2 == nil && at == plan.RunTip {
			push.Previous, err = at, nil
		}
	}
	if _, refused := errors.AsType[*git.Refusal](err); refused {
		os.Remove(intentPath) // git said it pushed nothing
		return nil, err
	}
	if err != nil {
		// Cut short (the request ended, the daemon is stopping): the
		// remote may have taken it. The intent stays; the next land
		// --push of the run, or the next daemon, asks the remote.
		return nil, err
	}
	opts.Progress(fmt.Sprintf("pushed %s to %s at %s", run.Branch, remote, shortCommit(plan.RunTip)))
	l.log.Info("run pushed", zap.String("run_id", run.ID), zap.String("remote", remote.URL), zap.String("branch", run.Branch),
		zap.String("commit", plan.RunTip), zap.Bool("verified", res.Verified))

	if pr.Command != "" {
		stamp := strconv.FormatInt(time.Now().UnixMilli(), 10)
		intent.Stage, intent.PRLog = stagePR, filepath.Join(l.runDir(run.ID), "pr-command-"+stamp+".log")
		if err := writeIntent(intentPath, intent); err != nil {
			l.log.Warn("could not note that pr_command runs", zap.String("run_id", run.ID), zap.Error(err))
		}
		res.PRCommand, res.PRURL = l.runPRCommand(ctx, run, res, pr, intent.PRLog, opts.Progress)
		payload["pr_url"], payload["pr_command"] = res.PRURL, res.PRCommand
	}
	// The branch is on the remote: record it even if the request has gone.
	err = l.store.Write(context.WithoutCancel(ctx), func(tx *storage.Tx) error { return tx.RecordPushed(run.ID, payload) })
	if err != nil {
		// The intent stays: the next daemon records the push from it.
		return nil, fmt.Errorf("%s was pushed to %s as %s but recording it failed (the daemon records it when it next starts): %w",
			run.Branch, remote, plan.RunTip, err)
	}
	os.Remove(intentPath)
	return res, nil
}

// lastPushed is the commit loopd last pushed run's branch to on the
// remote at url, from the run's RUN_LANDED events: what the remote
// branch must still be at for a new push to go ahead ("" — the branch
// must not exist yet).
func (l *Lander) lastPushed(ctx context.Context, runID, url, branch string) (string, error) {
	evs, err := l.store.EventsOfType(ctx, runID, events.RunLanded)
	if err != nil {
		return "", err
	}
	last := ""
	for _, ev := range evs {
		if commit, ok := api.PushedTo([]byte(ev.Payload), url, branch); ok {
			last = commit
		}
	}
	return last, nil
}

// runPRCommand runs pr_command in the run's workspace with LOOP_BRANCH,
// LOOP_BASE_BRANCH, LOOP_TITLE and LOOP_BODY_FILE, its output to logPath,
// in a process group of its own that a timeout or the land's end kills
// whole. It returns how it went and the first URL it printed.
func (l *Lander) runPRCommand(ctx context.Context, run storage.Run, res *api.LandResult, pr PRCommand, logPath string,
	progress func(string)) (*api.PRCommandResult, string) {
	out := &api.PRCommandResult{ExitCode: -1, LogPath: logPath}
	body, err := l.PRBody(ctx, run, res)
	if err != nil {
		out.Error = "pr_command not run: " + err.Error()
		return out, ""
	}
	bodyPath := filepath.Join(l.runDir(run.ID), "pr-body.md")
	if err := os.WriteFile(bodyPath, []byte(body.Markdown()), 0o600); err != nil {
		out.Error = "pr_command not run: " + err.Error()
		return out, ""
	}
	out, url := prcommand.Run(ctx, prcommand.Spec{Command: pr.Command, Source: pr.Source, Dir: run.Workspace, Env: os.Environ(),
		RunID: run.ID, Workspace: run.Workspace, Branch: run.Branch, BaseBranch: run.BaseBranch, Title: body.Title(),
		BodyFile: bodyPath, Push: res.Push, LogPath: logPath, Progress: progress})
	l.log.Info("pr_command ran", zap.String("run_id", run.ID), zap.Int("exit_code", out.ExitCode), zap.String("url", url))
	return out, url
}

// pushIntentFile, in a run's directory, says a push of the run's branch
// is about to be made (or was made) and not recorded yet.
const pushIntentFile = "push.json"

const (
	stagePush = "push" // git push is about to run, or running
	stagePR   = "pr"   // the push was made; pr_command is running
)

type pushIntent struct {
	Checkout   string         `json:"checkout"`
	RemoteName string         `json:"remote_name"`
	URL        string         `json:"url"`
	Branch     string         `json:"branch"`
	Commit     string         `json:"commit"` // what the remote branch is set to
	Stage      string         `json:"stage"`
	PRCommand  bool           `json:"pr_command"` // a pr_command was to run after the push
	PRLog      string         `json:"pr_log,omitempty"`
	Payload    map[string]any `json:"payload"` // RUN_LANDED's
}

// writeIntent replaces the intent atomically: a torn rewrite of one
// whose push was made would read as a push never made.
func writeIntent(path string, in pushIntent) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b)
}

func (l *Lander) readPushIntent(runID string) (pushIntent, string, bool) {
	path := filepath.Join(l.runDir(runID), pushIntentFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return pushIntent{}, path, false
	}
	var in pushIntent
	if err := json.Unmarshal(b, &in); err != nil || in.URL == "" || in.Branch == "" || in.Commit == "" {
		// Written before git was run: a torn one never pushed.
		l.log.Warn("unreadable push intent removed", zap.String("path", path), zap.Error(err))
		_ = os.Remove(path)
		return pushIntent{}, path, false
	}
	return in, path, true
}

// settlePush decides what became of a push a daemon that died left
// unrecorded, by asking the remote: when its branch is at the intent's
// commit, the push was made, and it is recorded (never made again
// blindly); else it never happened, and the intent is dropped. An error
// (the remote cannot be read) leaves the intent for the next try.
func (l *Lander) settlePush(ctx context.Context, run storage.Run, in pushIntent, path string) error {
	dir := in.Checkout
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = l.home // ls-remote of a URL needs no repository
	}
	at, err := git.RemoteBranch(ctx, dir, git.Remote{Name: in.RemoteName, URL: in.URL}, in.Branch)
	if err != nil {
		return err
	}
	if at != in.Commit {
		_ = os.Remove(path)
		l.log.Info("a push cut short by the previous daemon never reached the remote; nothing to record",
			zap.String("run_id", run.ID), zap.String("remote", in.URL), zap.String("branch", in.Branch))
		return nil
	}
	payload := maps.Clone(in.Payload)
	if payload == nil {
		payload = map[string]any{}
	}
	payload["recovered"] = true
	switch {
	case in.Stage == stagePR:
		payload["pr_command"] = &api.PRCommandResult{ExitCode: -1, LogPath: in.PRLog,
			Error: "pr_command was running when the daemon stopped: whether it made a pull request is unknown (see its output)"}
	case in.PRCommand:
		payload["pr_command"] = &api.PRCommandResult{ExitCode: -1,
			Error: "pr_command did not run: the daemon stopped right after the push; loopctl land --push again runs it"}
	}
	if err := l.store.Write(ctx, func(tx *storage.Tx) error { return tx.RecordPushed(run.ID, payload) }); err != nil {
		return fmt.Errorf("record the push the previous daemon made: %w", err)
	}
	_ = os.Remove(path)
	l.log.Info("recorded a push the previous daemon made but did not record", zap.String("run_id", run.ID),
		zap.String("remote", in.URL), zap.String("branch", in.Branch), zap.String("commit", in.Commit))
	return nil
}

// recoverPushIntents settles the pushes the previous daemon left
// unrecorded (see settlePush), each bounded by pushCheckTimeout.
func (l *Lander) recoverPushIntents(ctx context.Context) {
	paths, _ := filepath.Glob(filepath.Join(l.home, "runs", "*", pushIntentFile))
	for _, path := range paths {
		runID := filepath.Base(filepath.Dir(path))
		in, path, ok := l.readPushIntent(runID)
		if !ok {
			continue
		}
		run, err := l.store.Run(ctx, runID)
		if err != nil {
			l.log.Warn("push intent of an unknown run removed", zap.String("path", path), zap.Error(err))
			_ = os.Remove(path)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, pushCheckTimeout)
		err = l.settlePush(cctx, run, in, path)
		cancel()
		if err != nil {
			l.log.Warn("could not settle a push cut short by the previous daemon; the next loopctl land --push of the run tries again",
				zap.String("run_id", runID), zap.Error(err))
		}
	}
}
