package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// landAgent is a fake agent that edits files: iteration n appends "n" to
// work.txt and writes iter-<n>.txt; from iteration DONE_AT on (default 1)
// it ends with the completion promise. It waits for $HOLD in the checkout
// to be removed, when set (touching $HOLD.waiting first), so a test can
// catch the run active.
const landAgent = `#!/bin/sh
n=${LOOP_ITERATION:-1}
if [ -n "${HOLD:-}" ]; then touch "$HOLD.waiting"; while [ -f "$HOLD" ]; do sleep 0.05; done; fi
echo "$n" >> work.txt
echo "iteration $n" > "iter-$n.txt"
echo "edited work.txt and iter-$n.txt"
if [ "$n" -ge "${DONE_AT:-1}" ]; then printf 'done\n<promise>COMPLETE</promise>\n'; fi
`

// check.sh is the project's own test, committed in the repository: it
// records what environment it ran with, waits while $HOLD_LAND exists
// (touching $HOLD_LAND.waiting), and fails when FAIL_IF names a file that
// exists.
const landCheck = `#!/bin/sh
echo "phase=$LOOP_PHASE mark=${MARK:-} dir=$(pwd)" >> "$CHECK_LOG"
if [ -n "${HOLD_LAND:-}" ] && [ -f "$HOLD_LAND" ]; then
  touch "$HOLD_LAND.waiting"
  while [ -f "$HOLD_LAND" ]; do sleep 0.05; done
fi
for f in ${FAIL_IF:-}; do
  if [ -f "$f" ]; then echo "check failed: $f must not exist"; exit 1; fi
done
echo "check passed"
`

// landRepo turns the env's workspace into a git repository on main with
// the project committed, and returns the paths of the check log.
func (e *env) landRepo(extraConfig ...string) (checkLog string) {
	e.t.Helper()
	agent := filepath.Join(e.home, "agent.sh")
	if err := os.WriteFile(agent, []byte(landAgent), 0o755); err != nil {
		e.t.Fatal(err)
	}
	checkLog = filepath.Join(e.home, "check.log")
	e.writeFile("check.sh", landCheck, 0o755)
	e.writeFile("README", "project\n", 0o644)
	e.writeFile(".gitignore", ".env\n", 0o644)
	e.config(append([]string{"agent=command", "agent_command=" + agent, "verify_command=sh check.sh",
		"isolation=worktree", "max_iterations=5"}, extraConfig...)...)
	e.writeFile(".env", "MARK=from-env-file\nCHECK_LOG="+checkLog+"\n", 0o600)
	e.git("init", "-q", "-b", "main")
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "project")
	return checkLog
}

// git runs git in the workspace (the user's checkout).
func (e *env) git(args ...string) string {
	e.t.Helper()
	return e.gitIn(e.ws, args...)
}

func (e *env) gitIn(dir string, args ...string) string {
	e.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = e.environ("GIT_AUTHOR_NAME=user", "GIT_AUTHOR_EMAIL=user@example.com",
		"GIT_COMMITTER_NAME=user", "GIT_COMMITTER_EMAIL=user@example.com", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commitOnMain makes a commit of the user's on main in the checkout.
func (e *env) commitOnMain(files map[string]string) string {
	e.t.Helper()
	for name, content := range files {
		e.writeFile(name, content, 0o644)
	}
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "user's work")
	return e.git("rev-parse", "HEAD")
}

// checkoutState is everything a refused land must leave as it was: HEAD,
// every ref, the stash, the index file's bytes and every file of the
// working tree.
func (e *env) checkoutState() string {
	e.t.Helper()
	var b bytes.Buffer
	head, _ := os.ReadFile(filepath.Join(e.ws, ".git", "HEAD"))
	b.Write(head)
	b.WriteString(e.git("for-each-ref", "--format=%(refname) %(objectname)") + "\n")
	b.WriteString(e.git("stash", "list") + "\n")
	idx, _ := os.ReadFile(filepath.Join(e.ws, ".git", "index"))
	b.Write(idx)
	_ = filepath.WalkDir(e.ws, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, "%s %d\n", p, len(c))
			b.Write(c)
		}
		return nil
	})
	return b.String()
}

// landHeld starts `loopctl land RUN` in the background and returns once
// the land is held at hold (the file <hold>.waiting exists: the hold
// script or hook got there), with the command and its combined output.
func (e *env) landHeld(runID, hold, what string) (*exec.Cmd, *bytes.Buffer) {
	e.t.Helper()
	land := exec.Command(filepath.Join(binDir, "loopctl"), "land", runID)
	land.Dir, land.Env = e.ws, e.environ()
	out := &bytes.Buffer{}
	land.Stdout, land.Stderr = out, out
	if err := land.Start(); err != nil {
		e.t.Fatal(err)
	}
	eventually(e.t, what, 30*time.Second, func() bool {
		_, err := os.Stat(hold + ".waiting")
		return err == nil
	})
	return land, out
}

// finishedRun starts a worktree run and waits for it to complete.
func (e *env) finishedRun(args ...string) api.Run {
	e.t.Helper()
	id := e.start(append([]string{"goal"}, args...)...)
	if code := e.wait(id); code != 0 {
		e.t.Fatalf("run %s ended with exit %d: %+v", id, code, e.status(id))
	}
	r := e.status(id)
	if r.Isolation != "worktree" || r.Branch == "" || r.Worktree == "" || r.BaseBranch != "main" {
		e.t.Fatalf("not a worktree run: %+v", r)
	}
	return r
}

func (e *env) landEvent(id string) map[string]any {
	e.t.Helper()
	for _, ev := range e.events(id) {
		if ev.Type == "RUN_LANDED" {
			var p map[string]any
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				e.t.Fatal(err)
			}
			return p
		}
	}
	return nil
}

func (e *env) landJSON(args ...string) (api.LandResult, api.LandRefusal, int) {
	e.t.Helper()
	r := e.loopctl(append([]string{"land", "--json"}, args...)...)
	var out struct {
		Result  *api.LandResult  `json:"result"`
		Refusal *api.LandRefusal `json:"refusal"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		e.t.Fatalf("land %v: exit %d, %v\nstdout: %s\nstderr: %s", args, r.code, err, r.stdout, r.stderr)
	}
	var res api.LandResult
	var ref api.LandRefusal
	if out.Result != nil {
		res = *out.Result
	}
	if out.Refusal != nil {
		ref = *out.Refusal
	}
	return res, ref, r.code
}

func TestDiffAndLandFastForward(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	checkLog := e.landRepo()
	e.writeFile(".env", "MARK=from-env-file\nCHECK_LOG="+checkLog+"\nDONE_AT=2\n", 0o600)
	base := e.git("rev-parse", "HEAD")
	run := e.finishedRun()

	// One iteration's change, and the whole run's.
	it1 := e.must("diff", run.ID, "--iteration", "1")
	if !strings.Contains(it1, "+++ b/iter-1.txt") || strings.Contains(it1, "iter-2.txt") {
		t.Errorf("diff --iteration 1:\n%s", it1)
	}
	it2 := e.must("diff", run.ID, "--iteration", "2")
	if !strings.Contains(it2, "+++ b/iter-2.txt") || strings.Contains(it2, "iter-1.txt") || !strings.Contains(it2, "+2") {
		t.Errorf("diff --iteration 2:\n%s", it2)
	}
	whole := e.must("diff", run.ID)
	for _, want := range []string{"+++ b/iter-1.txt", "+++ b/iter-2.txt", "+++ b/work.txt"} {
		if !strings.Contains(whole, want) {
			t.Errorf("whole diff lacks %q:\n%s", want, whole)
		}
	}
	if st := e.must("diff", run.ID, "--stat"); !strings.Contains(st, "3 files changed") {
		t.Errorf("diff --stat:\n%s", st)
	}
	var stat api.DiffStat
	if err := json.Unmarshal([]byte(e.must("diff", run.ID, "--iteration", "2", "--json")), &stat); err != nil {
		t.Fatal(err)
	}
	if stat.FilesChanged != 2 || stat.Insertions != 2 || stat.Deletions != 0 || len(stat.Files) != 2 {
		t.Errorf("diff --iteration 2 --json = %+v", stat)
	}
	if r := e.loopctl("diff", run.ID, "--iteration", "9"); r.code != 66 {
		t.Errorf("diff of a missing iteration: exit %d %s", r.code, r.stderr)
	}
	if got := e.git("rev-parse", "HEAD"); got != base {
		t.Fatalf("the run moved the checkout's HEAD to %s", got)
	}

	res, _, code := e.landJSON(run.ID)
	tip := e.gitIn(e.ws, "rev-parse", run.Branch)
	if code != 0 || res.Mode != "fast-forward" || res.Commit != tip || !res.Verified || res.TestedCommit != tip {
		t.Fatalf("land = %+v (exit %d), want a verified fast-forward to %s", res, code, tip)
	}
	if got := e.git("rev-parse", "HEAD"); got != tip {
		t.Errorf("main = %s after land, want %s", got, tip)
	}
	if b, _ := os.ReadFile(filepath.Join(e.ws, "iter-2.txt")); string(b) != "iteration 2\n" {
		t.Errorf("the checkout's iter-2.txt = %q", b)
	}
	if s := e.git("status", "--porcelain", "--untracked-files=no"); s != "" {
		t.Errorf("the checkout is not clean after land: %s", s)
	}
	p := e.landEvent(run.ID)
	want := map[string]any{"run_id": run.ID, "branch": run.Branch, "base_branch": "main", "commit": tip,
		"mode": "fast-forward", "verified": true, "tested_commit": tip}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("RUN_LANDED %s = %v, want %v (payload %v)", k, p[k], v, p)
		}
	}
	if r := e.status(run.ID); r.LandedCommit != tip {
		t.Errorf("landed_commit = %q, want %s", r.LandedCommit, tip)
	}
	if out := e.must("status", run.ID); !strings.Contains(out, "main is now "+tip[:12]) {
		t.Errorf("status does not show the land:\n%s", out)
	}
	// A second land has nothing left to land, and says so.
	if _, ref, code := e.landJSON(run.ID); code != 64 || ref.Kind != "nothing_to_land" {
		t.Errorf("second land: exit %d, refusal %+v", code, ref)
	}
	// Landed, its worktree can go; one run's clean removes it.
	if out := e.must("clean", run.ID); !strings.Contains(out, run.Worktree+" removed; branch "+run.Branch+" stays") {
		t.Errorf("clean RUN:\n%s", out)
	}
	if _, err := os.Stat(run.Worktree); !os.IsNotExist(err) {
		t.Errorf("the worktree is still there: %v", err)
	}
	if d := e.must("diff", run.ID, "--iteration", "1"); d != it1 {
		t.Errorf("diff --iteration 1 changed after clean:\n%s", d)
	}
}

func TestLandSquash(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	checkLog := e.landRepo()
	e.writeFile(".env", "CHECK_LOG="+checkLog+"\nDONE_AT=2\n", 0o600)
	base := e.git("rev-parse", "HEAD")
	run := e.finishedRun()
	res, _, code := e.landJSON(run.ID, "--squash", "--message", "add the work, squashed")
	if code != 0 || res.Mode != "squash" || !res.Verified {
		t.Fatalf("land --squash = %+v (exit %d)", res, code)
	}
	if got := e.git("log", "-1", "--format=%P %s"); got != base+" add the work, squashed" {
		t.Errorf("squash commit = %q, want one commit on %s", got, base)
	}
	if a, b := e.git("rev-parse", "HEAD^{tree}"), e.git("rev-parse", run.Branch+"^{tree}"); a != b {
		t.Errorf("the squash commit's tree %s is not the run's %s", a, b)
	}
	if p := e.landEvent(run.ID); p["mode"] != "squash" || p["commit"] != res.Commit {
		t.Errorf("RUN_LANDED = %v", p)
	}
}

// The base branch moved and the combination passes the run's tests: the
// tested merge commit is what lands, tested with the run's environment.
func TestLandTestsTheCombinationWhenTheBaseMoved(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	checkLog := e.landRepo()
	run := e.finishedRun()
	userTip := e.commitOnMain(map[string]string{"user.txt": "the user's work\n"})
	os.Remove(checkLog)

	r := e.loopctl("land", run.ID)
	if r.code != 0 {
		t.Fatalf("land: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "has moved since the run started") || !strings.Contains(r.stdout, "verified") {
		t.Errorf("land output:\n%s%s", r.stdout, r.stderr)
	}
	p := e.landEvent(run.ID)
	head := e.git("rev-parse", "HEAD")
	if p["mode"] != "merge" || p["verified"] != true || p["tested_commit"] != head || p["commit"] != head {
		t.Errorf("RUN_LANDED = %v, HEAD %s", p, head)
	}
	if parents := e.git("log", "-1", "--format=%P"); parents != userTip+" "+e.git("rev-parse", run.Branch) {
		t.Errorf("merge parents = %q", parents)
	}
	log, _ := os.ReadFile(checkLog)
	if !strings.Contains(string(log), "phase=verification mark=from-env-file dir="+run.Worktree) {
		t.Errorf("the land's verification did not run with the run's environment in its worktree:\n%s", log)
	}
	if br := e.gitIn(run.Worktree, "symbolic-ref", "--short", "HEAD"); br != run.Branch {
		t.Errorf("the worktree is on %q after land, want %s", br, run.Branch)
	}
}

func TestLandRefusalsChangeNothing(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	checkLog := e.landRepo()
	run := e.finishedRun()
	worktreeTip := e.gitIn(run.Worktree, "rev-parse", "HEAD")

	refuse := func(name, kind string, args ...string) api.LandRefusal {
		t.Helper()
		before := e.checkoutState()
		_, ref, code := e.landJSON(append([]string{run.ID}, args...)...)
		if code != 64 || ref.Kind != kind {
			t.Fatalf("%s: exit %d, refusal %+v; want kind %s", name, code, ref, kind)
		}
		if ref.Branch != run.Branch || (kind != "untested" && len(ref.Hand) == 0) {
			t.Errorf("%s: the refusal does not name the branch and the commands to finish by hand: %+v", name, ref)
		}
		if after := e.checkoutState(); after != before {
			t.Fatalf("%s: the refused land changed the checkout", name)
		}
		if e.landEvent(run.ID) != nil {
			t.Fatalf("%s: RUN_LANDED after a refusal", name)
		}
		return ref
	}

	// Uncommitted changes.
	e.writeFile("README", "edited, not committed\n", 0o644)
	refuse("dirty", "dirty")
	e.git("checkout", "--", "README")

	// Not on the base branch.
	e.git("switch", "-q", "-c", "elsewhere")
	refuse("wrong branch", "wrong_branch")
	e.git("switch", "-q", "main")

	// The run's env_file changed since it was trusted: its verification
	// would run with untrusted values.
	trusted, err := os.ReadFile(filepath.Join(e.ws, ".env"))
	if err != nil {
		t.Fatal(err)
	}
	e.writeFile(".env", string(trusted)+"LD_PRELOAD=/tmp/evil.so\n", 0o600)
	refuse("untrusted env", "untrusted_env")
	e.writeFile(".env", string(trusted), 0o600)

	// The base moved and the combination fails the run's own tests.
	e.commitOnMain(map[string]string{"user.txt": "user\n", "check.sh": strings.Replace(landCheck, "${FAIL_IF:-}", "iter-1.txt", 1)})
	ref := refuse("combination fails", "verify_failed")
	if !strings.Contains(ref.OutputTail, "check failed: iter-1.txt must not exist") || ref.LogPath == "" {
		t.Errorf("the refusal lacks the failing output: %+v", ref)
	}
	if tip := e.gitIn(run.Worktree, "rev-parse", "HEAD"); tip != worktreeTip {
		t.Errorf("the worktree is left at %s, not back on its branch at %s", tip, worktreeTip)
	}
	r := e.loopctl("land", run.ID)
	for _, want := range []string{"verify_failed", "check failed: iter-1.txt must not exist", "git merge " + run.Branch} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("land's human output lacks %q:\n%s", want, r.stderr)
		}
	}

	// A conflict with the base.
	e.commitOnMain(map[string]string{"work.txt": "the user's own work.txt\n"})
	cref := refuse("conflict", "conflict")
	if len(cref.Files) != 1 || cref.Files[0] != "work.txt" {
		t.Errorf("conflict files = %v", cref.Files)
	}

	// --no-verify lands the combination untested, once the conflict is gone.
	e.git("reset", "-q", "--hard", "HEAD^")
	os.Remove(checkLog)
	res, _, code := e.landJSON(run.ID, "--no-verify")
	if code != 0 || res.Verified || res.Mode != "merge" {
		t.Fatalf("land --no-verify = %+v (exit %d)", res, code)
	}
	if p := e.landEvent(run.ID); p["verified"] != false || p["tested_commit"] != "" {
		t.Errorf("RUN_LANDED = %v, want verified false", p)
	}
	if _, err := os.Stat(checkLog); err == nil {
		t.Error("--no-verify ran verify_command")
	}
}

func TestLandRefusesAnActiveRun(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	checkLog := e.landRepo()
	hold := filepath.Join(e.home, "hold")
	e.writeFile(".env", "CHECK_LOG="+checkLog+"\nHOLD="+hold+"\n", 0o600)
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	id := e.start("goal")
	eventually(t, "the agent to hold", 30*time.Second, func() bool {
		_, err := os.Stat(hold + ".waiting")
		return err == nil
	})
	before := e.checkoutState()
	_, ref, code := e.landJSON(id)
	if code != 64 || ref.Kind != "active" {
		t.Fatalf("land of an active run: exit %d, %+v", code, ref)
	}
	if e.checkoutState() != before {
		t.Fatal("a refused land changed the checkout")
	}
	if r := e.loopctl("clean", id); r.code != 64 {
		t.Errorf("clean of an active run: exit %d %s", r.code, r.stderr)
	}
	os.Remove(hold)
	e.wait(id)
}

func TestCleanRemovesOnlyWhatLoopdMade(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	run := e.finishedRun()
	hand := filepath.Join(t.TempDir(), "hand")
	e.git("worktree", "add", "-q", "-b", "loop/hand", hand)

	var info api.DaemonInfo
	if err := json.Unmarshal([]byte(e.must("daemon", "status", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Worktrees == nil || info.Worktrees.Count != 1 || info.Worktrees.Bytes <= 0 || !info.Worktrees.Complete {
		t.Errorf("daemon status worktrees = %+v", info.Worktrees)
	}
	if out := e.must("daemon", "status"); !strings.Contains(out, "1 run worktree(s)") {
		t.Errorf("daemon status:\n%s", out)
	}

	// Bad input is a clear usage error and removes nothing.
	for _, args := range [][]string{{"clean"}, {"clean", "--ended", "--older-than", "banana"},
		{"clean", "--older-than", "7d"}, {"clean", run.ID, "--ended"}, {"diff", run.ID, "--iteration", "-1"}} {
		if r := e.loopctl(args...); r.code != 64 || r.stderr == "" {
			t.Errorf("loopctl %v: exit %d, stderr %q; want 64 with a message", args, r.code, r.stderr)
		}
	}
	if r := e.loopctl("land", "ffffffffffff"); r.code != 66 {
		t.Errorf("land of an unknown run: exit %d %s", r.code, r.stderr)
	}
	// Too recent for --older-than 7d.
	var res api.CleanResult
	if err := json.Unmarshal([]byte(e.must("clean", "--ended", "--older-than", "7d", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 0 {
		t.Fatalf("clean --older-than 7d removed %+v", res.Removed)
	}
	if _, err := os.Stat(run.Worktree); err != nil {
		t.Fatalf("the run's worktree is gone after clean --older-than 7d: %v", err)
	}

	if err := json.Unmarshal([]byte(e.must("clean", "--ended", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 1 || res.Removed[0].Worktree != run.Worktree {
		t.Fatalf("clean --ended = %+v", res)
	}
	if _, err := os.Stat(run.Worktree); !os.IsNotExist(err) {
		t.Errorf("the run's worktree still exists: %v", err)
	}
	if r := e.status(run.ID); r.WorktreeState != "removed" {
		t.Errorf("worktree_state = %q, want removed", r.WorktreeState)
	}
	// What the user made by hand survives, and the run's branch stays.
	if _, err := os.Stat(filepath.Join(hand, "README")); err != nil {
		t.Errorf("the hand-made loop/hand worktree was touched: %v", err)
	}
	list := e.git("worktree", "list", "--porcelain")
	if !strings.Contains(list, "worktree "+hand) || strings.Contains(list, run.Worktree) {
		t.Errorf("git worktree list after clean:\n%s", list)
	}
	for _, br := range []string{"loop/hand", run.Branch} {
		e.git("rev-parse", "--verify", "refs/heads/"+br)
	}
	// The diff reads the branch.
	if d := e.must("diff", run.ID); !strings.Contains(d, "+++ b/iter-1.txt") {
		t.Errorf("diff after clean:\n%s", d)
	}
	if out := e.must("clean", "--ended"); !strings.Contains(out, "no worktree to clean") {
		t.Errorf("second clean: %s", out)
	}
}

func TestWorktreeRemovedByHandWhileDaemonDown(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	run := e.finishedRun()
	hand := filepath.Join(t.TempDir(), "hand")
	e.git("worktree", "add", "-q", "-b", "loop/hand", hand)
	e.stopDaemon()
	if err := os.RemoveAll(run.Worktree); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(hand); err != nil {
		t.Fatal(err)
	}
	e.startDaemon()
	if r := e.status(run.ID); r.WorktreeState != "gone" {
		t.Errorf("worktree_state = %q after restart, want gone", r.WorktreeState)
	}
	if out := e.must("status", run.ID); !strings.Contains(out, "gone") {
		t.Errorf("status does not say the worktree is gone:\n%s", out)
	}
	if d := e.must("diff", run.ID); !strings.Contains(d, "+++ b/iter-1.txt") {
		t.Errorf("diff of a run whose worktree is gone:\n%s", d)
	}
	var res api.CleanResult
	if err := json.Unmarshal([]byte(e.must("clean", "--ended", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 1 || !res.Removed[0].Gone {
		t.Errorf("clean --ended = %+v", res)
	}
	// loopd dropped git's stale entry of its own worktree, and never
	// pruned the stale entry of the hand-made one.
	list := e.git("worktree", "list", "--porcelain")
	if strings.Contains(list, run.Worktree) || !strings.Contains(list, "worktree "+hand) {
		t.Errorf("git worktree list:\n%s", list)
	}
	if !strings.Contains(e.daemonLog(), "removed by someone else") {
		t.Error("the daemon did not log the gone worktree")
	}
}

// The daemon is killed while a land tests the combination: nothing lands,
// the checkout is byte-for-byte as it was, the next daemon stops the
// orphaned verification and puts the worktree back on its branch, and the
// next land goes through.
func TestDaemonKilledMidLandLandsNothing(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	checkLog := e.landRepo()
	holdLand := filepath.Join(e.home, "hold-land")
	e.writeFile(".env", "CHECK_LOG="+checkLog+"\nHOLD_LAND="+holdLand+"\n", 0o600)
	run := e.finishedRun()
	e.commitOnMain(map[string]string{"user.txt": "user\n"})
	if err := os.WriteFile(holdLand, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := e.checkoutState()
	land, out := e.landHeld(run.ID, holdLand, "the land's verification to hold")
	e.killDaemon()
	err := land.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 69 {
		t.Errorf("loopctl land when the daemon died: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "the land did not finish") || !strings.Contains(out.String(), "run `loopctl land "+run.ID+"` again") {
		t.Errorf("loopctl land does not say what the lost connection means for the land:\n%s", out.String())
	}
	if e.checkoutState() != before {
		t.Fatal("the checkout changed when the daemon died mid-land")
	}
	if pids := processesMentioning("loopd-land-" + run.ID); len(pids) == 0 {
		t.Fatal("the verification did not outlive the daemon: the test proves nothing")
	}
	// The next daemon stops the orphaned verification and puts the
	// worktree back on its branch before anything can resume the run.
	e.startDaemon()
	if pids := processesMentioning("loopd-land-" + run.ID); len(pids) != 0 {
		t.Errorf("the cut-short land's verification still runs: %v", pids)
	}
	if br := e.gitIn(run.Worktree, "symbolic-ref", "--short", "HEAD"); br != run.Branch {
		t.Errorf("after the restart the worktree is on %q, want %s", br, run.Branch)
	}
	if !strings.Contains(e.daemonLog(), "a land cut short by the previous daemon was undone") {
		t.Error("the daemon did not log the undone land")
	}
	if e.landEvent(run.ID) != nil {
		t.Fatal("RUN_LANDED for a land that died")
	}
	os.Remove(holdLand)
	res, ref, code := e.landJSON(run.ID)
	if code != 0 || res.Mode != "merge" || !res.Verified {
		t.Fatalf("land after the restart: exit %d, %+v, refusal %+v", code, res, ref)
	}
	if br := e.gitIn(run.Worktree, "symbolic-ref", "--short", "HEAD"); br != run.Branch {
		t.Errorf("the worktree is on %q, want %s", br, run.Branch)
	}
}

// The daemon is killed in the instant between git's fast-forward of the
// base branch and its record (held there by the checkout's own post-merge
// hook): the branch has moved, and the next daemon records the land,
// RUN_LANDED included, from the intent written before git ran.
func TestDaemonKilledBetweenFastForwardAndRecord(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	run := e.finishedRun()
	hold := filepath.Join(e.home, "hold-ff")
	hook := "#!/bin/sh\ntouch " + hold + ".waiting\nwhile [ -f " + hold + " ]; do sleep 0.01; done\n"
	if err := os.WriteFile(filepath.Join(e.ws, ".git", "hooks", "post-merge"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	land, _ := e.landHeld(run.ID, hold, "git's fast-forward to reach its post-merge hook")
	e.killDaemon()
	_ = land.Wait()
	tip := e.gitIn(run.Worktree, "rev-parse", "HEAD")
	if got := e.git("rev-parse", "refs/heads/main"); got != tip {
		t.Fatalf("main is at %s, want the run's tip %s: the test did not hold git after the fast-forward", got, tip)
	}
	os.Remove(hold) // git finishes; no daemon records anything meanwhile
	e.startDaemon()
	ev := e.landEvent(run.ID)
	if ev == nil {
		t.Fatal("no RUN_LANDED after the restart: the land the previous daemon made is lost")
	}
	if ev["commit"] != tip || ev["mode"] != "fast-forward" || ev["base_branch"] != "main" {
		t.Errorf("RUN_LANDED = %v, want commit %s, fast-forward into main", ev, tip)
	}
	if !strings.Contains(e.daemonLog(), "recorded a land the previous daemon made") {
		t.Error("the daemon did not log the recovered land")
	}
	if _, err := os.Stat(filepath.Join(e.home, "runs", run.ID, "landed.json")); !os.IsNotExist(err) {
		t.Errorf("the land intent is still there: %v", err)
	}
	// Once: a second restart records nothing more.
	e.killDaemon()
	e.startDaemon()
	n := 0
	for _, ev := range e.events(run.ID) {
		if ev.Type == "RUN_LANDED" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d RUN_LANDED events, want 1", n)
	}
}

// A run's worktree is loopd's, removed with the run's clean: a run started
// from inside it (a user who cd'd there, an agent working there) is refused
// with the way to start it from the checkout, and nothing is created.
func TestStartInsideARunsWorktreeIsRefused(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	run := e.finishedRun()
	countRuns := func() int {
		var runs []api.Run
		if err := json.Unmarshal([]byte(e.must("list", "--all-workspaces", "--json")), &runs); err != nil {
			t.Fatal(err)
		}
		return len(runs)
	}
	before := countRuns()
	for _, dir := range []string{run.Worktree, filepath.Join(run.Worktree, ".loop")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		r := e.loopctlAt(dir, nil, "start", "another goal")
		if r.code != 64 {
			t.Fatalf("start in %s: exit %d, want 64\n%s%s", dir, r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{"worktree loopd made for run " + run.ID, "loopctl start -C " + run.Workspace} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("start in %s does not say %q:\n%s", dir, want, r.stderr)
			}
		}
	}
	if after := countRuns(); after != before {
		t.Errorf("%d runs after the refused starts, want %d", after, before)
	}
}

// A worktree run still PENDING when the daemon restarts has a record of a
// worktree not made yet: the startup reconcile must not take it for one
// removed by hand.
func TestPendingWorktreeRunIsNotGoneAfterARestart(t *testing.T) {
	e := newEnv(t)
	e.startDaemon("--max-concurrent-runs", "1")
	checkLog := e.landRepo()
	hold := filepath.Join(e.home, "hold")
	e.writeFile(".env", "CHECK_LOG="+checkLog+"\nHOLD="+hold+"\n", 0o600)
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	first := e.start("first")
	eventually(t, "the first agent to hold", 30*time.Second, func() bool {
		_, err := os.Stat(hold + ".waiting")
		return err == nil
	})
	second := e.start("second")
	if st := e.status(second).Status; st != api.RunPending {
		t.Fatalf("second run is %s, want PENDING behind the first", st)
	}
	e.stopDaemon()
	e.startDaemon("--max-concurrent-runs", "1")
	os.Remove(hold)
	for _, id := range []string{first, second} {
		if code := e.wait(id); code != 0 {
			t.Fatalf("run %s: exit %d", id, code)
		}
		if r := e.status(id); r.WorktreeState != "present" {
			t.Errorf("run %s worktree_state = %q, want present", id, r.WorktreeState)
		}
	}
	var info api.DaemonInfo
	if err := json.Unmarshal([]byte(e.must("daemon", "status", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Worktrees == nil || info.Worktrees.Count != 2 {
		t.Errorf("daemon status worktrees = %+v, want 2", info.Worktrees)
	}
	var res api.CleanResult
	if err := json.Unmarshal([]byte(e.must("clean", "--ended", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 2 || res.Removed[0].Gone || res.Removed[1].Gone {
		t.Errorf("clean --ended = %+v", res)
	}
}

// diff of an in-place run reads its snapshots: one iteration against the
// snapshot before it, the whole run against the baseline snapshot — and a
// land is refused: the changes are already in the checkout.
func TestDiffOfAnInPlaceRun(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	checkLog := e.landRepo("isolation=in_place")
	e.writeFile(".env", "CHECK_LOG="+checkLog+"\nDONE_AT=2\n", 0o600)
	id := e.start("goal")
	if code := e.wait(id); code != 0 {
		t.Fatalf("run ended with exit %d: %+v", code, e.status(id))
	}
	it2 := e.must("diff", id, "--iteration", "2")
	if !strings.Contains(it2, "+++ b/iter-2.txt") || strings.Contains(it2, "iter-1.txt") {
		t.Errorf("diff --iteration 2:\n%s", it2)
	}
	whole := e.must("diff", id)
	if !strings.Contains(whole, "+++ b/iter-1.txt") || !strings.Contains(whole, "+++ b/iter-2.txt") {
		t.Errorf("whole diff:\n%s", whole)
	}
	var stat api.DiffStat
	if err := json.Unmarshal([]byte(e.must("diff", id, "--json")), &stat); err != nil {
		t.Fatal(err)
	}
	if stat.FilesChanged != 3 {
		t.Errorf("diff --json = %+v, want work.txt, iter-1.txt and iter-2.txt", stat)
	}
	if _, ref, code := e.landJSON(id); code != 64 || ref.Kind != "not_worktree" {
		t.Errorf("land of an in-place run: exit %d, %+v", code, ref)
	}
}

// The user deletes the whole repository: the run's worktree is gone with
// it for git, and clean still frees its directory under LOOPD_HOME.
func TestCleanAfterTheRepositoryWasDeleted(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	run := e.finishedRun()
	if err := os.RemoveAll(e.ws); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(e.ws, 0o755); err != nil { // loopctl runs from here
		t.Fatal(err)
	}
	if r := e.status(run.ID); r.WorktreeState != "gone" {
		t.Errorf("worktree_state = %q, want gone", r.WorktreeState)
	}
	var res api.CleanResult
	if err := json.Unmarshal([]byte(e.must("clean", "--ended", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 1 {
		t.Fatalf("clean --ended = %+v", res)
	}
	if _, err := os.Stat(run.Worktree); !os.IsNotExist(err) {
		t.Errorf("the worktree's directory is still on disk: %v", err)
	}
}

// A run without verify_command lands, and says it was not verified.
func TestLandWithoutVerifyCommandSaysSo(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	e.config("agent=command", "agent_command="+filepath.Join(e.home, "agent.sh"), "isolation=worktree", "max_iterations=5")
	e.git("commit", "-q", "-am", "no verification")
	run := e.finishedRun()
	r := e.loopctl("land", run.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "NOT verified (the run has no verify_command)") {
		t.Fatalf("land: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if p := e.landEvent(run.ID); p["verified"] != false || p["mode"] != "fast-forward" {
		t.Errorf("RUN_LANDED = %v", p)
	}
}

// A run in a workspace outside git has no ledger: diff says so.
func TestDiffOutsideGitSaysThereIsNoLedger(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", "agent_command=true", "max_iterations=1")
	id := e.start("goal")
	e.wait(id)
	r := e.loopctl("diff", id)
	if r.code != 64 || !strings.Contains(r.stderr, "not in a git repository") {
		t.Errorf("diff outside git: exit %d, %q", r.code, r.stderr)
	}
}

// A workspace that is a subdirectory of its repository: the land's
// verification runs in the same subdirectory of the worktree, as the
// run's own steps do.
func TestLandOfASubdirectoryWorkspace(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	app := filepath.Join(e.ws, "app")
	for _, name := range []string{".loop/config", "check.sh"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(app, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(e.ws, name), filepath.Join(app, name)); err != nil {
			t.Fatal(err)
		}
	}
	checkLog := filepath.Join(e.home, "check.log")
	if err := os.WriteFile(filepath.Join(app, ".env"), []byte("CHECK_LOG="+checkLog+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.writeFile(".gitignore", ".env\napp/.env\n", 0o644)
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "the project moves to app/")
	id := e.start("goal", "-C", app)
	if code := e.wait(id); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	run := e.status(id)
	e.commitOnMain(map[string]string{"user.txt": "user\n"})
	os.Remove(checkLog)
	if r := e.loopctl("land", id); r.code != 0 {
		t.Fatalf("land: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	log, _ := os.ReadFile(checkLog)
	if !strings.Contains(string(log), "dir="+filepath.Join(run.Worktree, "app")+"\n") {
		t.Errorf("the land's verification did not run in the worktree's app/:\n%s", log)
	}
	if b, err := os.ReadFile(filepath.Join(app, "iter-1.txt")); err != nil || string(b) != "iteration 1\n" {
		t.Errorf("the landed app/iter-1.txt = %q, %v", b, err)
	}
}

// While a land tests the combination in the run's worktree, the run cannot
// be resumed into it; the land then goes through.
func TestResumeIsRefusedDuringALand(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	checkLog := e.landRepo()
	holdLand := filepath.Join(e.home, "hold-land")
	e.writeFile(".env", "CHECK_LOG="+checkLog+"\nHOLD_LAND="+holdLand+"\n", 0o600)
	run := e.finishedRun()
	e.commitOnMain(map[string]string{"user.txt": "user\n"})
	if err := os.WriteFile(holdLand, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	land, out := e.landHeld(run.ID, holdLand, "the land's verification to hold")
	if r := e.loopctl("resume", run.ID); r.code != 64 || !strings.Contains(r.stderr, "being landed") {
		t.Errorf("resume during a land: exit %d %s", r.code, r.stderr)
	}
	if r := e.loopctl("land", run.ID); r.code != 64 || !strings.Contains(r.stderr, "busy") {
		t.Errorf("a second land during a land: exit %d %s", r.code, r.stderr)
	}
	os.Remove(holdLand)
	if err := land.Wait(); err != nil {
		t.Fatalf("land: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "landed "+run.Branch+" into main (merge)") {
		t.Errorf("land output:\n%s", out.String())
	}
}

// --iteration 0 is not "the whole run": it is refused, not silently read
// as the flag's default.
func TestDiffIterationZeroIsRefused(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	run := e.finishedRun()
	r := e.loopctl("diff", run.ID, "--iteration", "0")
	if r.code != 64 || !strings.Contains(r.stderr, "--iteration must be 1 or more, got 0") || r.stdout != "" {
		t.Errorf("diff --iteration 0: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// A fast-forward makes no commit, so --message has nowhere to go: land
// says so (stderr and the JSON's warnings) instead of dropping it silently.
func TestLandMessageOnAFastForwardWarns(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	run := e.finishedRun()
	r := e.loopctl("land", run.ID, "--message", "my words")
	if r.code != 0 || !strings.Contains(r.stdout, "(fast-forward)") ||
		!strings.Contains(r.stderr, "warning: --message is not used: main has not moved") {
		t.Fatalf("land -m on a fast-forward: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	run2 := e.finishedRun()
	res, _, code := e.landJSON(run2.ID, "-m", "more words")
	if code != 0 || res.Mode != "fast-forward" || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "--squash --message") {
		t.Errorf("land --json -m on a fast-forward = %+v (exit %d)", res, code)
	}
	// No warning where the message is used.
	run3 := e.finishedRun()
	e.commitOnMain(map[string]string{"user.txt": "the user's work\n"})
	if res, _, code := e.landJSON(run3.ID, "-m", "merge words"); code != 0 || res.Mode != "merge" || len(res.Warnings) != 0 {
		t.Errorf("land --json -m of a merge = %+v (exit %d)", res, code)
	}
	if got := e.git("log", "-1", "--format=%s"); got != "merge words" {
		t.Errorf("merge commit message = %q", got)
	}
}

// Two runs that made the same change: once one has landed, a squash of
// the other would be an empty commit; land refuses it as nothing_to_land.
func TestLandSquashOfChangesAlreadyOnTheBase(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	a := e.finishedRun()
	b := e.finishedRun() // the same agent, the same base: the same files
	if _, _, code := e.landJSON(a.ID); code != 0 {
		t.Fatalf("land %s: exit %d", a.ID, code)
	}
	before := e.checkoutState()
	_, ref, code := e.landJSON(b.ID, "--squash")
	if code != 64 || ref.Kind != "nothing_to_land" || !strings.Contains(ref.Message, "empty commit") {
		t.Errorf("squash of changes already on main: exit %d, refusal %+v", code, ref)
	}
	if e.checkoutState() != before {
		t.Errorf("the refused squash changed the checkout")
	}
}

// A run outside git has no branch and no ledger: land's refusal does not
// send the user to diff, which would only fail in turn.
func TestLandOfARunOutsideGit(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", "agent_command=true", "max_iterations=1")
	id := e.start("goal")
	e.wait(id)
	_, ref, code := e.landJSON(id)
	if code != 64 || ref.Kind != "not_worktree" || strings.Contains(ref.Message, "loopctl diff") {
		t.Errorf("land outside git: exit %d, refusal %+v", code, ref)
	}
}

// clean that removes nothing says why, and --older-than without --ended
// is named as the mistake it is.
func TestCleanSaysWhyNothingWasCleaned(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	run := e.finishedRun()
	if out := e.must("clean", run.ID); !strings.Contains(out, "removed; branch") {
		t.Fatalf("clean RUN:\n%s", out)
	}
	if out := e.must("clean", run.ID); !strings.Contains(out, "the worktree of run "+run.ID[:12]+" was already removed (loopctl clean)") {
		t.Errorf("second clean RUN:\n%s", out)
	}
	inPlace := e.start("goal", "--set", "isolation=in_place")
	e.wait(inPlace)
	if out := e.must("clean", inPlace); !strings.Contains(out, "ran in place: it has no worktree to clean") {
		t.Errorf("clean of an in-place run:\n%s", out)
	}
	if out := e.must("clean", "--ended", "--older-than", "7d"); !strings.Contains(out, "no run with a worktree ended 7d ago or more") {
		t.Errorf("clean --ended --older-than 7d:\n%s", out)
	}
	if r := e.loopctl("clean", "--older-than", "7d"); r.code != 64 || !strings.Contains(r.stderr, "--older-than goes with --ended") {
		t.Errorf("clean --older-than without --ended: exit %d %s", r.code, r.stderr)
	}
}

// A worktree run started from a detached HEAD has no base branch: start
// says so at once (stderr and RUN_CREATED's warnings), not only land at
// the end, and land's refusal says to switch to a branch before merging.
func TestWorktreeRunFromADetachedHead(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	e.git("switch", "-q", "--detach")
	e.trust()
	r := e.loopctl("start", "goal")
	if r.code != 0 || !strings.Contains(r.stderr, "is on a detached HEAD: loopctl land will have no base branch") {
		t.Fatalf("start from a detached HEAD: exit %d\n%s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	e.wait(id)
	var p struct {
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(e.events(id)[0].Payload, &p); err != nil || !slicesContain(p.Warnings, "detached HEAD") {
		t.Errorf("RUN_CREATED warnings = %v (%v)", p.Warnings, err)
	}
	_, ref, code := e.landJSON(id)
	if code != 64 || ref.Kind != "wrong_branch" || len(ref.Hand) < 3 || !strings.HasPrefix(ref.Hand[1], "git switch ") {
		t.Errorf("land of a detached run: exit %d, refusal %+v", code, ref)
	}
}

func slicesContain(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// A run's branch deleted by hand: its commits are still in the repository,
// and land's refusal gives the one command that brings the branch back.
func TestLandAfterTheBranchWasDeleted(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	run := e.finishedRun()
	tip := e.git("rev-parse", run.Branch)
	e.must("clean", run.ID)
	e.git("branch", "-q", "-D", run.Branch)
	before := e.checkoutState()
	_, ref, code := e.landJSON(run.ID)
	want := "git -C " + e.ws + " branch " + run.Branch + " " + tip
	if code != 64 || ref.Kind != "branch_missing" || !strings.Contains(ref.Message, "still in the repository") ||
		len(ref.Hand) != 1 || !strings.HasPrefix(ref.Hand[0], want) {
		t.Fatalf("land with the branch deleted: exit %d, refusal %+v; want hand %q", code, ref, want)
	}
	if e.checkoutState() != before {
		t.Fatal("the refused land changed the checkout")
	}
	e.git("branch", run.Branch, tip) // the command the refusal gave
	if res, ref, code := e.landJSON(run.ID); code != 0 || res.Commit != tip {
		t.Errorf("land after the branch was recreated: exit %d, %+v, %+v", code, res, ref)
	}
}
