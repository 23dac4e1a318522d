package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// gitIn runs git in dir with a fixed identity for the test's own commits
// (the daemon has none: its HOME is empty, so its ledger commits use
// loopd's). --no-optional-locks: reading state must not refresh the
// index, or the test itself would change the bytes it compares.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--no-optional-locks", "-c", "user.name=Test", "-c", "user.email=test@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimRight(string(out), "\n")
}

// gitRepo makes e.ws a repository with one commit of files.
func (e *env) gitRepo(files map[string]string) {
	e.t.Helper()
	for name, content := range files {
		e.writeFile(name, content, 0o644)
	}
	gitIn(e.t, e.ws, "init", "-q", "-b", "main")
	gitIn(e.t, e.ws, "add", "-A")
	gitIn(e.t, e.ws, "commit", "-q", "-m", "initial")
}

// workAgent writes an agent script outside the workspace: each run of it
// appends to work-<run>.txt, edits shared.txt, and, given a hold file,
// first waits for it to exist (and writes <hold>.started).
func workAgent(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	script := `#!/bin/sh
hold="$1"
if [ -n "$hold" ]; then
  : > "$hold.started"
  while [ ! -f "$hold" ]; do sleep 0.05; done
fi
echo "iteration $LOOP_ITERATION" >> "work-$LOOP_RUN_ID.txt"
echo "$LOOP_RUN_ID $LOOP_ITERATION" >> shared.txt
echo "worked in $(pwd)"
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkoutState hashes every file of a checkout, .git included (index,
// HEAD, refs, stash), except what git keeps for worktrees and branches
// loopd adds (loop/*) and the object store, which may only gain objects.
func checkoutState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			switch rel {
			case ".git/objects", ".git/worktrees", ".git/refs/heads/loop", ".git/logs/refs/heads/loop", ".git/refs/loop":
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffState(t *testing.T, before, after map[string]string) {
	t.Helper()
	for name, sum := range before {
		if a, ok := after[name]; !ok {
			t.Errorf("%s disappeared from the checkout", name)
		} else if a != sum {
			t.Errorf("%s changed in the checkout", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s appeared in the checkout", name)
		}
	}
}

func TestStartFromSubdirectoryUsesTheRepositoryConfig(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{"src/deep/dir/main.go": "package main\n"})
	e.config("agent=command", "agent_command=echo from-config > marker.txt", "max_iterations=1", "prompt=goal from config")
	e.startDaemon()
	deep := filepath.Join(e.ws, "src", "deep", "dir")
	e.trust()
	r := e.loopctlIn(deep, "start")
	if r.code != 0 {
		t.Fatalf("start from a subdirectory: exit %d: %s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	e.wait(id)
	run := e.status(id)
	ws, _ := filepath.EvalSymlinks(e.ws)
	if run.Workspace != ws || run.Goal != "goal from config" || run.Reason != "max_iterations:1" {
		t.Fatalf("workspace %s, goal %q, reason %s; want %s, the config's goal and max_iterations=1", run.Workspace, run.Goal, run.Reason, ws)
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "marker.txt")); err != nil || string(b) != "from-config\n" {
		t.Fatalf("the config's agent_command did not run at the top level: %q %v", b, err)
	}
	// last, from the subdirectory, names the same run; -C too.
	var last api.Run
	if err := json.Unmarshal([]byte(e.loopctlIn(deep, "status", "last", "--json").stdout), &last); err != nil || last.ID != id {
		t.Fatalf("last from the subdirectory: %s %v", last.ID, err)
	}
	if out := e.loopctlIn(t.TempDir(), "status", "last", "--json", "-C", deep).stdout; !strings.Contains(out, id) {
		t.Fatalf("last with -C: %s", out)
	}
}

func TestOneActiveInPlaceRunPerWorkspace(t *testing.T) {
	e := newEnv(t)
	hold := filepath.Join(t.TempDir(), "hold")
	e.startDaemon()

	// An ended run, to resume later.
	ended := e.start("first", "--set", "agent=command", "--set", "agent_command=true", "--set", "max_iterations=1")
	e.wait(ended)

	// Racing starts: exactly one wins, in one transaction with its check.
	agent := "agent_command=sh " + workAgent(t) + " " + hold
	const racers = 4
	results := make([]result, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			results[i] = e.loopctl("start", "race", "--set", "agent=command", "--set", agent, "--set", "max_iterations=1")
		})
	}
	wg.Wait()
	var winner string
	for _, r := range results {
		switch r.code {
		case 0:
			if winner != "" {
				t.Fatalf("two starts won: %s and %s", winner, r.stdout)
			}
			winner = strings.TrimSpace(r.stdout)
		case 64:
			if !strings.Contains(r.stderr, "already has an active run") || !strings.Contains(r.stderr, "--set isolation=worktree") {
				t.Errorf("refusal does not name the active run and isolation=worktree: %s", r.stderr)
			}
		default:
			t.Fatalf("start: exit %d: %s", r.code, r.stderr)
		}
	}
	if winner == "" {
		t.Fatal("no start won")
	}
	for _, r := range results {
		if r.code == 64 && !strings.Contains(r.stderr, winner[:8]) {
			t.Errorf("refusal does not name the active run %s: %s", winner[:8], r.stderr)
		}
	}
	runs := e.must("list", "--json")
	if n := strings.Count(runs, `"goal": "race"`) + strings.Count(runs, `"goal":"race"`); n != 1 {
		t.Fatalf("%d race runs exist, want 1:\n%s", n, runs)
	}

	// Resuming the ended run while another is active is refused too.
	r := e.loopctl("resume", ended)
	if r.code != 64 || !strings.Contains(r.stderr, winner[:8]) {
		t.Fatalf("resume of an ended run beside an active one: exit %d: %s", r.code, r.stderr)
	}
	if st := e.status(ended); st.Status != api.RunAborted {
		t.Fatalf("the refused resume changed the run: %s", st.Status)
	}
	os.WriteFile(hold, nil, 0o600)
	e.wait(winner)
	// Once it has ended, the workspace is free again.
	e.must("resume", ended, "--set", "max_iterations=2")
	e.wait(ended)
}

func TestTwoWorktreeRunsSideBySideLeaveTheCheckoutUntouched(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{"shared.txt": "base\n", ".gitignore": ".env\n"})
	// The user's own uncommitted state, which no run may touch.
	gitIn(t, e.ws, "checkout", "-q", "-b", "feature")
	e.writeFile("shared.txt", "base\nuser edit, unstaged\n", 0o644)
	e.writeFile("notes.txt", "untracked\n", 0o644)
	e.writeFile("staged.txt", "staged\n", 0o644)
	gitIn(t, e.ws, "add", "staged.txt")
	e.writeFile("stashme.txt", "x\n", 0o644)
	gitIn(t, e.ws, "stash", "push", "-q", "-u", "--", "stashme.txt")
	before := checkoutState(t, e.ws)
	base := gitIn(t, e.ws, "rev-parse", "HEAD")
	status := gitIn(t, e.ws, "status", "--porcelain")

	e.startDaemon()
	holdA, holdB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	agent := workAgent(t)
	var ids []string
	for _, hold := range []string{holdA, holdB} {
		r := e.loopctl("start", "side by side", "--set", "isolation=worktree", "--set", "agent=command",
			"--set", "agent_command=sh "+agent+" "+hold, "--set", "max_iterations=2")
		if r.code != 0 {
			t.Fatalf("start: exit %d: %s", r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "uncommitted changes") || !strings.Contains(r.stderr, "no verify_command") {
			t.Errorf("start did not warn of the dirty checkout and the missing verification:\n%s", r.stderr)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	for _, id := range ids {
		created := e.events(id)[0]
		if created.Type != "RUN_CREATED" || !strings.Contains(string(created.Payload), "uncommitted changes") ||
			!strings.Contains(string(created.Payload), `"isolation":"worktree"`) {
			t.Fatalf("RUN_CREATED payload: %s", created.Payload)
		}
	}
	// Both run at once: each agent is inside its first step.
	eventually(t, "both agents running", 30*time.Second, func() bool {
		_, errA := os.Stat(holdA + ".started")
		_, errB := os.Stat(holdB + ".started")
		return errA == nil && errB == nil
	})
	os.WriteFile(holdA, nil, 0o600)
	os.WriteFile(holdB, nil, 0o600)
	for _, id := range ids {
		if code := e.wait(id); code != 2 {
			t.Fatalf("run %s: exit %d, want 2 (max_iterations)", id, code)
		}
	}
	diffState(t, before, checkoutState(t, e.ws))
	if got := gitIn(t, e.ws, "status", "--porcelain"); got != status {
		t.Fatalf("status changed:\n%s\nwant:\n%s", got, status)
	}
	if got := gitIn(t, e.ws, "stash", "list"); !strings.Contains(got, "stash@{0}") || strings.Contains(got, "stash@{1}") {
		t.Fatalf("stash changed: %s", got)
	}

	for _, id := range ids {
		run := e.status(id)
		short := id[:8]
		if run.Isolation != "worktree" || run.Branch != "loop/"+short || run.BaseBranch != "feature" || run.BaseCommit != base ||
			run.Worktree != filepath.Join(e.home, "worktrees", id) || run.WorktreeState != "present" {
			t.Fatalf("run fields: %+v", run)
		}
		// One commit per iteration, with loopd's identity and the step trailer.
		log := gitIn(t, e.ws, "log", "--format=%s|%an|%(trailers:key=Loop-Step,valueonly)", base+".."+run.Branch)
		steps := e.steps(id)
		want := "loop " + short + ": iteration 2|loopd|" + id + "/" + strconv.Itoa(steps[1].Seq) + "\n" +
			"loop " + short + ": iteration 1|loopd|" + id + "/" + strconv.Itoa(steps[0].Seq)
		if strings.ReplaceAll(log, "\n\n", "\n") != want {
			t.Fatalf("branch log:\n%s\nwant:\n%s\nsteps: %+v", log, want, steps)
		}
		for i, st := range steps {
			if st.Changes == nil || st.Changes.FilesChanged != 2 || st.Changes.Insertions != 2 ||
				!slices.Equal(st.Changes.Files, []string{"shared.txt", "work-" + id + ".txt"}) {
				t.Fatalf("step %d changes: %+v", i+1, st.Changes)
			}
			if got := gitIn(t, e.ws, "rev-parse", run.Branch+"~"+strconv.Itoa(1-i)); got != st.Changes.Commit {
				t.Fatalf("step %d commit %s, branch has %s", i+1, st.Changes.Commit, got)
			}
		}
		if got := gitIn(t, e.ws, "show", run.Branch+":work-"+id+".txt"); got != "iteration 1\niteration 2" {
			t.Fatalf("work file on the branch: %q", got)
		}
	}
	// STEP_FINISHED carries the change for followers.
	var finished []string
	for _, ev := range e.events(ids[0]) {
		if ev.Type == "STEP_FINISHED" {
			var p struct {
				Changes *api.Changes `json:"changes"`
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil || p.Changes == nil {
				t.Fatalf("STEP_FINISHED without changes: %s", ev.Payload)
			}
			finished = append(finished, p.Changes.Commit)
		}
	}
	if steps := e.steps(ids[0]); len(finished) != 2 || finished[1] != steps[1].Changes.Commit {
		t.Fatalf("STEP_FINISHED changes: %v", finished)
	}
	// steps and status show the change per iteration.
	if out := e.must("steps", ids[0]); !strings.Contains(out, "2 files +2 -0") {
		t.Fatalf("steps does not show the change:\n%s", out)
	}
}

func TestInPlaceSnapshotsLeaveTheCheckoutUntouched(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{"shared.txt": "base\n"})
	e.writeFile("shared.txt", "base\nunstaged\n", 0o644)
	e.writeFile("staged.txt", "staged\n", 0o644)
	gitIn(t, e.ws, "add", "staged.txt")
	e.writeFile("stashme.txt", "x\n", 0o644)
	gitIn(t, e.ws, "stash", "push", "-q", "-u", "--", "stashme.txt")
	head := gitIn(t, e.ws, "rev-parse", "HEAD")
	stash := gitIn(t, e.ws, "stash", "list")
	index, _ := os.ReadFile(filepath.Join(e.ws, ".git", "index"))
	branches := gitIn(t, e.ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/stash")

	e.startDaemon()
	id := e.start("in place", "--set", "agent=command", "--set", "agent_command=sh "+workAgent(t), "--set", "max_iterations=2")
	e.wait(id)

	if got := gitIn(t, e.ws, "status", "--porcelain"); got != " M shared.txt\nA  staged.txt\n?? work-"+id+".txt" {
		t.Fatalf("status:\n%s", got)
	}
	if got := gitIn(t, e.ws, "stash", "list"); got != stash {
		t.Fatalf("stash list changed: %s", got)
	}
	if got := gitIn(t, e.ws, "rev-parse", "HEAD"); got != head {
		t.Fatal("HEAD moved")
	}
	if b, _ := os.ReadFile(filepath.Join(e.ws, ".git", "index")); !bytes.Equal(b, index) {
		t.Fatal("the index file changed")
	}
	if got := gitIn(t, e.ws, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/stash"); got != branches {
		t.Fatalf("branches changed: %s", got)
	}
	steps := e.steps(id)
	for i, st := range steps {
		n := i + 1
		ref := "refs/loop/" + id + "/" + strconv.Itoa(n)
		if st.Changes == nil || st.Changes.Commit != gitIn(t, e.ws, "rev-parse", ref) || st.Changes.FilesChanged != 2 {
			t.Fatalf("iteration %d: changes %+v, ref %s", n, st.Changes, ref)
		}
		// The snapshot holds the workspace as the step left it, the user's
		// uncommitted work included.
		if got := gitIn(t, e.ws, "show", ref+":work-"+id+".txt"); got != map[int]string{1: "iteration 1", 2: "iteration 1\niteration 2"}[n] {
			t.Fatalf("snapshot %d work file: %q", n, got)
		}
		if got := gitIn(t, e.ws, "show", ref+":staged.txt"); got != "staged" {
			t.Fatalf("snapshot %d lacks the user's staged file: %q", n, got)
		}
		if diff := gitIn(t, e.ws, "diff", "--name-only", ref+"^", ref); diff != "shared.txt\nwork-"+id+".txt" {
			t.Fatalf("iteration %d's own change: %s", n, diff)
		}
	}
	if base := gitIn(t, e.ws, "log", "-1", "--format=%s", "refs/loop/"+id+"/0"); base != "loop "+id[:8]+": baseline" {
		t.Fatalf("baseline: %s", base)
	}
}

func TestNonGitWorkspaceHasNoChanges(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	id := e.start("plain", "--set", "agent=command", "--set", "agent_command=echo x > f.txt", "--set", "max_iterations=1")
	e.wait(id)
	out := e.must("steps", id, "--json")
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil || len(raw) != 1 {
		t.Fatalf("steps: %v\n%s", err, out)
	}
	if got := string(raw[0]["changes"]); got != "null" {
		t.Fatalf("changes in a non-git workspace: %s, want null", got)
	}
	if run := e.status(id); run.Isolation != "in_place" || run.BaseCommit != "" || run.Branch != "" {
		t.Fatalf("run fields: %+v", run)
	}
}

func TestWorktreeNeedsACommit(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	r := e.loopctl("start", "x", "--set", "isolation=worktree", "--set", "agent=command", "--set", "agent_command=true")
	if r.code != 64 || !strings.Contains(r.stderr, "isolation=worktree needs a git repository") {
		t.Fatalf("worktree outside git: exit %d: %s", r.code, r.stderr)
	}
	gitIn(t, e.ws, "init", "-q")
	r = e.loopctl("start", "x", "--set", "isolation=worktree", "--set", "agent=command", "--set", "agent_command=true")
	if r.code != 64 || !strings.Contains(r.stderr, "has no commit yet") {
		t.Fatalf("worktree without a commit: exit %d: %s", r.code, r.stderr)
	}
	if out := e.must("list", "--json"); strings.Contains(out, `"id"`) {
		t.Fatalf("a refused start created a run: %s", out)
	}
}

func TestSetupCommandCopiesIgnoredFiles(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{".gitignore": ".env\n", "README": "r\n"})
	e.writeFile(".env", "API_KEY=from-checkout\n", 0o600)
	e.startDaemon()
	id := e.start("setup", "--set", "isolation=worktree", "--set", `setup_command=cp "$LOOP_CHECKOUT/.env" . && echo copied`,
		"--set", "agent=command", "--set", "agent_command=cat .env > seen.txt", "--set", "max_iterations=1")
	e.wait(id)
	steps := e.steps(id)
	if len(steps) != 2 || steps[0].Phase != "setup" || steps[0].Iteration != 0 || steps[0].Status != api.StepSucceeded ||
		steps[1].Phase != "implementation" || steps[1].Iteration != 1 {
		t.Fatalf("steps: %+v", steps)
	}
	run := e.status(id)
	if got := gitIn(t, e.ws, "show", run.Branch+":seen.txt"); got != "API_KEY=from-checkout" {
		t.Fatalf("the agent did not see the copied .env: %q", got)
	}
	if steps[1].Changes == nil || !slices.Equal(steps[1].Changes.Files, []string{"seen.txt"}) {
		t.Fatalf("the ignored .env leaked into the ledger: %+v", steps[1].Changes)
	}
}

func TestSetupFailureFailsTheRun(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{"README": "r\n"})
	e.startDaemon()
	id := e.start("setup", "--set", "isolation=worktree", "--set", "setup_command=echo no npm here; exit 3",
		"--set", "agent=command", "--set", "agent_command=true")
	if code := e.wait(id); code != 1 {
		t.Fatalf("wait: exit %d, want 1 (FAILED)", code)
	}
	run := e.status(id)
	if run.Status != api.RunFailed || run.Reason != "setup_failed" || !strings.Contains(run.Description, "setup_command failed") {
		t.Fatalf("run: %s %s %s", run.Status, run.Reason, run.Description)
	}
	if steps := e.steps(id); len(steps) != 1 || steps[0].Phase != "setup" {
		t.Fatalf("the agent ran after a failed setup: %+v", steps)
	}
	// The way out the description names works: the config is frozen, so a
	// corrected command comes with resume --set.
	want := "loopctl resume " + id[:8] + " --set setup_command="
	if !strings.Contains(run.Description, want) {
		t.Fatalf("the description does not say how to run a corrected setup_command (%q): %s", want, run.Description)
	}
	e.must("resume", id, "--set", "setup_command=echo fixed")
	if code := e.wait(id); code == 1 {
		t.Fatalf("resume --set setup_command: the run failed again: %+v", e.status(id))
	}
	if steps := e.steps(id); len(steps) < 3 || steps[1].Phase != "setup" || steps[1].Status != api.StepSucceeded || steps[2].Phase != "implementation" {
		t.Fatalf("after resume --set setup_command: %+v", steps)
	}
}

func TestWorktreeRemovedByHandEndsTheRun(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{"README": "r\n"})
	e.startDaemon()
	hold := filepath.Join(t.TempDir(), "hold")
	id := e.start("removed", "--set", "isolation=worktree", "--set", "agent=command",
		"--set", "agent_command=sh "+workAgent(t)+" "+hold, "--set", "max_iterations=5")
	eventually(t, "the agent running", 30*time.Second, func() bool { _, err := os.Stat(hold + ".started"); return err == nil })
	run := e.status(id)
	if err := os.RemoveAll(run.Worktree); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(hold, nil, 0o600)
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait: exit %d, want 2 (ABORTED)", code)
	}
	run = e.status(id)
	if run.Reason != "fatal:worktree_gone" || run.WorktreeState != "gone" || !strings.Contains(run.Description, run.Branch) {
		t.Fatalf("run: %s %s %q", run.Reason, run.WorktreeState, run.Description)
	}
	// The daemon lives on and serves other runs.
	other := e.start("after", "--set", "agent=command", "--set", "agent_command=true", "--set", "max_iterations=1")
	e.wait(other)
}

// TestDaemonKilledBetweenStepEndAndLedgerRecord kills the daemon after a
// step's ledger commit and before the step's end is in the database: the
// next daemon records the step with that commit, and makes no second one.
func TestDaemonKilledBetweenStepEndAndLedgerRecord(t *testing.T) {
	for _, isolation := range []string{"worktree", "in_place"} {
		t.Run(isolation, func(t *testing.T) {
			e := newEnv(t)
			e.gitRepo(map[string]string{"README": "r\n"})
			held := filepath.Join(t.TempDir(), "held")
			e.daemonEnv = []string{"LOOPD_TEST_HOLD_AFTER_LEDGER=" + held}
			e.startDaemon()
			id := e.start("crash", "--set", "isolation="+isolation, "--set", "agent=command",
				"--set", "agent_command=sh "+workAgent(t), "--set", "max_iterations=1")
			// Wait for the hook file's content, not only the file: a
			// reader must never trust a file to be whole once it exists.
			var commit string
			eventually(t, "the ledger commit", 30*time.Second, func() bool {
				b, _ := os.ReadFile(held)
				if f := strings.Fields(string(b)); len(f) == 2 {
					commit = f[1]
				}
				return commit != ""
			})
			// The daemon holds the runner after the commit, before the
			// step's end is recorded: killed now, the database still has
			// the step RUNNING.
			e.killDaemon()

			// Another date for any commit the next daemon would make: a
			// second commit of the same tree could not hide as the same hash.
			e.daemonEnv = []string{"GIT_AUTHOR_DATE=2030-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2030-01-01T00:00:00Z"}
			e.startDaemon()
			e.wait(id)
			steps := e.steps(id)
			if len(steps) != 1 || steps[0].Changes == nil || steps[0].Changes.Commit != commit || steps[0].Changes.FilesChanged != 2 {
				t.Fatalf("steps after the restart: %d, changes %+v, want commit %s", len(steps), steps[0].Changes, commit)
			}
			// The step's end was recorded by the second daemon, after it
			// recovered the run: the kill came between commit and record.
			var recovered, finished int64
			for _, ev := range e.events(id) {
				switch ev.Type {
				case "RUN_RECOVERED":
					recovered = ev.Seq
				case "STEP_FINISHED":
					if finished != 0 {
						t.Fatal("two STEP_FINISHED events")
					}
					finished = ev.Seq
				}
			}
			if recovered == 0 || finished < recovered {
				t.Fatalf("RUN_RECOVERED at %d, STEP_FINISHED at %d: the step's end was recorded before the kill", recovered, finished)
			}
			run := e.status(id)
			if isolation == "worktree" {
				if n := gitIn(t, e.ws, "rev-list", "--count", run.BaseCommit+".."+run.Branch); n != "1" {
					t.Fatalf("%s commits on the run branch, want 1", n)
				}
			} else {
				if got := gitIn(t, e.ws, "rev-parse", "refs/loop/"+id+"/1"); got != commit {
					t.Fatalf("snapshot ref %s, want %s", got, commit)
				}
				if refs := gitIn(t, e.ws, "for-each-ref", "--format=%(refname)", "refs/loop/"+id); refs != "refs/loop/"+id+"/0\nrefs/loop/"+id+"/1" {
					t.Fatalf("snapshot refs: %s", refs)
				}
			}
		})
	}
}

// A daemon killed while a worktree run's setup_command runs: the next one
// adopts the setup step, and the run goes on in the same worktree.
func TestDaemonKilledDuringSetup(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{"README": "r\n"})
	e.startDaemon()
	hold := filepath.Join(t.TempDir(), "hold")
	id := e.start("setup crash", "--set", "isolation=worktree",
		"--set", "setup_command=: > "+hold+".started; while [ ! -f "+hold+" ]; do sleep 0.05; done; echo set up",
		"--set", "agent=command", "--set", "agent_command=pwd > where.txt", "--set", "max_iterations=1")
	eventually(t, "the setup step running", 30*time.Second, func() bool { _, err := os.Stat(hold + ".started"); return err == nil })
	e.killDaemon()
	e.startDaemon()
	// The setup step is still running: the new daemon adopts it.
	eventually(t, "the setup step adopted", 30*time.Second, func() bool { return countType(e.events(id), "STEP_ADOPTED") == 1 })
	os.WriteFile(hold, nil, 0o600)
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait: exit %d, want 2 (max_iterations)", code)
	}
	steps := e.steps(id)
	if len(steps) != 2 || steps[0].Phase != "setup" || steps[0].Status != api.StepSucceeded || steps[1].Status != api.StepSucceeded {
		t.Fatalf("steps: %+v", steps)
	}
	run := e.status(id)
	if got := gitIn(t, e.ws, "show", run.Branch+":where.txt"); got != run.Worktree {
		t.Fatalf("the agent worked in %s, want the worktree %s", got, run.Worktree)
	}
}

// A step killed by stop --now still has what it left behind recorded.
func TestKilledStepChangesAreRecorded(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{"README": "r\n"})
	e.startDaemon()
	hold := filepath.Join(t.TempDir(), "hold")
	id := e.start("killed", "--set", "agent=command",
		"--set", "agent_command=echo partial > partial.txt; : > "+hold+".started; sleep 300")
	eventually(t, "the agent running", 30*time.Second, func() bool { _, err := os.Stat(hold + ".started"); return err == nil })
	e.must("stop", id, "--now")
	if code := e.wait(id); code != 3 {
		t.Fatalf("wait: exit %d, want 3", code)
	}
	steps := e.steps(id)
	if len(steps) != 1 || steps[0].Status != api.StepCanceled || steps[0].Changes == nil ||
		!slices.Equal(steps[0].Changes.Files, []string{"partial.txt"}) || steps[0].Changes.Commit == "" {
		t.Fatalf("steps: %+v", steps)
	}
	if got := gitIn(t, e.ws, "show", "refs/loop/"+id+"/1:partial.txt"); got != "partial" {
		t.Fatalf("snapshot: %q", got)
	}
}

// no_progress in a worktree run reads the worktree's ledger, not the
// checkout: an agent that changes only the user's checkout makes no
// progress in the run.
func TestNoProgressInAWorktreeRun(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{"README": "r\n"})
	e.startDaemon()
	tick := filepath.Join(e.ws, "tick.txt")
	id := e.start("idle", "--set", "isolation=worktree", "--set", "agent=command",
		"--set", "agent_command=date +%s%N > "+tick, "--set", "no_progress_iterations=2", "--set", "max_iterations=10")
	if code := e.wait(id); code != 1 {
		t.Fatalf("wait: exit %d, want 1 (FAILED)", code)
	}
	run := e.status(id)
	if run.Reason != "no_progress:2" || run.Iteration != 3 {
		t.Fatalf("run: %s after %d iterations, want no_progress:2 after 3", run.Reason, run.Iteration)
	}
	for _, st := range e.steps(id) {
		if st.Changes == nil || st.Changes.Commit != "" || st.Changes.FilesChanged != 0 {
			t.Fatalf("an iteration recorded a change in the worktree: %+v", st.Changes)
		}
	}
}

// A run whose worktree was cleaned cannot be resumed: resume refuses up
// front and the run keeps the reason it ended with, instead of being
// accepted and aborted at once with fatal:worktree_gone.
func TestResumeAfterCleanIsRefused(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{"README": "r\n"})
	e.startDaemon()
	id := e.start("setup", "--set", "isolation=worktree", "--set", "setup_command=exit 3",
		"--set", "agent=command", "--set", "agent_command=true")
	e.wait(id)
	e.must("clean", id)
	r := e.loopctl("resume", id, "--set", "setup_command=true")
	if r.code != 64 || !strings.Contains(r.stderr, "cannot be resumed: its worktree") || !strings.Contains(r.stderr, "removed by loopctl clean") {
		t.Errorf("resume of a cleaned run: exit %d\n%s", r.code, r.stderr)
	}
	if run := e.status(id); run.Status != api.RunFailed || run.Reason != "setup_failed" {
		t.Errorf("the refused resume changed the run: %s %s", run.Status, run.Reason)
	}
}

// Inside a run's worktree (a user looking at it, or its agent), "last"
// is that run: no run has the worktree itself as its workspace.
func TestLastInsideARunsWorktreeIsThatRun(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	run := e.finishedRun()
	e.finishedRun() // a newer run of the same workspace: not the one the worktree belongs to
	var got api.Run
	out := e.must("status", "last", "--json", "-C", filepath.Join(run.Worktree, ".loop"))
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.ID != run.ID {
		t.Errorf("status last inside %s = %q (%v), want run %s", run.Worktree, got.ID, err, run.ID)
	}
	if d := e.must("diff", "last", "--stat", "-C", run.Worktree); !strings.Contains(d, "changed") {
		t.Errorf("diff last inside the worktree:\n%s", d)
	}
}

// A step that only changed a binary file is not shown as a change of
// nothing: its changes count the file as binary, in the step's JSON and in
// what steps and status print.
func TestBinaryChangesAreCounted(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{"a.txt": "a\n"})
	e.startDaemon()
	id := e.start("goal", "--set", "agent=command", "--set", `agent_command=printf '\000\001\002' > img.bin`,
		"--set", "max_iterations=1")
	e.wait(id)
	steps := e.steps(id)
	if len(steps) == 0 || steps[0].Changes == nil {
		t.Fatalf("steps: %+v", steps)
	}
	if c := steps[0].Changes; c.FilesChanged != 1 || c.BinaryFiles != 1 || c.Insertions != 0 || !slices.Equal(c.Files, []string{"img.bin"}) {
		t.Fatalf("changes of a binary-only step: %+v", c)
	}
	for _, cmd := range []string{"steps", "status"} {
		if out := e.must(cmd, id); !strings.Contains(out, "1 file +0 -0 (1 binary)") {
			t.Errorf("loopctl %s does not say the change was binary:\n%s", cmd, out)
		}
	}
}
