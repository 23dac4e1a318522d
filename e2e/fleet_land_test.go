package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// A fleet run whose base branch moved is landed by loopctl itself, in a
// clone the API node never saw: loopctl fetches the run's branch from
// repo_url, tests the merge with the run's verify_command in a temporary
// worktree of the clone and lands it only when that passes. A failing
// combination is refused and the clone is as it was; a loopctl killed
// mid-verification leaves a worktree and a verification that the next
// land removes and kills; the land is recorded through the API
// (RUN_LANDED, landed_commit) and a second land is refused.
func TestFleetLandInClone(t *testing.T) {
	f := newFleet(t, 2)
	marks := t.TempDir()
	hold, verifying, ran := filepath.Join(marks, "hold"), filepath.Join(marks, "verifying"), filepath.Join(marks, "ran")
	// The run's own verifications (on the worker) pass; a combination
	// holding breaks-verify fails; with the hold file, the verification
	// says where it runs, then waits to be killed.
	f.config = []string{"verify_command=pwd >> " + ran + "; if [ -e " + hold + " ]; then echo $$ > " + verifying + ".tmp && mv " +
		verifying + ".tmp " + verifying + "; sleep 600; fi; test ! -e breaks-verify"}
	id, remote, base := f.gitFleetRun("FAKE_DONE_AT=2")
	f.start(1)
	api0 := f.workers[0]
	eventually(t, "the run to complete", 90*time.Second, func() bool { return api0.status(id).Status == api.RunCompleted })
	branch := "loop/" + id[:8]
	tip := gitIn(t, remote, "rev-parse", "refs/heads/"+branch)

	// The clone the run started from goes away: the API node cannot see
	// the one the user lands in.
	if err := os.Rename(f.user.ws, f.user.ws+".gone"); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "elsewhere")
	gitIn(t, t.TempDir(), "clone", "-q", "file://"+remote, clone)
	commit := func(name, msg string) string {
		if err := os.WriteFile(filepath.Join(clone, name), []byte(msg+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitIn(t, clone, "add", name)
		gitIn(t, clone, "commit", "-q", "-m", msg)
		return gitIn(t, clone, "rev-parse", "HEAD")
	}
	commit("theirs.txt", "the base moves on")
	broken := commit("breaks-verify", "a change that breaks the tests")
	land := func() result { return f.user.loopctlAt(clone, f.userEnv, "land", id) }
	worktrees := func() int { return strings.Count(gitIn(t, clone, "worktree", "list", "--porcelain"), "worktree ") }

	// 0. Another user's token: the run's verify_command was trusted by
	// whoever started it; it is not handed out to run on their machine.
	workerRan, _ := os.ReadFile(ran) // the run's own verifications, on the worker
	mallory := strings.TrimSpace(api0.must("token", "create", "mallory"))
	if r := f.user.loopctlAt(clone, []string{f.userEnv[0], "LOOPD_TOKEN=" + mallory}, "land", id); r.code != 64 ||
		!strings.Contains(r.stderr, "is not run on your machine") {
		t.Fatalf("land with another user's token: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(ran); !bytes.Equal(b, workerRan) {
		t.Fatal("verify_command ran for another user's land")
	}
	if _, err := exec.Command("git", "-C", clone, "rev-parse", "-q", "--verify", "refs/heads/"+branch).Output(); err == nil {
		t.Fatal("a refused land fetched the run's branch into the clone")
	}

	// A repository that is not a clone of the run's is refused untouched.
	unrelated := filepath.Join(t.TempDir(), "unrelated")
	gitIn(t, t.TempDir(), "init", "-q", "-b", "main", unrelated)
	gitIn(t, unrelated, "commit", "-q", "--allow-empty", "-m", "mine")
	if r := f.user.loopctlAt(unrelated, f.userEnv, "land", id); r.code != 64 || !strings.Contains(r.stderr, "does not have the run's base commit") {
		t.Fatalf("land in an unrelated repository: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := exec.Command("git", "-C", unrelated, "rev-parse", "-q", "--verify", "refs/heads/"+branch).Output(); err == nil {
		t.Fatal("a land refused in an unrelated repository fetched the run's branch into it")
	}

	// 1. The combination fails verify_command: refused, nothing changed.
	r := land()
	if r.code != 64 || !strings.Contains(r.stderr, "verify_failed") {
		t.Fatalf("land of a failing combination: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if head := gitIn(t, clone, "rev-parse", "main"); head != broken {
		t.Fatalf("after a refused land, main is at %s, want %s", head, broken)
	}
	if st := gitIn(t, clone, "status", "--porcelain"); st != "" {
		t.Fatalf("after a refused land, the clone has changes:\n%s", st)
	}
	if n := worktrees(); n != 1 {
		t.Fatalf("after a refused land, the clone has %d worktrees:\n%s", n, gitIn(t, clone, "worktree", "list"))
	}
	b, _ := os.ReadFile(ran)
	if last := lastLine(string(b)); !strings.Contains(last, string(filepath.Separator)+"loopd-land"+string(filepath.Separator)) {
		t.Fatalf("verify_command ran in %q, want a temporary worktree in the clone's loopd-land", last)
	}
	if got := api0.status(id).LandedCommit; got != "" {
		t.Fatalf("a refused land was recorded: landed_commit %s", got)
	}
	gitIn(t, clone, "reset", "-q", "--hard", "HEAD~1")
	moved := gitIn(t, clone, "rev-parse", "main")

	// 2. loopctl killed mid-verification: the next land kills what is
	// left of it and removes its worktree.
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "loopctl"), "land", id)
	cmd.Dir, cmd.Env = clone, f.user.environ(f.userEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var shell int
	eventually(t, "the land's verification to start", 60*time.Second, func() bool {
		b, err := os.ReadFile(verifying)
		shell, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	// Its shell wrote the file before it started its sleep: kill loopctl
	// once both are there.
	eventually(t, "the land's verification to sleep", 60*time.Second, func() bool { return liveInGroup(shell) >= 2 })
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if n := worktrees(); n != 2 {
		t.Fatalf("the killed land's worktree is not there (%d worktrees): the test proves nothing", n)
	}
	// The verification's group (its shell went with loopctl; its sleep
	// lives on until the next land).
	if n := liveInGroup(shell); n == 0 {
		t.Fatalf("the killed land's verification group %d is gone already: the test proves nothing", shell)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}

	// The base branch moves with a change of the env file (the
	// workspace's pick, .env, committed): the combination's env file is
	// not the content the user trusted, and the verification does not
	// run with it, nor at all.
	commit(".env", "BASH_ENV=/tmp/evil")
	before, _ := os.ReadFile(ran)
	if r := land(); r.code != 64 || !strings.Contains(r.stderr, "untrusted_env") {
		t.Fatalf("land with an untrusted env file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after, _ := os.ReadFile(ran); !bytes.Equal(before, after) {
		t.Fatal("verify_command ran with an untrusted env file")
	}
	if n := worktrees(); n != 1 {
		t.Fatalf("after a land refused for its env file, the clone has %d worktrees", n)
	}
	gitIn(t, clone, "reset", "-q", "--hard", "HEAD~1")

	// 3. The next land cleans up, verifies the combination, and merges.
	if r := land(); r.code != 0 {
		t.Fatalf("land: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	} else if !strings.Contains(r.stdout, "verified: the merge with the moved") {
		t.Fatalf("land did not say it verified the combination:\n%s%s", r.stdout, r.stderr)
	}
	// SIGKILLed processes may take a moment to be gone.
	eventually(t, "the killed land's verification to be gone", 10*time.Second, func() bool { return liveInGroup(shell) == 0 })
	if n := worktrees(); n != 1 {
		t.Fatalf("after the land, the clone has %d worktrees:\n%s", n, gitIn(t, clone, "worktree", "list"))
	}
	head := gitIn(t, clone, "rev-parse", "main")
	if parents := gitIn(t, clone, "rev-parse", "main^1", "main^2"); parents != moved+"\n"+tip {
		t.Fatalf("main is %s with parents\n%s\nwant the moved base %s and the run's tip %s", head, parents, moved, tip)
	}
	if st := gitIn(t, clone, "status", "--porcelain"); st != "" {
		t.Fatalf("after the land, the clone has changes:\n%s", st)
	}
	run := api0.status(id)
	if run.LandedCommit != head {
		t.Fatalf("landed_commit %q, want main's %s", run.LandedCommit, head)
	}
	var landed []map[string]any
	for _, ev := range api0.events(id) {
		if ev.Type == "RUN_LANDED" {
			var p map[string]any
			_ = json.Unmarshal(ev.Payload, &p)
			landed = append(landed, p)
		}
	}
	if len(landed) != 1 || landed[0]["mode"] != "merge" || landed[0]["verified"] != true || landed[0]["commit"] != head ||
		landed[0]["branch"] != branch || landed[0]["base_branch"] != "main" {
		t.Fatalf("RUN_LANDED payloads: %v", landed)
	}
	if tc, _ := landed[0]["tested_commit"].(string); tc == "" || gitIn(t, clone, "rev-parse", tc+"^{tree}") != gitIn(t, clone, "rev-parse", head+"^{tree}") {
		t.Fatalf("tested_commit %q is not the combination that landed (%s)", tc, head)
	}
	_ = base

	// 4. A second land is refused and changes nothing.
	if r := land(); r.code != 64 || !strings.Contains(r.stderr, "landed already") {
		t.Fatalf("second land: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := gitIn(t, clone, "rev-parse", "main"); got != head {
		t.Fatalf("a refused second land moved main to %s", got)
	}
}

// liveInGroup counts the processes of process group pgid that are not
// zombies (a killed process whose parent is gone may wait a while to be
// reaped, and kill(2) still finds it).
func liveInGroup(pgid int) int {
	n := 0
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …: comm may hold spaces.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			n++
		}
	}
	return n
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// land --push of a fleet run, through LOOPD_URL, pushes from the user's
// clone (the API node never sees it): to a new remote with a lease on
// "not there yet", to the run's own repository where the workers pushed
// it already; pr_command from the clone's .loop/config runs with the
// body the API node writes, and is refused (nothing pushed) once that
// file is not the content trusted for the run.
func TestFleetLandPushFromClone(t *testing.T) {
	f := newFleet(t, 2)
	marks := t.TempDir()
	body := filepath.Join(marks, "body.md")
	f.config = []string{"pr_command=echo opened https://example.test/pr/7; cp \"$LOOP_BODY_FILE\" " + body}
	id, remote, _ := f.gitFleetRun("FAKE_DONE_AT=2")
	f.start(1)
	api0 := f.workers[0]
	eventually(t, "the run to complete", 90*time.Second, func() bool { return api0.status(id).Status == api.RunCompleted })
	branch := "loop/" + id[:8]
	tip := gitIn(t, remote, "rev-parse", "refs/heads/"+branch)
	if err := os.Rename(f.user.ws, f.user.ws+".gone"); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "elsewhere")
	gitIn(t, t.TempDir(), "clone", "-q", "file://"+remote, clone)
	other := filepath.Join(t.TempDir(), "other.git")
	gitIn(t, t.TempDir(), "init", "-q", "--bare", other)
	push := func(args ...string) result {
		return f.user.loopctlAt(clone, f.userEnv, append([]string{"land", id, "--push"}, args...)...)
	}

	r := push(other)
	if r.code != 0 || !strings.Contains(r.stdout, "pushed "+branch) || !strings.Contains(r.stdout, "pull request: https://example.test/pr/7") {
		t.Fatalf("land --push %s: exit %d\n%s%s", other, r.code, r.stdout, r.stderr)
	}
	if at := gitIn(t, other, "rev-parse", "refs/heads/"+branch); at != tip {
		t.Fatalf("the other remote's %s is at %s, want %s", branch, at, tip)
	}
	if b, err := os.ReadFile(body); err != nil || !strings.Contains(string(b), "fleet goal") {
		t.Fatalf("pr_command's body (%v):\n%s", err, b)
	}
	// The run's own repository has the branch already (the workers'):
	// the push finds it there.
	if r := push(); r.code != 0 || !strings.Contains(r.stdout, "it was there already") {
		t.Fatalf("land --push to origin: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var pushes []map[string]any
	for _, ev := range api0.events(id) {
		if ev.Type == "RUN_LANDED" {
			var p map[string]any
			_ = json.Unmarshal(ev.Payload, &p)
			pushes = append(pushes, p)
		}
	}
	if len(pushes) != 2 || pushes[0]["mode"] != "push" || pushes[0]["pr_url"] != "https://example.test/pr/7" ||
		pushes[0]["push"].(map[string]any)["url"] != other || pushes[0]["commit"] != tip {
		t.Fatalf("RUN_LANDED payloads: %v", pushes)
	}
	if got := api0.status(id).LandedCommit; got != "" {
		t.Fatalf("a push set landed_commit %s", got)
	}

	// The clone's .loop/config changed since it was trusted: its
	// pr_command does not run, and nothing is pushed.
	cfg := filepath.Join(clone, ".loop", "config")
	b, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg, append(b, "# changed\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	third := filepath.Join(t.TempDir(), "third.git")
	gitIn(t, t.TempDir(), "init", "-q", "--bare", third)
	if err := os.Remove(body); err != nil {
		t.Fatal(err)
	}
	if r := push(third); r.code != 64 || !strings.Contains(r.stderr, "untrusted_pr_command") {
		t.Fatalf("land --push with an untrusted pr_command: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out, _ := exec.Command("git", "-C", third, "for-each-ref").Output(); len(out) != 0 {
		t.Fatalf("a refused push left refs in the remote:\n%s", out)
	}
	if _, err := os.Stat(body); err == nil {
		t.Fatal("the untrusted pr_command ran")
	}
}
