package e2e

import (
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

// A fleet worker's agents never see how to reach the fleet's database or
// API: the worker here gets its store through LOOPD_STORE (the URL with
// its password) and has PGPASSWORD and LOOPD_TOKEN in its environment;
// the agent dumps its environment, which holds none of them (and no
// GIT_ASKPASS or credential helper loopd would have added).
func TestFleetAgentEnvHasNoCredentials(t *testing.T) {
	f := newFleet(t, 1)
	e := f.workers[0]
	e.daemonEnv = append(e.daemonEnv, "LOOPD_STORE="+f.url, "PGPASSWORD=pg-s3cret", "LOOPD_TOKEN=tok-s3cret")
	e.startDaemon("--worker-id", f.ids[0], "--lease-ttl", fleetTTL.String(),
		"--heartbeat", fleetHeartbeat.String(), "--fence-margin", fleetMargin.String())

	ws := filepath.Join(t.TempDir(), "ws")
	dump := filepath.Join(t.TempDir(), "agent-env")
	agent := filepath.Join(t.TempDir(), "dump-env-agent")
	script := "#!/bin/sh\nenv > " + dump + ".tmp && mv " + dump + ".tmp " + dump + "\nexec " + scriptedAgent() + " \"$@\"\n"
	if err := os.MkdirAll(filepath.Join(ws, ".loop"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		agent:                             script,
		filepath.Join(ws, ".loop/config"): "agent=command\nagent_command=" + agent + "\nmax_iterations=2\n",
		filepath.Join(ws, ".env"):         "FAKE_DONE_AT=1\n",
	} {
		if err := os.WriteFile(name, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"trust"}, {"start", "goal"}} {
		if r := e.loopctlAt(ws, nil, args...); r.code != 0 {
			t.Fatalf("loopctl %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	var env []byte
	eventually(t, "the agent to dump its environment", 60*time.Second, func() bool {
		var err error
		env, err = os.ReadFile(dump)
		return err == nil
	})
	if !strings.Contains(string(env), "LOOP_RUN_ID=") {
		t.Fatalf("the dump is not the agent's environment:\n%s", env)
	}
	for _, bad := range []string{"LOOPD_STORE=", "PGPASSWORD=", "LOOPD_TOKEN=", "pg-s3cret", "tok-s3cret", "postgres://", "GIT_ASKPASS=", "credential.helper"} {
		if strings.Contains(string(env), bad) {
			t.Errorf("the agent's environment holds %q:\n%s", bad, env)
		}
	}
}

// gitFleetRun starts an API node (worker 0 of f) and, through LOOPD_URL
// as a user would, a fleet run from a clone whose origin is a new bare
// file:// remote; vars go into the clone's .env, committed: the fleet's
// workers have only what is committed. It
// returns the run's id, the remote's path and the base commit; f.user
// and f.userEnv are the user and their LOOPD_URL and LOOPD_TOKEN.
func (f *fleet) gitFleetRun(vars ...string) (id, remote, base string) {
	t := f.t
	t.Helper()
	url, token := f.workers[0].startAPINode(f.url)
	u := newEnv(t)
	f.user, f.userEnv = u, []string{"LOOPD_URL=" + url, "LOOPD_TOKEN=" + token}
	remote = filepath.Join(t.TempDir(), "remote.git")
	gitIn(t, t.TempDir(), "init", "-q", "--bare", "-b", "main", remote)
	u.config(append([]string{"agent=command", "agent_command=" + scriptedAgent(), "max_iterations=8"}, f.config...)...)
	u.fakeAgent(vars...)
	for name, content := range f.files {
		u.writeFile(name, content, 0o644)
	}
	gitIn(t, u.ws, "init", "-q", "-b", "main")
	gitIn(t, u.ws, "remote", "add", "origin", "file://"+remote)
	gitIn(t, u.ws, "add", "-A")
	gitIn(t, u.ws, "commit", "-q", "-m", "first")
	gitIn(t, u.ws, "push", "-q", "origin", "main")
	base = gitIn(t, u.ws, "rev-parse", "HEAD")
	for _, args := range [][]string{{"trust"}, {"start", "fleet goal"}} {
		r := u.loopctlEnv(f.userEnv, args...)
		if r.code != 0 {
			t.Fatalf("loopctl %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		id = strings.TrimSpace(r.stdout)
	}
	if r := f.workers[0].status(id); r.RepoURL != "file://"+remote || r.BaseCommit != base {
		t.Fatalf("run %s: repo_url %q base_commit %q, want file://%s at %s", id, r.RepoURL, r.BaseCommit, remote, base)
	}
	return id, remote, base
}

// A fleet run from git, over three workers and a file:// remote: every
// iteration's ledger commit is pushed to loop/<short-id> as it is made
// (recorded as the step's pushed_commit); the worker running iteration 3
// is killed (kill -9), another takes the run over from the last pushed
// commit and redoes iteration 3; the final branch holds iterations 1–4
// exactly once each, nothing of the killed worker's unpushed work.
func TestFleetGitRunPushedAndTakenOver(t *testing.T) {
	f := newFleet(t, 4)
	id, remote, base := f.gitFleetRun("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=3", "FAKE_DONE_AT=4")
	for i := 1; i <= 3; i++ {
		f.start(i)
	}
	branch := "loop/" + id[:8]
	subjects := func() string {
		out, _ := exec.Command("git", "-C", remote, "log", "--format=%s", base+".."+"refs/heads/"+branch).Output()
		return strings.TrimSpace(string(out))
	}

	// Iteration 3 waits for go-3 in the worktree of the worker that runs it.
	holder := -1
	eventually(t, "iteration 3's agent to start", 90*time.Second, func() bool {
		for i := 1; i <= 3; i++ {
			b, _ := os.ReadFile(filepath.Join(f.workers[i].home, "worktrees", id, ".agent-invocations"))
			if strings.Contains("\n"+string(b), "\n3 ") {
				holder = i
				return true
			}
		}
		return false
	})
	short := id[:8]
	want2 := fmt.Sprintf("loop %s: iteration 2\nloop %s: iteration 1", short, short)
	if got := subjects(); got != want2 {
		t.Fatalf("the remote branch while iteration 3 runs:\n%s\nwant:\n%s", got, want2)
	}
	f.workers[holder].killDaemon()

	taker := -1
	eventually(t, "another worker to redo iteration 3", fleetTTL+fleetScan+60*time.Second, func() bool {
		for i := 1; i <= 3; i++ {
			if i == holder {
				continue
			}
			b, _ := os.ReadFile(filepath.Join(f.workers[i].home, "worktrees", id, ".agent-invocations"))
			if strings.Contains("\n"+string(b), "\n3 ") {
				taker = i
				return true
			}
		}
		return false
	})
	// The taker's worktree started from the last pushed commit: the
	// killed worker's iteration-3 line is not in it.
	wt := filepath.Join(f.workers[taker].home, "worktrees", id)
	if b, _ := os.ReadFile(filepath.Join(wt, ".agent-invocations")); strings.Count("\n"+string(b), "\n3 ") != 1 {
		t.Fatalf("the taker's .agent-invocations:\n%s", b)
	}
	if err := os.WriteFile(filepath.Join(wt, "go-3"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to complete", 90*time.Second, func() bool {
		return f.workers[0].status(id).Status == api.RunCompleted
	})
	want := fmt.Sprintf("loop %s: iteration 4\nloop %s: iteration 3\n%s", short, short, want2)
	if got := subjects(); got != want {
		t.Fatalf("the final remote branch:\n%s\nwant each iteration once:\n%s", got, want)
	}
	tip := gitIn(t, remote, "rev-parse", "refs/heads/"+branch)
	inv := gitIn(t, remote, "show", tip+":.agent-invocations")
	var its []string
	for l := range strings.SplitSeq(inv, "\n") {
		its = append(its, strings.Fields(l)[0])
	}
	if strings.Join(its, " ") != "1 2 3 4" {
		t.Fatalf("the iterations whose work is on the branch: %v (.agent-invocations:\n%s)", its, inv)
	}
	// Every push is recorded: the newest pushed_commit is the branch's tip.
	last := ""
	for _, ev := range f.workers[0].events(id) {
		var p struct {
			Pushed string `json:"pushed_commit"`
		}
		if json.Unmarshal(ev.Payload, &p) == nil && p.Pushed != "" {
			last = p.Pushed
		}
	}
	if last != tip {
		t.Fatalf("the last recorded pushed_commit is %q, the branch is at %s", last, tip)
	}
	t.Logf("holder w%d killed, taker w%d; branch:\n%s\ninvocations on the branch: %v", holder, taker, subjects(), its)
	if at, _ := recoveredAt(f.workers[0].events(id), f.ids[holder]); at.IsZero() {
		t.Fatalf("no RUN_RECOVERED from %s", f.ids[holder])
	}

	// land, through LOOPD_URL, fetches the branch into the user's clone
	// and lands it: main fast-forwards to the branch's tip.
	if r := f.user.loopctlEnv(f.userEnv, "land", id); r.code != 0 {
		t.Fatalf("loopctl land %s: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
	}
	if head := gitIn(t, f.user.ws, "rev-parse", "main"); head != tip {
		t.Fatalf("after land, main is at %s; want the branch's tip %s", head, tip)
	}
}

// Someone else pushes to a fleet run's branch while it runs: the
// worker's next push is refused by its lease, the run ends ABORTED
// fatal:branch_moved, and the remote keeps their commit.
func TestFleetGitBranchMovedStopsTheRun(t *testing.T) {
	f := newFleet(t, 2)
	id, remote, _ := f.gitFleetRun("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=2", "FAKE_DONE_AT=4")
	api0 := f.workers[0]
	f.start(1)
	wt := filepath.Join(f.workers[1].home, "worktrees", id)
	eventually(t, "iteration 2's agent to start", 60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(wt, ".agent-invocations"))
		return strings.Contains("\n"+string(b), "\n2 ")
	})
	branch := "loop/" + id[:8]
	other := filepath.Join(t.TempDir(), "other")
	gitIn(t, t.TempDir(), "clone", "-q", "-b", branch, "file://"+remote, other)
	if err := os.WriteFile(filepath.Join(other, "theirs.txt"), []byte("theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, other, "add", "-A")
	gitIn(t, other, "commit", "-q", "-m", "someone else's")
	gitIn(t, other, "push", "-q", "origin", branch)
	theirs := gitIn(t, other, "rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(wt, "go-2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to end", 60*time.Second, func() bool { return api0.status(id).Status.Terminal() })
	r := api0.status(id)
	if r.Status != api.RunAborted || r.Reason != "fatal:branch_moved" || !strings.Contains(r.Description, branch) {
		t.Fatalf("run %s %s %q: %s; want ABORTED fatal:branch_moved naming %s", id, r.Status, r.Reason, r.Description, branch)
	}
	if tip := gitIn(t, remote, "rev-parse", "refs/heads/"+branch); tip != theirs {
		t.Fatalf("the remote branch is at %s, want their commit %s kept", tip, theirs)
	}
}

// A worker killed and restarted within its lease adopts its git run's
// running step in the worktree it left (made again at this worker's
// path on load), records and pushes that step's work, and the iteration
// is not redone: each is on the branch once.
func TestFleetGitRestartedWorkerAdoptsItsStep(t *testing.T) {
	f := newFleet(t, 2)
	id, remote, base := f.gitFleetRun("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=2", "FAKE_DONE_AT=3")
	api0 := f.workers[0]
	f.start(1)
	wt := filepath.Join(f.workers[1].home, "worktrees", id)
	eventually(t, "iteration 2's agent to start", 60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(wt, ".agent-invocations"))
		return strings.Contains("\n"+string(b), "\n2 ")
	})
	f.workers[1].killDaemon()
	f.start(1)
	eventually(t, "the step to be adopted", 20*time.Second, func() bool {
		return countType(f.workers[1].events(id), "STEP_ADOPTED") == 1
	})
	if err := os.WriteFile(filepath.Join(wt, "go-2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to complete", 60*time.Second, func() bool { return api0.status(id).Status == api.RunCompleted })
	short := id[:8]
	want := fmt.Sprintf("loop %s: iteration 3\nloop %s: iteration 2\nloop %s: iteration 1", short, short, short)
	if got := gitIn(t, remote, "log", "--format=%s", base+"..refs/heads/loop/"+short); got != want {
		t.Fatalf("the remote branch:\n%s\nwant:\n%s", got, want)
	}
	if inv := gitIn(t, remote, "show", "refs/heads/loop/"+short+":.agent-invocations"); strings.Count(inv, "\n")+1 != 3 {
		t.Fatalf("agent invocations on the branch (want 3, the adopted one once):\n%s", inv)
	}
}
