package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// fakeGH stands in for GitHub's gh: it records its arguments (one a line),
// the body file it was given, its working directory and the LOOP_*
// variables, waits while $GH_HOLD exists (touching $GH_HOLD.waiting),
// and prints a pull request's URL, as gh pr create does.
const fakeGH = `#!/bin/sh
out="$GH_LOG/call-$(date +%s%N)"
mkdir -p "$out"
printf '%s\n' "$@" > "$out/argv"
pwd > "$out/pwd"
env | grep '^LOOP_' | sort > "$out/env"
while [ $# -gt 0 ]; do
  if [ "$1" = --body-file ]; then cp "$2" "$out/body.md"; fi
  shift
done
if [ -n "${GH_HOLD:-}" ] && [ -f "$GH_HOLD" ]; then
  touch "$GH_HOLD.waiting"
  while [ -f "$GH_HOLD" ]; do sleep 0.05; done
fi
echo "Creating pull request for loop branch into main in acme/project"
echo
echo "https://github.com/acme/project/pull/42"
`

// ghRecipe is the docs' GitHub recipe, word for word.
const ghRecipe = `pr_command=gh pr create --head "$LOOP_BRANCH" --base "$LOOP_BASE_BRANCH" --title "$LOOP_TITLE" --body-file "$LOOP_BODY_FILE"`

// pushEnv is an env whose daemon finds the fake gh first on its PATH,
// with a bare repository as the checkout's origin; it returns the
// remote's path and the directory gh records its calls in.
func pushEnv(t *testing.T) (e *env, remote, ghLog string) {
	t.Helper()
	e = newEnv(t)
	bin := filepath.Join(e.home, "bin")
	ghLog = filepath.Join(e.home, "gh-calls")
	for _, d := range []string{bin, ghLog} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "gh"), []byte(fakeGH), 0o755); err != nil {
		t.Fatal(err)
	}
	e.path = bin + string(os.PathListSeparator) + os.Getenv("PATH")
	e.daemonEnv = append(e.daemonEnv, "GH_LOG="+ghLog, "GH_HOLD="+filepath.Join(e.home, "gh-hold"))
	remote = filepath.Join(e.home, "remote.git")
	return e, remote, ghLog
}

// ghCalls are the fake gh's recorded calls, oldest first: each a map of
// argv, pwd, env and body.md to their content.
func ghCalls(t *testing.T, dir string) []map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var calls []map[string]string
	for _, ent := range entries {
		call := map[string]string{}
		for _, f := range []string{"argv", "pwd", "env", "body.md"} {
			b, _ := os.ReadFile(filepath.Join(dir, ent.Name(), f))
			call[f] = string(b)
		}
		calls = append(calls, call)
	}
	return calls
}

func (e *env) landedPayloads(id string) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	for _, ev := range e.events(id) {
		if ev.Type == "RUN_LANDED" {
			var p map[string]any
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				e.t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// gitLocks lists the lock files in a git directory (none may be left).
func gitLocks(t *testing.T, gitDir string) []string {
	t.Helper()
	var locks []string
	_ = filepath.WalkDir(gitDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			locks = append(locks, p)
		}
		return nil
	})
	return locks
}

// A worktree run completes; `loopctl land --push` puts its branch on the
// bare remote at the run's commit without touching the user's checkout,
// then runs the GitHub recipe's gh, which gets the branch, the base, the
// goal's first line as the title and a body file with the goal,
// iterations, tests and cost; the URL it prints is in RUN_LANDED and in
// land's output. Then someone else moves the remote branch: the next push
// is refused, and their commit stays.
func TestLandPushToABareRemoteWithTheGitHubRecipe(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "workspaces.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "\n"+ghRecipe+"\n") {
		t.Fatalf("docs/workspaces.md does not give the recipe tested here:\n%s", ghRecipe)
	}
	e, remote, ghLog := pushEnv(t)
	e.startDaemon()
	e.landRepo(ghRecipe)
	e.gitIn(e.home, "init", "-q", "--bare", remote)
	e.git("remote", "add", "origin", remote)
	id := e.start("Add retries to the HTTP client\n\nRetry 5xx answers with back-off.")
	if code := e.wait(id); code != 0 {
		t.Fatalf("run ended with %d", code)
	}
	r := e.status(id)
	tip := e.git("rev-parse", r.Branch)
	before := e.checkoutState()

	started := time.Now()
	res := e.loopctl("land", id, "--push")
	if res.code != 0 {
		t.Fatalf("land --push: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	t.Logf("land --push with pr_command took %s", time.Since(started).Round(time.Millisecond))
	for _, want := range []string{"pushed " + r.Branch + " to origin (" + remote + "): " + tip[:12] + " (a new branch)",
		"verified: the run's last verification of " + tip[:12] + " stands", "pull request: https://github.com/acme/project/pull/42"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("land --push output lacks %q:\n%s", want, res.stdout)
		}
	}
	if !strings.Contains(res.stderr, "pr_command: https://github.com/acme/project/pull/42") {
		t.Errorf("progress lacks gh's output:\n%s", res.stderr)
	}
	if got := e.gitIn(remote, "rev-parse", "refs/heads/"+r.Branch); got != tip {
		t.Errorf("the remote's %s is at %s, want the run's %s", r.Branch, got, tip)
	}
	if after := e.checkoutState(); after != before {
		t.Error("land --push changed the user's checkout")
	}
	if locks := gitLocks(t, filepath.Join(e.ws, ".git")); len(locks) > 0 {
		t.Errorf("git locks left behind: %v", locks)
	}

	calls := ghCalls(t, ghLog)
	if len(calls) != 1 {
		t.Fatalf("gh ran %d times", len(calls))
	}
	argv := strings.Split(strings.TrimSuffix(calls[0]["argv"], "\n"), "\n")
	want := []string{"pr", "create", "--head", r.Branch, "--base", "main", "--title", "Add retries to the HTTP client", "--body-file"}
	if len(argv) != len(want)+1 || strings.Join(argv[:len(want)], "\x00") != strings.Join(want, "\x00") {
		t.Errorf("gh got %q, want %q and the body file", argv, want)
	}
	if strings.TrimSpace(calls[0]["pwd"]) != e.ws {
		t.Errorf("gh ran in %q, want the workspace %s", calls[0]["pwd"], e.ws)
	}
	body := calls[0]["body.md"]
	for _, want := range []string{"Add retries to the HTTP client\n\nRetry 5xx answers with back-off.", "| iterations | 1 |",
		"| verified | yes, `verify_command` passed on `" + tip[:12] + "` |", "| cost | $", "| tests |", id} {
		if !strings.Contains(body, want) {
			t.Errorf("the body lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(calls[0]["env"], "MARK=") || !strings.Contains(calls[0]["env"], "LOOP_REMOTE=origin") {
		t.Errorf("gh's LOOP_* environment:\n%s", calls[0]["env"])
	}

	evs := e.landedPayloads(id)
	if len(evs) != 1 || evs[0]["mode"] != "push" || evs[0]["pr_url"] != "https://github.com/acme/project/pull/42" || evs[0]["commit"] != tip {
		t.Fatalf("RUN_LANDED %v", evs)
	}
	if p, _ := evs[0]["push"].(map[string]any); p["url"] != remote || p["branch"] != r.Branch || p["commit"] != tip {
		t.Errorf("RUN_LANDED push %v", evs[0]["push"])
	}
	if got := e.status(id).LandedCommit; got != "" {
		t.Errorf("a push recorded landed_commit %s", got)
	}

	// Someone else pushes to the branch: the next push is refused, and
	// their commit stays.
	other := filepath.Join(e.home, "other")
	e.gitIn(e.home, "clone", "-q", "-b", r.Branch, remote, other)
	e.gitIn(other, "commit", "-q", "--allow-empty", "-m", "their work")
	theirs := e.gitIn(other, "rev-parse", "HEAD")
	e.gitIn(other, "push", "-q", "origin", r.Branch)
	res = e.loopctl("land", id, "--push")
	if res.code != 64 || !strings.Contains(res.stderr, "push refused (remote_moved): "+r.Branch+" on origin") ||
		!strings.Contains(res.stderr, "should be at "+tip[:12]) || !strings.Contains(res.stderr, "loopctl: push refused: nothing was pushed") {
		t.Errorf("a moved remote branch: exit %d\n%s", res.code, res.stderr)
	}
	if got := e.gitIn(remote, "rev-parse", "refs/heads/"+r.Branch); got != theirs {
		t.Errorf("their commit was overwritten: the remote branch is at %s", got)
	}
	if n := len(ghCalls(t, ghLog)); n != 1 {
		t.Errorf("gh ran again after a refused push (%d calls)", n)
	}
	if n := len(e.landedPayloads(id)); n != 1 {
		t.Errorf("a refused push was recorded (%d RUN_LANDED)", n)
	}
}

// A pr_command from the workspace's .loop/config that the user has not
// trusted refuses the push, and nothing reaches the remote; once trusted,
// it runs. A push to a path given on the command line works without a
// remote.
func TestLandPushUntrustedPRCommandIsRefused(t *testing.T) {
	e, remote, ghLog := pushEnv(t)
	e.startDaemon()
	e.landRepo()
	e.gitIn(e.home, "init", "-q", "--bare", remote)
	r := e.finishedRun()
	id := r.ID
	// The repository now names a pr_command (a pull of someone's change).
	cfg, err := os.ReadFile(filepath.Join(e.ws, ".loop", "config"))
	if err != nil {
		t.Fatal(err)
	}
	e.writeFile(".loop/config", string(cfg)+ghRecipe+"\n", 0o644)
	res := e.loopctl("land", id, "--push", remote)
	if res.code != 64 || !strings.Contains(res.stderr, "push refused (untrusted_pr_command): pr_command cannot run") ||
		!strings.Contains(res.stderr, "nothing was pushed") || !strings.Contains(res.stderr, "loopctl trust") {
		t.Errorf("an untrusted pr_command: exit %d\n%s", res.code, res.stderr)
	}
	if refs := e.gitIn(remote, "for-each-ref"); refs != "" {
		t.Errorf("the remote got %s", refs)
	}
	if n := len(ghCalls(t, ghLog)); n != 0 {
		t.Errorf("the untrusted gh ran %d times", n)
	}
	// No remote named origin, no path: refused, naming what to do.
	e.trust()
	res = e.loopctl("land", id, "--push")
	if res.code != 64 || !strings.Contains(res.stderr, "push refused (no_remote)") || !strings.Contains(res.stderr, "loopctl land RUN --push REMOTE") {
		t.Errorf("no remote: exit %d\n%s", res.code, res.stderr)
	}
	// Trusted, to a path relative to where loopctl runs.
	res = e.loopctlAt(e.home, nil, "land", id, "--push", "./remote.git", "--json")
	if res.code != 0 {
		t.Fatalf("land --push ./remote.git: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	var out struct{ Result api.LandResult }
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Result.Push == nil || out.Result.Push.URL != remote || out.Result.PRURL != "https://github.com/acme/project/pull/42" {
		t.Errorf("result %+v", out.Result)
	}
	if got := e.gitIn(remote, "rev-parse", "refs/heads/"+r.Branch); got != e.git("rev-parse", r.Branch) {
		t.Errorf("the remote's branch is at %s", got)
	}
}

// kill -9 of the daemon after the push, while pr_command runs: the next
// daemon asks the remote, finds the branch at the run's commit and
// records the push (once, saying pr_command's outcome is unknown); the
// next land --push pushes nothing new (the remote is where it was left)
// and runs pr_command. No git lock is left behind.
func TestLandPushKilledAfterThePushIsRecordedOnce(t *testing.T) {
	e, remote, ghLog := pushEnv(t)
	e.startDaemon()
	e.landRepo(ghRecipe)
	e.gitIn(e.home, "init", "-q", "--bare", remote)
	e.git("remote", "add", "origin", remote)
	r := e.finishedRun()
	id := r.ID
	tip := e.git("rev-parse", r.Branch)
	e.trust()
	hold := filepath.Join(e.home, "gh-hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	land := exec.Command(filepath.Join(binDir, "loopctl"), "land", id, "--push")
	land.Dir, land.Env = e.ws, e.environ()
	if err := land.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gh to start after the push", 30*time.Second, func() bool {
		_, err := os.Stat(hold + ".waiting")
		return err == nil
	})
	e.killDaemon()
	_ = land.Wait()
	if got := e.gitIn(remote, "rev-parse", "refs/heads/"+r.Branch); got != tip {
		t.Fatalf("the push had not reached the remote: %s", got)
	}
	os.Remove(hold) // the orphaned gh ends
	e.startDaemon()
	evs := e.landedPayloads(id)
	if len(evs) != 1 || evs[0]["recovered"] != true || evs[0]["commit"] != tip {
		t.Fatalf("after the restart, RUN_LANDED %v", evs)
	}
	if pr, _ := evs[0]["pr_command"].(map[string]any); pr == nil || !strings.Contains(pr["error"].(string), "unknown") {
		t.Errorf("pr_command's outcome: %v", evs[0]["pr_command"])
	}
	res := e.loopctl("land", id, "--push")
	if res.code != 0 || !strings.Contains(res.stdout, "(it was there already)") || !strings.Contains(res.stdout, "pull request: https://github.com/acme/project/pull/42") {
		t.Errorf("land --push after the restart: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if got := e.gitIn(remote, "rev-parse", "refs/heads/"+r.Branch); got != tip {
		t.Errorf("the remote branch moved to %s", got)
	}
	if n := len(e.landedPayloads(id)); n != 2 {
		t.Errorf("%d RUN_LANDED, want the recovered one and the new one", n)
	}
	if n := len(ghCalls(t, ghLog)); n != 2 {
		t.Errorf("gh ran %d times, want 2", n)
	}
	for _, dir := range []string{filepath.Join(e.ws, ".git"), remote} {
		if locks := gitLocks(t, dir); len(locks) > 0 {
			t.Errorf("git locks left behind: %v", locks)
		}
	}
	if _, err := os.Stat(filepath.Join(e.home, "runs", id, "push.json")); !os.IsNotExist(err) {
		t.Errorf("the push intent stays: %v", err)
	}
}
