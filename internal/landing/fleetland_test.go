package landing

import (
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// A land made in the user's clone is recorded once, and only when it
// holds together; every refusal changes nothing.
func TestRecordLanded(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", api.StepSucceeded, false, "a.txt")
	active := w.worktreeRun("act", "", true, "b.txt")
	commit := strings.Repeat("ab", 20)
	for _, tt := range []struct {
		name string
		run  string
		req  api.LandedRequest
		code api.ErrorCode
		says string
	}{
		{"an active run", "act", api.LandedRequest{Commit: commit, Mode: "merge"}, api.CodeConflict, "lands once it has ended"},
		{"a short commit", "r1", api.LandedRequest{Commit: "abc123", Mode: "merge"}, api.CodeBadRequest, "give full commit ids"},
		{"a short tested commit", "r1", api.LandedRequest{Commit: commit, TestedCommit: "abc", Mode: "merge"}, api.CodeBadRequest, "give full commit ids"},
		{"an upper-case commit", "r1", api.LandedRequest{Commit: strings.ToUpper(commit), Mode: "merge"}, api.CodeBadRequest, "give full commit ids"},
		{"an unknown mode", "r1", api.LandedRequest{Commit: commit, Mode: "rebase"}, api.CodeBadRequest, `mode "rebase"`},
		{"a push without its record", "r1", api.LandedRequest{Commit: commit, Mode: ModePush}, api.CodeBadRequest, "a push record needs"},
	} {
		r := run
		if tt.run == "act" {
			r = active
		}
		if err := w.lander.RecordLanded(t.Context(), r, tt.req); !api.IsCode(err, tt.code) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: RecordLanded = %v; want %s saying %q", tt.name, err, tt.code, tt.says)
		}
	}
	if got := w.landedEvents("r1"); len(got) != 0 {
		t.Fatalf("refusals recorded lands: %q", got)
	}
	if err := w.lander.RecordLanded(t.Context(), run, api.LandedRequest{Commit: commit, Mode: "squash", Verified: true}); err != nil {
		t.Fatalf("RecordLanded: %v", err)
	}
	if got := w.run("r1").LandedCommit; got != commit {
		t.Errorf("landed_commit %q, want %q", got, commit)
	}
	if got := w.landedEvents("r1"); len(got) != 1 || !strings.Contains(got[0], `"mode":"squash"`) || !strings.Contains(got[0], `"branch":"loop/r1"`) {
		t.Errorf("RUN_LANDED payloads %q; want one squash of loop/r1", got)
	}
	// A second land of the same run is a conflict, whichever record saw it.
	if err := w.lander.RecordLanded(t.Context(), w.run("r1"), api.LandedRequest{Commit: commit, Mode: "merge"}); !api.IsCode(err, api.CodeConflict) {
		t.Errorf("a second land = %v; want a conflict", err)
	}
	if err := w.lander.RecordLanded(t.Context(), run, api.LandedRequest{Commit: commit, Mode: "merge"}); !api.IsCode(err, api.CodeConflict) {
		t.Errorf("a second land from a stale row = %v; want a conflict", err)
	}
}

// What loopctl needs to land a fleet run: the frozen verification, the
// env file below the workspace, the last iteration and the commit its
// passed verification tested.
func TestLocalLand(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", api.StepSucceeded, false, "a.txt", "b.txt")
	run.Config = `{"verify_command":["make test"],"env_file":"` + w.checkout + `/.env"}`
	out, err := w.lander.LocalLand(t.Context(), run, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.VerifyCommands) != 1 || out.VerifyCommands[0] != "make test" || out.EnvFile != ".env" || out.EnvGuarded {
		t.Errorf("LocalLand = %+v; want make test, .env unguarded", out)
	}
	if out.Iteration != 2 || !out.LastVerified || out.TestedCommit == "" || out.PRTitle != "" {
		t.Errorf("LocalLand = %+v; want iteration 2, verified, a tested commit, no pull request", out)
	}
	failed := w.worktreeRun("r2", api.StepFailed, false, "c.txt")
	if out, err := w.lander.LocalLand(t.Context(), failed, nil); err != nil || out.LastVerified || out.TestedCommit != "" {
		t.Errorf("LocalLand of a run whose verification failed = %+v, %v; want nothing tested", out, err)
	}
	if out, err := w.lander.LocalLand(t.Context(), run, &LocalPush{Verified: true}); err != nil || out.PRTitle == "" || out.PRBody == "" {
		t.Errorf("LocalLand for a push = %+v, %v; want the pull request's title and body", out, err)
	}
	run.Config = "not json"
	if _, err := w.lander.LocalLand(t.Context(), run, nil); err == nil {
		t.Error("LocalLand of a run with a broken config succeeded")
	}
}
