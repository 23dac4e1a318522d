package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/prcommand"
	"github.com/loopd/loopd/internal/shquote"
)

// push is land --push of a fleet run, from the user's clone: the same
// verification as a land, then git push of the run's branch to remote
// with --force-with-lease on where loopd last pushed it there (from the
// run's RUN_LANDED events; a new branch must not exist yet), then
// pr_command, then the record through the API. The clone's checkout is
// never touched. A loopctl killed after git pushed but before the record
// leaves the remote at the run's commit: the next push finds it there
// ("it was there already") and records it.
func (fl *fleetLand) push(ctx context.Context, remoteArg string) (*api.LandResult, error) {
	run := fl.run
	release, err := fl.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	// Always asked: pr_command's trust and body come from the API node.
	if err := fl.ready(ctx, true); err != nil {
		return nil, err
	}
	remote, err := git.ResolveRemote(ctx, fl.clone, run.BaseBranch, remoteArg)
	if err != nil {
		return nil, err
	}
	// Before anything is pushed: an untrusted pr_command refuses the
	// whole push, rather than leave a branch and no pull request.
	prCmd, prSource, err := fl.prCommand()
	if err != nil {
		return nil, err
	}
	plan, err := git.PlanLand(ctx, git.LandInput{Checkout: fl.clone, Branch: run.Branch, BaseBranch: run.BaseBranch,
		BaseCommit: run.BaseCommit, Push: true})
	if err != nil {
		return nil, err
	}
	fl.progress(fmt.Sprintf("pushing %s to %s once it is verified", run.Branch, remote))
	res := &api.LandResult{RunID: run.ID, Branch: run.Branch, BaseBranch: run.BaseBranch, Mode: "push", Checkout: fl.clone, BaseMoved: plan.Moved}
	if err := fl.verify(ctx, plan, res); err != nil {
		if ref, ok := errors.AsType[*git.Refusal](err); ok && ref.Kind == git.RefusedUntested {
			ref.Message = fmt.Sprintf("the last commit of %s did not pass verification in the run (its last verification failed or never ran): "+
				"nothing was pushed; push it anyway with loopctl land %s --push --no-verify", run.Branch, fl.short)
			ref.Hand = nil
		}
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("push abandoned before anything was pushed: %w", err)
	}
	expect, err := fl.lastPushed(ctx, remote.URL)
	if err != nil {
		return nil, err
	}
	p := &api.PushResult{Remote: remote.Name, URL: remote.URL, Branch: run.Branch, Commit: plan.RunTip, Previous: expect}
	res.Push, res.Commit = p, plan.RunTip
	upToDate, err := git.Push(ctx, git.PushInput{Dir: fl.clone, Remote: remote, Branch: run.Branch, Commit: plan.RunTip, Expect: expect})
	if upToDate {
		p.Previous = plan.RunTip
	}
	if ref, ok := errors.AsType[*git.Refusal](err); ok && ref.Kind == git.RefusedRemoteMoved {
		// The lease failed; a branch already at this very commit (the
		// workers' own push to repo_url, a push this loopctl made before
		// it was killed, one made by hand) is no one's work lost.
		if at, err2 := git.RemoteBranch(ctx, fl.clone, remote, run.Branch); err2 == nil && at == plan.RunTip {
			p.Previous, err = at, nil
		}
	}
	if err != nil {
		return nil, err
	}
	fl.progress(fmt.Sprintf("pushed %s to %s at %s", run.Branch, remote, shortCommit(plan.RunTip)))
	req := api.LandedRequest{Commit: plan.RunTip, Mode: "push", Verified: res.Verified, TestedCommit: res.TestedCommit, Push: p}
	if prCmd != "" {
		res.PRCommand, res.PRURL = fl.runPRCommand(ctx, res, prCmd, prSource)
		req.PRCommand, req.PRURL = res.PRCommand, res.PRURL
	}
	// The branch is on the remote: record it even if loopctl is being
	// stopped.
	if _, err := fl.c.RecordLanded(context.WithoutCancel(ctx), fl.ref, req); err != nil {
		return nil, fmt.Errorf("%s was pushed to %s as %s, but recording it failed (loopctl land %s --push again records it): %w",
			run.Branch, remote, shortCommit(plan.RunTip), fl.short, err)
	}
	return res, nil
}

// lastPushed is the commit a land --push of the run last pushed its
// branch to at url ("" — the branch must not exist there yet).
func (fl *fleetLand) lastPushed(ctx context.Context, url string) (string, error) {
	last := ""
	for ev, err := range fl.c.Events(ctx, fl.ref, 0, false) {
		if err != nil {
			return "", err
		}
		if ev.Type != "RUN_LANDED" {
			continue
		}
		if commit, ok := api.PushedTo(ev.Payload, url, fl.run.Branch); ok {
			last = commit
		}
	}
	return last, nil
}

// prCommand is the pr_command a push runs, read now from the layers a
// run in the clone reads: your own config file, then the clone's
// .loop/config, which wins. One from the clone's .loop/config runs only
// when that file's bytes are the ones trusted for the run's workspace
// (whoever wrote the repository wrote it), as the daemon's push requires.
func (fl *fleetLand) prCommand() (cmd, source string, err error) {
	if user, uerr := config.UserConfigPath(); uerr == nil {
		if b, rerr := os.ReadFile(user); rerr == nil {
			entries, perr := config.Parse(bytes.NewReader(b), user)
			if perr != nil {
				return "", "", &git.Refusal{Kind: git.RefusedBadConfig, Message: fmt.Sprintf("%v; nothing was pushed", perr)}
			}
			for _, e := range entries {
				if e.Key == "pr_command" {
					cmd, source = e.Value, user
				}
			}
		}
	}
	path := filepath.Join(fl.clone, config.WorkspaceConfig)
	data, rerr := os.ReadFile(path)
	if rerr != nil {
		return cmd, source, nil
	}
	entries, perr := config.Parse(bytes.NewReader(data), path)
	if perr != nil {
		return "", "", &git.Refusal{Kind: git.RefusedBadConfig, Message: fmt.Sprintf("%v; nothing was pushed", perr)}
	}
	fromClone := ""
	for _, e := range entries {
		if e.Key == "pr_command" {
			fromClone = e.Value
		}
	}
	if fromClone == "" {
		return cmd, source, nil
	}
	if sha256Hex(data) != fl.info.ConfigSHA256 {
		what := "was never trusted for the run's workspace"
		if fl.info.ConfigSHA256 != "" {
			what = "is not the content trusted for the run's workspace"
		}
		return "", "", &git.Refusal{Kind: git.RefusedUntrustedPRCmd,
			Message: fmt.Sprintf("pr_command cannot run: it comes from %s, which %s; nothing was pushed", path, what),
			Hand: []string{"loopctl trust -C " + shquote.Quote(fl.clone) + "   # after reviewing it; then loopctl land " + fl.short + " --push again",
				"# or push by hand: git -C " + shquote.Quote(fl.clone) + " push origin " + shquote.Quote(fl.run.Branch)}}
	}
	return fromClone, path, nil
}

// runPRCommand runs pr_command in the clone with the variables the
// daemon's push gives it, the body written by the API node, its output
// kept in the land directory.
func (fl *fleetLand) runPRCommand(ctx context.Context, res *api.LandResult, command, source string) (*api.PRCommandResult, string) {
	run := fl.run
	stamp := strconv.FormatInt(time.Now().UnixMilli(), 10)
	out := &api.PRCommandResult{ExitCode: -1, LogPath: filepath.Join(fl.dir, run.ID+"-pr-"+stamp+".log")}
	body, err := fl.c.LocalLand(ctx, fl.ref, api.LocalLandQuery{Push: true, Verified: res.Verified, TestedCommit: res.TestedCommit, Note: res.Note})
	if err != nil {
		out.Error = "pr_command not run: " + err.Error()
		return out, ""
	}
	bodyPath := filepath.Join(fl.dir, run.ID+"-pr-body.md")
	if err := os.WriteFile(bodyPath, []byte(body.PRBody), 0o600); err != nil {
		out.Error = "pr_command not run: " + err.Error()
		return out, ""
	}
	return prcommand.Run(ctx, prcommand.Spec{Command: command, Source: source, Dir: fl.clone, Env: fleetEnviron(),
		RunID: run.ID, Workspace: fl.clone, Branch: run.Branch, BaseBranch: run.BaseBranch, Title: body.PRTitle,
		BodyFile: bodyPath, Push: res.Push, LogPath: out.LogPath, Progress: fl.progress})
}
