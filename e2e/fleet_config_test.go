package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/trust"
)

// cloneOnlyLoopctl runs loopctl with the user's LOOPD_URL and token from
// the clone src, seen at the path at — in a mount namespace of its own
// (unshare --mount): a tmpfs on at's parent with src bound on at. The
// fleet's API node and workers, outside it, find nothing at that path,
// as an API node on another machine would not.
func (f *fleet) cloneOnlyLoopctl(src, at string, args ...string) result {
	f.t.Helper()
	script := `set -e
mount -t tmpfs tmpfs "$(dirname "$AT")"
mkdir "$AT"
mount --bind "$SRC" "$AT"
cd "$AT"
exec "$LOOPCTL" "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "sh", "-c", script, "sh"}, args...)...)
	cmd.Env = f.user.environ(append(f.userEnv, "SRC="+src, "AT="+at, "LOOPCTL="+filepath.Join(binDir, "loopctl"))...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		f.t.Fatalf("unshare: %v", err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// Through LOOPD_URL, trust and start send the clone's files as committed
// at its HEAD, and the API node builds the run from them alone: here the
// clone is visible only inside loopctl's own mount namespace, then
// removed before any worker starts, and the run completes from git. A bad
// config is refused with 64 naming the clone's file, line and key; an
// untrusted one with 64 and `loopctl trust`; a config changed but not
// committed with 64. A request whose files are not its base commit's
// (a trusted config sent with a commit whose config is another) is
// refused by the worker before anything of the commit runs: the agent's
// marker never appears.
func TestFleetStartFromACloneTheAPINodeCannotSee(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace (unshare --mount)")
	}
	f := newFleet(t, 2)
	url, token := f.workers[0].startAPINode(f.url)
	f.user = newEnv(t)
	f.userEnv = []string{"LOOPD_URL=" + url, "LOOPD_TOKEN=" + token}

	remote := filepath.Join(t.TempDir(), "remote.git")
	gitIn(t, t.TempDir(), "init", "-q", "--bare", "-b", "main", remote)
	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(filepath.Join(src, ".loop"), 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "agent-ran")
	agent := filepath.Join(t.TempDir(), "marking-agent")
	write := func(dir, name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Dir(agent), filepath.Base(agent), "#!/bin/sh\necho \"$LOOP_RUN_ID\" >> "+marker+"\nexec "+scriptedAgent()+" \"$@\"\n")
	write(src, ".loop/config", "agent=command\nagent_command="+agent+"\nmax_iterations=4\n")
	write(src, ".env", "FAKE_DONE_AT=2\n")
	// An agent's own project file travels in the snapshot and is trusted.
	write(src, ".mcp.json", `{"mcpServers":{"docs":{"command":"docs-server","args":["--stdio"]}}}`)
	gitIn(t, src, "init", "-q", "-b", "main")
	gitIn(t, src, "remote", "add", "origin", "file://"+remote)
	gitIn(t, src, "add", "-A")
	gitIn(t, src, "commit", "-q", "-m", "first")
	gitIn(t, src, "push", "-q", "origin", "main")
	base := gitIn(t, src, "rev-parse", "HEAD")

	at := filepath.Join(t.TempDir(), "mnt", "clone") // nobody but loopctl sees it
	if err := os.Mkdir(filepath.Dir(at), 0o755); err != nil {
		t.Fatal(err)
	}

	// Not trusted yet: refused with 64, nothing created.
	r := f.cloneOnlyLoopctl(src, at, "start", "fleet goal")
	if r.code != 64 || !strings.Contains(r.stderr, "loopctl trust") || !strings.Contains(r.stderr, filepath.Join(at, ".loop/config")) {
		t.Fatalf("start before trust: exit %d, want 64 naming %s and loopctl trust\n%s%s", r.code, filepath.Join(at, ".loop/config"), r.stdout, r.stderr)
	}
	r = f.cloneOnlyLoopctl(src, at, "trust")
	if r.code != 0 || !strings.Contains(r.stdout, ".mcp.json") || !strings.Contains(r.stdout, "docs-server") || !strings.Contains(r.stderr, base[:12]) {
		t.Fatalf("trust: exit %d, want 0 showing .mcp.json's docs-server and the commit %s\n%s%s", r.code, base[:12], r.stdout, r.stderr)
	}
	// A config changed in the working tree and not committed is refused:
	// the run would not be what the user sees.
	write(src, ".loop/config", "agent=command\nagent_command="+agent+"\nmax_iterations=9\n")
	r = f.cloneOnlyLoopctl(src, at, "start", "fleet goal")
	if r.code != 64 || !strings.Contains(r.stderr, "differs from its commit") || !strings.Contains(r.stderr, ".loop/config") {
		t.Fatalf("start with an uncommitted config: exit %d, want 64 naming .loop/config\n%s%s", r.code, r.stdout, r.stderr)
	}
	gitIn(t, src, "checkout", "--", ".loop/config")

	began := time.Now()
	r = f.cloneOnlyLoopctl(src, at, "start", "fleet goal")
	if r.code != 0 {
		t.Fatalf("start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("loopctl start through LOOPD_URL with its snapshot (in a new mount namespace): %v", time.Since(began).Round(time.Millisecond))
	id := strings.TrimSpace(r.stdout)
	if _, err := os.Stat(at); !os.IsNotExist(err) {
		t.Fatalf("the clone's path %s exists outside loopctl's namespace (%v): the test proves nothing", at, err)
	}
	// The clone is gone before any worker starts: the run is from git.
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	run := f.workers[0].status(id)
	if run.Workspace != at || run.RepoURL != "file://"+remote || run.BaseCommit != base || run.BaseBranch != "main" {
		t.Fatalf("run: workspace %q repo_url %q base_commit %q base_branch %q; want %s, file://%s, %s, main",
			run.Workspace, run.RepoURL, run.BaseCommit, run.BaseBranch, at, remote, base)
	}
	f.start(1)
	eventually(t, "the run to complete from git", 90*time.Second, func() bool {
		return f.workers[0].status(id).Status.Terminal()
	})
	if run := f.workers[0].status(id); run.Status != api.RunCompleted {
		t.Fatalf("the run ended %s (%s): %s", run.Status, run.Reason, run.Description)
	}
	if b, _ := os.ReadFile(marker); strings.Count(string(b), id) != 2 {
		t.Fatalf("the agent ran %d times for %s, want 2 (FAKE_DONE_AT=2 from the committed .env):\n%s", strings.Count(string(b), id), id, b)
	}

	// A bad config, committed: 64 naming the clone's file, line and key.
	bad := filepath.Join(t.TempDir(), "bad")
	gitIn(t, filepath.Dir(bad), "clone", "-q", "file://"+remote, bad)
	write(bad, ".loop/config", "agent=command\nagent_command="+agent+"\nmax_iteratoins=4\n")
	gitIn(t, bad, "commit", "-q", "-am", "typo")
	gitIn(t, bad, "push", "-q", "origin", "main")
	r = f.cloneOnlyLoopctl(bad, at, "start", "fleet goal")
	if r.code != 64 || !strings.Contains(r.stderr, filepath.Join(at, ".loop/config")+":3") || !strings.Contains(r.stderr, "max_iteratoins") || strings.Contains(r.stderr, ".snapshot-") {
		t.Fatalf("start with a bad config: exit %d, want 64 naming %s:3 and max_iteratoins (not the node's staging)\n%s%s", r.code, filepath.Join(at, ".loop/config"), r.stdout, r.stderr)
	}

	// Tampered: the trusted files of the first commit sent with a commit
	// whose .loop/config is another. The run would be built from the
	// trusted config (the API node cannot tell), while its worktree holds
	// another: the worker refuses it before its first step.
	evil := filepath.Join(t.TempDir(), "evil")
	gitIn(t, filepath.Dir(evil), "clone", "-q", "file://"+remote, evil)
	gitIn(t, evil, "reset", "-q", "--hard", base)
	snap, err := trust.ReadCommitted(context.Background(), evil, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(t.TempDir(), "setup-ran")
	write(evil, ".loop/config", "agent=command\nagent_command="+agent+"\nisolation=worktree\nsetup_command=touch "+hook+"\nmax_iterations=4\n")
	gitIn(t, evil, "add", "-A")
	gitIn(t, evil, "commit", "-q", "-m", "another config")
	gitIn(t, evil, "push", "-q", "origin", "HEAD:refs/heads/evil")
	evilCommit := gitIn(t, evil, "rev-parse", "HEAD")
	req := api.CreateRunRequest{Workspace: at, Goal: "tampered", RepoURL: "file://" + remote, BaseCommit: evilCommit,
		Snapshot: &api.Snapshot{Commit: evilCommit}}
	for _, c := range snap {
		req.Snapshot.Files = append(req.Snapshot.Files, api.SnapshotFile{Path: c.Path, Data: c.Data})
	}
	body, _ := json.Marshal(req)
	hr, _ := http.NewRequest(http.MethodPost, url+"/v1/runs", bytes.NewReader(body))
	hr.Header.Set("Authorization", "Bearer "+token)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	var created api.Run
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || created.ID == "" {
		t.Fatalf("the tampered request: HTTP %d, want 201 (its files are trusted; only the worker can tell)", resp.StatusCode)
	}
	eventually(t, "the tampered run to stop", 90*time.Second, func() bool {
		return f.workers[0].status(created.ID).Status.Terminal()
	})
	tr := f.workers[0].status(created.ID)
	if tr.Status != api.RunAborted || tr.Reason != "fatal:snapshot_mismatch" || !strings.Contains(tr.Description, ".loop/config: the commit's content") {
		t.Fatalf("the tampered run: %s %s: %s; want ABORTED fatal:snapshot_mismatch naming .loop/config", tr.Status, tr.Reason, tr.Description)
	}
	if b, _ := os.ReadFile(marker); strings.Contains(string(b), created.ID) {
		t.Fatalf("the agent ran for the tampered run %s", created.ID)
	}
	if _, err := os.Stat(hook); err == nil {
		t.Fatal("the tampered commit's setup_command ran")
	}
	if len(f.workers[0].steps(created.ID)) != 0 {
		t.Fatalf("the tampered run has steps: %+v", f.workers[0].steps(created.ID))
	}
}
