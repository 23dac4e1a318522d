package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
)

// A run from a snapshot is built from the sent files alone, named as the
// clone (a path that does not exist here); bad snapshots change nothing;
// no staging directory outlives its request.
func TestCreateRunFromSnapshot(t *testing.T) {
	h := newHarness(t, newFakeExec(t, nil))
	ctx := context.Background()
	clone := "/nowhere/on/this/node/app" // never read: it does not exist
	commit := strings.Repeat("ab", 20)
	cfg := "agent=command\nagent_command=./agent.sh\nverify_command=make test\nplan_file=PLAN.md\n"
	snap := func(files map[string]string) *api.Snapshot {
		s := &api.Snapshot{Commit: commit}
		for p, d := range files {
			s.Files = append(s.Files, api.SnapshotFile{Path: p, Data: []byte(d)})
		}
		return s
	}
	good := map[string]string{".loop/config": cfg, "PLAN.md": "- [ ] one\n", ".env": "FAKE=1\n"}
	req := func(s *api.Snapshot) api.CreateRunRequest {
		return api.CreateRunRequest{Workspace: clone, Goal: "g", RepoURL: "https://example.com/app.git", BaseCommit: commit, BaseBranch: "main", Snapshot: s}
	}
	leftovers := func() {
		t.Helper()
		if m, _ := filepath.Glob(filepath.Join(h.s.opts.Home, ".snapshot-*")); len(m) > 0 {
			t.Fatalf("staging left behind: %v", m)
		}
	}

	// Untrusted: refused, named as the clone's files.
	_, _, err := h.s.CreateRun(ctx, req(snap(good)))
	var ue *UntrustedError
	if !errors.As(err, &ue) || ue.Workspace != clone || !strings.Contains(ue.Error(), clone+"/.loop/config") {
		t.Fatalf("untrusted: %v", err)
	}
	leftovers()
	if _, err := h.s.TrustSnapshot(ctx, clone, snap(good), true); err != nil {
		t.Fatal(err)
	}
	leftovers()
	run, _, err := h.s.CreateRun(ctx, req(snap(good)))
	if err != nil {
		t.Fatal(err)
	}
	leftovers()
	if run.Workspace != clone || run.Isolation != "worktree" || run.BaseCommit != commit || run.BaseBranch != "main" || run.Branch != "loop/"+run.ID[:8] {
		t.Fatalf("run: %+v", run)
	}
	var frozen struct {
		PlanFile string `json:"plan_file"`
		EnvFile  string `json:"env_file"`
	}
	if err := json.Unmarshal([]byte(run.Config), &frozen); err != nil || frozen.PlanFile != clone+"/PLAN.md" || frozen.EnvFile != clone+"/.env" {
		t.Fatalf("frozen config %s: plan_file and env_file must be the clone's (%v)", run.Config, err)
	}
	if strings.Contains(run.Config, ".snapshot-") {
		t.Fatalf("the frozen config names the staging directory: %s", run.Config)
	}
	evs, err := h.store.EventsOfType(ctx, run.ID, events.RunCreated)
	if err != nil || len(evs) != 1 {
		t.Fatal(evs, err)
	}
	var p struct {
		Snapshot snapshotManifest `json:"snapshot"`
	}
	if err := json.Unmarshal([]byte(evs[0].Payload), &p); err != nil || p.Snapshot.Commit != commit || len(p.Snapshot.Files) != 3 {
		t.Fatalf("RUN_CREATED snapshot: %s (%v)", evs[0].Payload, err)
	}

	for name, tc := range map[string]struct {
		r    api.CreateRunRequest
		want string
	}{
		"path outside":   {req(snap(map[string]string{"../x": "a"})), `"../x" must be a relative path inside the workspace`},
		"absolute path":  {req(snap(map[string]string{"/etc/passwd": "a"})), "must be a relative path"},
		"a git dir":      {req(snap(map[string]string{".git/config": "[core]\n\tfsmonitor = touch /tmp/x\n"})), "must be a relative path"},
		"other commit":   {func() api.CreateRunRequest { r := req(snap(good)); r.BaseCommit = strings.Repeat("cd", 20); return r }(), "must be the snapshot's commit"},
		"relative clone": {func() api.CreateRunRequest { r := req(snap(good)); r.Workspace = "app"; return r }(), "must be a clean absolute path"},
		"bad config":     {req(snap(map[string]string{".loop/config": "agent=command\nagent_command=x\nmax_iteratoins=3\n"})), clone + "/.loop/config:3"},
		"flag outside":   {func() api.CreateRunRequest { r := req(snap(good)); r.PlanFile = "/etc/PLAN.md"; return r }(), "is outside the clone"},
		"backlog":        {func() api.CreateRunRequest { r := req(snap(good)); r.Set = []string{"tasks_file=PLAN.md"}; return r }(), "backlog run"},
	} {
		_, _, err := h.s.CreateRun(ctx, tc.r)
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), ".snapshot-") {
			t.Errorf("%s: %v, want an input error with %q naming no staging directory", name, err, tc.want)
		}
		leftovers()
	}
	runs, err := h.store.ListRuns(ctx, storage.RunFilter{Limit: 100})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs after the refusals: %d (%v), want 1", len(runs), err)
	}
	if _, err := os.Stat(clone); !os.IsNotExist(err) {
		t.Fatalf("%s exists on this machine: the test proves nothing", clone)
	}
}
