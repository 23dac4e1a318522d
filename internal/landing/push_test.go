package landing

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/storage"
)

// bareRemote makes a bare repository next to the checkout and, when name
// is given, adds it as that remote of the checkout.
func (w *world) bareRemote(name string) string {
	w.t.Helper()
	dir := filepath.Join(filepath.Dir(w.checkout), "remote-"+name+".git")
	w.git(filepath.Dir(w.checkout), "init", "-q", "--bare", dir)
	if name != "" {
		w.git(w.checkout, "remote", "add", name, dir)
	}
	return dir
}

// remoteBranch is where branch is on the bare repository remote ("" when
// it has no such branch).
func (w *world) remoteBranch(remote, branch string) string {
	w.t.Helper()
	out := w.git(remote, "for-each-ref", "--format=%(objectname)", "refs/heads/"+branch)
	return strings.TrimSpace(out)
}

func (w *world) pushPayloads(id string) []map[string]any {
	w.t.Helper()
	var out []map[string]any
	for _, p := range w.landedEvents(id) {
		var m map[string]any
		if err := json.Unmarshal([]byte(p), &m); err != nil {
			w.t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func refusalKind(t *testing.T, err error) git.RefusalKind {
	t.Helper()
	ref, ok := errors.AsType[*Refusal](err)
	if !ok {
		t.Fatalf("want a refusal, got %v", err)
	}
	return ref.Kind
}

// A verified run's branch is pushed to origin at the run's last commit;
// the user's checkout (HEAD, every ref, status) is as it was, and no
// remote-tracking ref is written; RUN_LANDED records the push, and the
// run has not landed. A second push with nothing new is a no-op that
// passes its lease.
func TestPushToABareRemote(t *testing.T) {
	w := newWorld(t)
	w.verifier.commands = []string{"true"}
	remote := w.bareRemote("origin")
	run := w.worktreeRun("r1", api.StepSucceeded, false, "done.txt")
	tip := w.git(run.Worktree, "rev-parse", "HEAD")
	before := w.checkoutState()
	var progress progressLog
	res, err := w.lander.Push(t.Context(), run, PushOptions{Progress: progress.add})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != ModePush || res.Push == nil || res.Push.Commit != tip || res.Push.Remote != "origin" || res.Push.URL != remote ||
		res.Push.Previous != "" || !res.Verified || res.TestedCommit != tip {
		t.Errorf("result %+v push %+v", res, res.Push)
	}
	if got := w.remoteBranch(remote, "loop/r1"); got != tip {
		t.Errorf("the remote's loop/r1 is at %q, want %s", got, tip)
	}
	if after := w.checkoutState(); after != before {
		t.Errorf("the checkout changed:\nbefore %s\nafter  %s", before, after)
	}
	if got := w.run("r1").LandedCommit; got != "" {
		t.Errorf("a push set landed_commit %q", got)
	}
	evs := w.pushPayloads("r1")
	if len(evs) != 1 || evs[0]["mode"] != "push" || evs[0]["commit"] != tip {
		t.Fatalf("RUN_LANDED %v", evs)
	}
	if p, _ := evs[0]["push"].(map[string]any); p["url"] != remote || p["branch"] != "loop/r1" || p["commit"] != tip || p["remote"] != "origin" {
		t.Errorf("RUN_LANDED push %v", evs[0]["push"])
	}
	if _, err := os.Stat(filepath.Join(w.home, "runs", "r1", pushIntentFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the push intent stays: %v", err)
	}
	if !strings.Contains(progress.String(), "pushed loop/r1 to origin ("+remote+") at "+shortCommit(tip)) {
		t.Errorf("progress:\n%s", progress.String())
	}
	res, err = w.lander.Push(t.Context(), w.run("r1"), PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Push.Previous != tip || res.Push.Commit != tip || len(w.landedEvents("r1")) != 2 {
		t.Errorf("the second push: %+v, %d events", res.Push, len(w.landedEvents("r1")))
	}
}

// The lease: a branch on the remote that loopd did not leave there —
// made by someone else before the first push, or moved after it — is
// never overwritten; the refusal says so and nothing is pushed.
func TestPushLeaseRefusesAMovedRemoteBranch(t *testing.T) {
	w := newWorld(t)
	remote := w.bareRemote("origin")
	run := w.worktreeRun("r1", "", false, "done.txt")
	// Someone else's branch of the same name is already there.
	w.git(w.checkout, "push", "-q", remote, "main:refs/heads/loop/r1")
	main := w.git(w.checkout, "rev-parse", "main")
	_, err := w.lander.Push(t.Context(), run, PushOptions{NoVerify: true})
	if k := refusalKind(t, err); k != git.RefusedRemoteMoved {
		t.Fatalf("kind %s: %v", k, err)
	}
	if !strings.Contains(err.Error(), "it should not exist") || !strings.Contains(err.Error(), "nothing was pushed") {
		t.Errorf("message: %v", err)
	}
	if got := w.remoteBranch(remote, "loop/r1"); got != main {
		t.Errorf("the remote branch moved to %s", got)
	}
	if n := len(w.landedEvents("r1")); n != 0 {
		t.Errorf("%d RUN_LANDED events", n)
	}

	// Pushed by loopd, then moved by someone else: the next push is refused.
	w.git(w.checkout, "push", "-q", "--force", remote, ":refs/heads/loop/r1")
	if _, err := w.lander.Push(t.Context(), run, PushOptions{NoVerify: true}); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(filepath.Dir(w.checkout), "other")
	w.git(filepath.Dir(w.checkout), "clone", "-q", "-b", "loop/r1", remote, other)
	w.write(other, "theirs.txt", "their work\n")
	theirs := w.commitAll(other, "their work")
	w.git(other, "push", "-q", "origin", "loop/r1")
	w.write(run.Worktree, "more.txt", "more from the run\n")
	w.commitAll(run.Worktree, "more")
	_, err = w.lander.Push(t.Context(), w.run("r1"), PushOptions{NoVerify: true})
	if k := refusalKind(t, err); k != git.RefusedRemoteMoved {
		t.Fatalf("kind %s: %v", k, err)
	}
	if got := w.remoteBranch(remote, "loop/r1"); got != theirs {
		t.Errorf("their commit was overwritten: the remote branch is at %s, want %s", got, theirs)
	}
}

// A branch already on the remote at the very commit (pushed by hand) is
// no one's work lost: the push goes through as a no-op.
func TestPushOfABranchAlreadyThere(t *testing.T) {
	w := newWorld(t)
	remote := w.bareRemote("origin")
	run := w.worktreeRun("r1", "", false, "done.txt")
	w.git(w.checkout, "push", "-q", remote, "loop/r1")
	tip := w.git(w.checkout, "rev-parse", "loop/r1")
	res, err := w.lander.Push(t.Context(), run, PushOptions{NoVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Push.Previous != tip || res.Push.Commit != tip {
		t.Errorf("push %+v", res.Push)
	}
}

// Where a push goes: the base branch's upstream remote, else origin; a
// remote named, or a URL or absolute path given; refusals name what is
// missing and push nothing.
func TestPushRemoteResolution(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", "", false, "done.txt")
	_, err := w.lander.Push(t.Context(), run, PushOptions{NoVerify: true})
	if k := refusalKind(t, err); k != git.RefusedNoRemote || !strings.Contains(err.Error(), "no remote named origin") {
		t.Fatalf("no remote at all: %s %v", k, err)
	}
	_, err = w.lander.Push(t.Context(), run, PushOptions{NoVerify: true, Remote: "upstream"})
	if k := refusalKind(t, err); k != git.RefusedNoRemote || !strings.Contains(err.Error(), `no remote named "upstream"`) {
		t.Errorf("an unknown remote: %s %v", k, err)
	}
	for _, bad := range []string{"../elsewhere.git", "--receive-pack=touch /tmp/x"} {
		_, err = w.lander.Push(t.Context(), run, PushOptions{NoVerify: true, Remote: bad})
		if k := refusalKind(t, err); k != git.RefusedNoRemote {
			t.Errorf("remote %q: %s %v", bad, k, err)
		}
	}
	origin := w.bareRemote("origin")
	up := w.bareRemote("up")
	w.git(w.checkout, "config", "branch.main.remote", "up")
	if _, err := w.lander.Push(t.Context(), run, PushOptions{NoVerify: true}); err != nil {
		t.Fatal(err)
	}
	if w.remoteBranch(up, "loop/r1") == "" || w.remoteBranch(origin, "loop/r1") != "" {
		t.Error("the push did not go to the base branch's upstream remote")
	}
	bare := w.bareRemote("")
	res, err := w.lander.Push(t.Context(), run, PushOptions{NoVerify: true, Remote: bare})
	if err != nil {
		t.Fatal(err)
	}
	if res.Push.Remote != "" || res.Push.URL != bare || w.remoteBranch(bare, "loop/r1") == "" {
		t.Errorf("a path: %+v", res.Push)
	}
	res, err = w.lander.Push(t.Context(), run, PushOptions{NoVerify: true, Remote: "file://" + origin})
	if err != nil || w.remoteBranch(origin, "loop/r1") == "" {
		t.Errorf("a file:// URL: %+v %v", res, err)
	}
}

// The agent's worktree shares the repository's hooks: a pre-push hook
// (which the agent could have written) does not run with the user's
// push credentials.
func TestPushRunsNoPrePushHook(t *testing.T) {
	w := newWorld(t)
	remote := w.bareRemote("origin")
	run := w.worktreeRun("r1", "", false, "done.txt")
	mark := filepath.Join(w.home, "hook-ran")
	w.write(filepath.Join(w.checkout, ".git", "hooks"), "pre-push", "#!/bin/sh\ntouch "+mark+"\n")
	if err := os.Chmod(filepath.Join(w.checkout, ".git", "hooks", "pre-push"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := w.lander.Push(t.Context(), run, PushOptions{NoVerify: true}); err != nil {
		t.Fatal(err)
	}
	if w.remoteBranch(remote, "loop/r1") == "" {
		t.Fatal("not pushed")
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("the repository's pre-push hook ran in the daemon")
	}
}

// fakePRs is a PRCommander with a fixed answer.
type fakePRs struct {
	cmd PRCommand
	err error
}

func (f fakePRs) PRCommand(context.Context, storage.Run) (PRCommand, error) { return f.cmd, f.err }

// pr_command runs after the push in the workspace with LOOP_BRANCH,
// LOOP_BASE_BRANCH, LOOP_TITLE and LOOP_BODY_FILE; the first URL it
// prints is the result's and RUN_LANDED's pr_url.
func TestPushRunsPRCommand(t *testing.T) {
	w := newWorld(t)
	w.verifier.commands = []string{"true"}
	w.bareRemote("origin")
	got := filepath.Join(w.home, "pr-got")
	script := `pwd > "` + got + `"; printf '%s\n' "$LOOP_BRANCH" "$LOOP_BASE_BRANCH" "$LOOP_TITLE" >> "` + got + `"; ` +
		`cat "$LOOP_BODY_FILE" >> "` + got + `"; echo "Creating pull request"; echo "https://github.com/o/r/pull/7"; echo "https://example.com/later"`
	w.lander.prs = fakePRs{cmd: PRCommand{Command: script, Source: "/cfg"}}
	run := w.worktreeRun("r1", api.StepSucceeded, false, "done.txt")
	var progress progressLog
	res, err := w.lander.Push(t.Context(), run, PushOptions{Progress: progress.add})
	if err != nil {
		t.Fatal(err)
	}
	if res.PRURL != "https://github.com/o/r/pull/7" || res.PRCommand == nil || res.PRCommand.ExitCode != 0 || res.PRCommand.LogPath == "" {
		t.Fatalf("pr: %q %+v", res.PRURL, res.PRCommand)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if lines[0] != w.checkout || lines[1] != "loop/r1" || lines[2] != "main" || lines[3] != "make the change" {
		t.Errorf("pr_command got dir, branch, base, title %q", lines[:4])
	}
	for _, want := range []string{"make the change\nin detail", "| iterations | 1 |", "| verified | yes", "| cost | $0.00"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the body lacks %q:\n%s", want, b)
		}
	}
	evs := w.pushPayloads("r1")
	if len(evs) != 1 || evs[0]["pr_url"] != "https://github.com/o/r/pull/7" {
		t.Errorf("RUN_LANDED %v", evs)
	}
	if !strings.Contains(progress.String(), "pr_command: https://github.com/o/r/pull/7") {
		t.Errorf("progress:\n%s", progress.String())
	}

	// A pr_command that fails: the push stands and is recorded, with how
	// the command went.
	w.lander.prs = fakePRs{cmd: PRCommand{Command: "echo 'no token'; exit 4", Source: "/cfg"}}
	res, err = w.lander.Push(t.Context(), w.run("r1"), PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.PRCommand.ExitCode != 4 || res.PRURL != "" || !strings.Contains(res.PRCommand.Error, "exited 4") {
		t.Errorf("a failing pr_command: %+v", res.PRCommand)
	}
	if evs := w.pushPayloads("r1"); len(evs) != 2 {
		t.Errorf("%d RUN_LANDED", len(evs))
	}
}

// A run whose last verification failed is not pushed unless told.
func TestPushOfAnUntestedRunIsRefused(t *testing.T) {
	w := newWorld(t)
	w.verifier.commands = []string{"true"}
	remote := w.bareRemote("origin")
	run := w.worktreeRun("r1", api.StepFailed, false, "done.txt")
	_, err := w.lander.Push(t.Context(), run, PushOptions{})
	if k := refusalKind(t, err); k != git.RefusedUntested || !strings.Contains(err.Error(), "loopctl land r1 --push --no-verify") {
		t.Fatalf("%s %v", k, err)
	}
	if w.remoteBranch(remote, "loop/r1") != "" {
		t.Error("an untested run was pushed")
	}
	res, err := w.lander.Push(t.Context(), run, PushOptions{NoVerify: true})
	if err != nil || res.Verified || res.Note != "not verified: --no-verify" || w.remoteBranch(remote, "loop/r1") == "" {
		t.Errorf("--no-verify: %+v %v", res, err)
	}
}

// An untrusted pr_command refuses the push before anything is pushed.
func TestPushUntrustedPRCommandPushesNothing(t *testing.T) {
	w := newWorld(t)
	remote := w.bareRemote("origin")
	w.lander.prs = fakePRs{err: &UntrustedCommandError{Err: errors.New("pr_command comes from .loop/config, which you have not trusted")}}
	run := w.worktreeRun("r1", "", false, "done.txt")
	_, err := w.lander.Push(t.Context(), run, PushOptions{NoVerify: true})
	if k := refusalKind(t, err); k != git.RefusedUntrustedPRCmd || !strings.Contains(err.Error(), "nothing was pushed") {
		t.Fatalf("%s %v", k, err)
	}
	if w.remoteBranch(remote, "loop/r1") != "" || len(w.landedEvents("r1")) != 0 {
		t.Error("something was pushed or recorded")
	}
}

// When the base branch moved, the combination is verified before the
// push (and a failing one pushes nothing); what is pushed is the run's
// own branch, its tip, with tested_commit the combination.
func TestPushVerifiesTheCombinationWhenTheBaseMoved(t *testing.T) {
	w := newWorld(t)
	remote := w.bareRemote("origin")
	run := w.worktreeRun("r1", api.StepSucceeded, false, "done.txt")
	tip := w.git(run.Worktree, "rev-parse", "HEAD")
	w.write(w.checkout, "user.txt", "the user's\n")
	w.commitAll(w.checkout, "user's work")
	w.verifier.commands = []string{"test ! -f user.txt"} // the combination fails
	_, err := w.lander.Push(t.Context(), run, PushOptions{})
	if k := refusalKind(t, err); k != git.RefusedVerifyFailed {
		t.Fatalf("%s %v", k, err)
	}
	if w.remoteBranch(remote, "loop/r1") != "" {
		t.Error("a failing combination was pushed")
	}
	w.verifier.commands = []string{"test -f user.txt && test -f done.txt"}
	res, err := w.lander.Push(t.Context(), w.run("r1"), PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.BaseMoved || !res.Verified || res.TestedCommit == tip || res.Push.Commit != tip || w.remoteBranch(remote, "loop/r1") != tip {
		t.Errorf("result %+v push %+v", res, res.Push)
	}
	if w.git(run.Worktree, "symbolic-ref", "--short", "HEAD") != "loop/r1" {
		t.Error("the worktree was not put back on its branch")
	}
}

// A push a daemon that died left unrecorded is settled from the remote:
// recorded once when the remote has the commit (never pushed again
// blindly), dropped when it does not; a later push leases on it.
func TestPushCutShortIsSettledFromTheRemote(t *testing.T) {
	w := newWorld(t)
	remote := w.bareRemote("origin")
	run := w.worktreeRun("r1", "", false, "done.txt")
	tip := w.git(run.Worktree, "rev-parse", "HEAD")
	writeIntent := func(id, stage string, commit string) {
		in := pushIntent{Checkout: w.checkout, RemoteName: "origin", URL: remote, Branch: "loop/" + id, Commit: commit, Stage: stage, PRCommand: true,
			Payload: map[string]any{"run_id": id, "mode": ModePush, "commit": commit,
				"push": &api.PushResult{Remote: "origin", URL: remote, Branch: "loop/" + id, Commit: commit}}}
		if err := writeJSONFile(filepath.Join(w.home, "runs", id, pushIntentFile), in); err != nil {
			t.Fatal(err)
		}
	}
	// The daemon died after git pushed, before it recorded.
	w.git(w.checkout, "push", "-q", remote, "loop/r1")
	writeIntent("r1", stagePush, tip)
	// And another that died before git pushed.
	run2 := w.worktreeRun("r2", "", false, "two.txt")
	writeIntent("r2", stagePush, w.git(run2.Worktree, "rev-parse", "HEAD"))

	w.lander.Recover(t.Context())
	evs := w.pushPayloads("r1")
	if len(evs) != 1 || evs[0]["recovered"] != true || evs[0]["commit"] != tip {
		t.Fatalf("r1's RUN_LANDED %v", evs)
	}
	if pr, _ := evs[0]["pr_command"].(map[string]any); !strings.Contains(pr["error"].(string), "land --push again runs it") {
		t.Errorf("pr_command note %v", evs[0]["pr_command"])
	}
	if n := len(w.landedEvents("r2")); n != 0 || w.remoteBranch(remote, "loop/r2") != "" {
		t.Errorf("r2 never pushed, yet %d events", n)
	}
	for _, id := range []string{"r1", "r2"} {
		if _, err := os.Stat(filepath.Join(w.home, "runs", id, pushIntentFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s's intent stays: %v", id, err)
		}
	}
	// The recorded push is what the next one leases on.
	res, err := w.lander.Push(t.Context(), w.run("r1"), PushOptions{NoVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Push.Previous != tip {
		t.Errorf("push %+v", res.Push)
	}

	// A push's own call settles an intent the start could not.
	w.git(w.checkout, "push", "-q", remote, "loop/r2")
	writeIntent("r2", stagePR, w.git(run2.Worktree, "rev-parse", "HEAD"))
	if _, err := w.lander.Push(t.Context(), w.run("r2"), PushOptions{NoVerify: true}); err != nil {
		t.Fatal(err)
	}
	evs = w.pushPayloads("r2")
	if len(evs) != 2 || evs[0]["recovered"] != true || evs[1]["recovered"] != nil {
		t.Errorf("r2's RUN_LANDED %v", evs)
	}
	if pr, _ := evs[0]["pr_command"].(map[string]any); !strings.Contains(pr["error"].(string), "unknown") {
		t.Errorf("pr_command note %v", evs[0]["pr_command"])
	}
}

// A push cut short (the request ended while git pushed) keeps its
// intent, since the remote may have taken it; the next push settles it
// from the remote and goes on, and the branch ends at the run's commit,
// recorded once as pushed by this land.
func TestPushCutShortKeepsItsIntent(t *testing.T) {
	w := newWorld(t)
	remote := w.bareRemote("origin")
	run := w.worktreeRun("r1", "", false, "done.txt")
	tip := w.git(run.Worktree, "rev-parse", "HEAD")
	hold := filepath.Join(w.home, "hold")
	w.write(w.home, "hold", "")
	// The remote's own hook holds the push until the test lets it go.
	w.write(filepath.Join(remote, "hooks"), "pre-receive", "#!/bin/sh\ntouch "+hold+".waiting\nwhile [ -f "+hold+" ]; do sleep 0.05; done\n")
	if err := os.Chmod(filepath.Join(remote, "hooks", "pre-receive"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := w.lander.Push(ctx, run, PushOptions{NoVerify: true})
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(hold + ".waiting"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the push never reached the remote's hook")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	err := <-done
	if _, refused := errors.AsType[*Refusal](err); refused || err == nil || !strings.Contains(err.Error(), "may or may not") {
		t.Fatalf("a push cut short: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.home, "runs", "r1", pushIntentFile)); err != nil {
		t.Fatalf("the intent of a push cut short is gone: %v", err)
	}
	if w.lander.Landing("r1") {
		t.Error("the run is still held")
	}
	os.Remove(hold)
	os.Remove(filepath.Join(remote, "hooks", "pre-receive"))
	res, err := w.lander.Push(t.Context(), w.run("r1"), PushOptions{NoVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Push.Commit != tip || w.remoteBranch(remote, "loop/r1") != tip {
		t.Errorf("push %+v, remote at %s", res.Push, w.remoteBranch(remote, "loop/r1"))
	}
	evs := w.pushPayloads("r1")
	fresh := 0
	for _, ev := range evs {
		if ev["recovered"] == nil {
			fresh++
		}
	}
	if fresh != 1 || len(evs) > 2 {
		t.Errorf("RUN_LANDED %v", evs)
	}
	if _, err := os.Stat(filepath.Join(w.home, "runs", "r1", pushIntentFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the intent stays: %v", err)
	}
}

// An unreachable remote leaves the intent for the next try, and the
// start is not held longer than the check's bound.
func TestPushIntentOfAnUnreachableRemoteStays(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", "", false, "done.txt")
	gone := filepath.Join(w.home, "no-such-remote.git")
	in := pushIntent{Checkout: w.checkout, URL: gone, Branch: run.Branch, Commit: "0123456789012345678901234567890123456789", Stage: stagePush}
	path := filepath.Join(w.home, "runs", "r1", pushIntentFile)
	if err := writeJSONFile(path, in); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	w.lander.Recover(t.Context())
	if time.Since(start) > pushCheckTimeout+5*time.Second {
		t.Errorf("recovery took %s", time.Since(start))
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the intent was dropped: %v", err)
	}
	if n := len(w.landedEvents("r1")); n != 0 {
		t.Errorf("%d events", n)
	}
}

// The body lists a backlog's tasks; the title is the goal's first line.
func TestPRBodyMarkdown(t *testing.T) {
	two, zero := 2, 0
	b := PRBody{RunID: "abcdef1234", Goal: "# Add retries\n\nto the HTTP client", Branch: "loop/abcdef12", BaseBranch: "main",
		Iterations: 3, Tests: &PRTests{Passed: &two, Failed: &zero}, Verified: true, TestedCommit: "0123456789abcdef", CostUSD: 1.234, Tokens: 5000,
		Tasks: []PRTask{{ID: "t1", Title: "Parse", State: "done", RunID: "run1", Commit: "feedbeef00", CostUSD: 0.5, Iterations: 2},
			{ID: "t2", Title: "Retry", State: "blocked", Why: "verify_failed"}}}
	if got := b.Title(); got != "Add retries" {
		t.Errorf("title %q", got)
	}
	md := b.Markdown()
	for _, want := range []string{"# Add retries\n\nto the HTTP client", "| iterations | 3 |", "| tests | 2 passed, 0 failed, ? skipped (last verification) |",
		"`verify_command` passed on `0123456789ab`", "| cost | $1.23, 5000 tokens |", "## Tasks",
		"- [x] **t1** Parse — done: landed as `feedbeef00`, 2 iteration(s), $0.50, run `run1`", "- [ ] **t2** Retry — blocked (verify_failed)"} {
		if !strings.Contains(md, want) {
			t.Errorf("the body lacks %q:\n%s", want, md)
		}
	}
	if (PRBody{RunID: "abcdef1234"}).Title() != "loop run abcdef12" || strings.Contains((PRBody{}).Markdown(), "## Tasks") {
		t.Error("an empty body")
	}
}
