package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/trust"
)

// A start through LOOPD_URL may come from any token holder: the paths its
// --set and its user config name are theirs on their machine, and must
// never make the API node read a file of its own (its http.token, another
// user's file) into the run's goal, plan or env. Each is refused, and no
// run is created.
func TestSnapshotStartReadsNoFileOfTheNode(t *testing.T) {
	h := newHarness(t, newFakeExec(t, nil))
	ctx := context.Background()
	clone := "/nowhere/on/this/node/app"
	commit := strings.Repeat("ab", 20)
	secret := "node-secret-4f1c9a"
	secretFile := filepath.Join(h.s.opts.Home, "node-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := []api.SnapshotFile{
		{Path: ".loop/config", Data: []byte("agent=command\nagent_command=./agent.sh\n")},
		{Path: "PLAN.md", Data: []byte("- [ ] one\n")},
	}
	snap := func(user *string) *api.Snapshot {
		return &api.Snapshot{Commit: commit, Files: files, UserConfig: user}
	}
	if _, err := h.s.TrustSnapshot(ctx, clone, snap(nil), true); err != nil {
		t.Fatal(err)
	}
	// ws is the staging directory's "ws": LOOPD_HOME/.snapshot-*/ws.
	up := "../../node-secret"
	str := func(s string) *string { return &s }
	for name, tc := range map[string]struct {
		set  []string
		user *string
		key  string
	}{
		"set relative prompt_file": {set: []string{"prompt_file=" + up}, key: "prompt_file"},
		"set absolute prompt_file": {set: []string{"prompt_file=" + secretFile}, key: "prompt_file"},
		"set plan_file":            {set: []string{"plan_file=" + secretFile}, key: "plan_file"},
		"set spec_file":            {set: []string{"spec_file=" + up}, key: "spec_file"},
		"set env_file":             {set: []string{"env_file=" + secretFile}, key: "env_file"},
		"set stop_file":            {set: []string{"stop_file=" + secretFile}, key: "stop_file"},
		"user config prompt_file":  {user: str("prompt_file = " + secretFile + "\n"), key: "prompt_file"},
		"user config relative":     {user: str("prompt_file = " + up + "\n"), key: "prompt_file"},
		"user config env_file":     {user: str("env_file = " + secretFile + "\n"), key: "env_file"},
	} {
		goal := "g" // a goal as text, so only the key under test could fail the start
		if tc.key == "prompt_file" {
			goal = ""
		}
		r := api.CreateRunRequest{Workspace: clone, Goal: goal, RepoURL: "https://example.com/app.git", BaseCommit: commit,
			BaseBranch: "main", Set: tc.set, Snapshot: snap(tc.user)}
		run, _, err := h.s.CreateRun(ctx, r)
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.key) || strings.Contains(err.Error(), ".snapshot-") {
			t.Errorf("%s: created %q (goal %q), err %v; want an input error naming %s and no staging directory", name, run.ID, run.Goal, err, tc.key)
		}
		if strings.Contains(run.Goal, secret) || strings.Contains(run.Config, secret) {
			t.Errorf("%s: the node's file was read into the run: goal %q", name, run.Goal)
		}
	}
	// loopctl trust through LOOPD_URL sends the user config too.
	if _, err := h.s.TrustSnapshot(ctx, clone, snap(str("env_file = "+secretFile+"\n")), false); err == nil || !strings.Contains(err.Error(), "env_file") {
		t.Errorf("trust with a user config naming a file of the node: %v, want refused naming env_file", err)
	}
	// An error in the sent user config names it as the sender knows it,
	// not by its staging path under the node's home.
	_, _, err := h.s.CreateRun(ctx, api.CreateRunRequest{Workspace: clone, Goal: "g", RepoURL: "https://example.com/app.git",
		BaseCommit: commit, BaseBranch: "main", Snapshot: snap(str("max_iteratoins = 3\n"))})
	if err == nil || strings.Contains(err.Error(), ".snapshot-") || strings.Contains(err.Error(), h.s.opts.Home) || !strings.Contains(err.Error(), "user_config") {
		t.Errorf("a bad user config: %v, want it named user_config, without the staging directory", err)
	}
	runs, err := h.store.ListRuns(ctx, storage.RunFilter{Limit: 100})
	if err != nil || len(runs) != 0 {
		t.Fatalf("runs after the refusals: %d (%v), want none", len(runs), err)
	}
}

// A snapshot holds at most as many files as loopctl ever sends: the
// bytes bound says nothing of empty files, and each one is a file made on
// the API node's disk.
func TestSnapshotTooManyFiles(t *testing.T) {
	h := newHarness(t, newFakeExec(t, nil))
	snap := &api.Snapshot{Commit: strings.Repeat("ab", 20)}
	for i := range trust.MaxSnapshotFiles + 1 {
		snap.Files = append(snap.Files, api.SnapshotFile{Path: fmt.Sprintf(".claude/f%d", i)})
	}
	_, err := h.s.TrustSnapshot(context.Background(), "/nowhere/on/this/node/app", snap, false)
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "more than 1000 files") {
		t.Fatalf("a snapshot of %d files: %v, want refused", len(snap.Files), err)
	}
	if m, _ := filepath.Glob(filepath.Join(h.s.opts.Home, ".snapshot-*")); len(m) > 0 {
		t.Fatalf("staging left behind: %v", m)
	}
}
