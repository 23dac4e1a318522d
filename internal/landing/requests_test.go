package landing

import (
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// What a dashboard session may not ask for, and options that do not go
// together, are refused before anything is resolved.
func TestCheckLandRequest(t *testing.T) {
	for _, tt := range []struct {
		name      string
		req       api.LandRequest
		dashboard bool
		code      api.ErrorCode // "" for accepted
		says      string
	}{
		{"a plain land", api.LandRequest{}, false, "", ""},
		{"a plain land from the dashboard", api.LandRequest{Squash: true}, true, "", ""},
		{"no-verify from loopctl", api.LandRequest{NoVerify: true}, false, "", ""},
		{"no-verify from the dashboard", api.LandRequest{NoVerify: true}, true, api.CodeForbidden, "lands only verified work"},
		{"push from the dashboard", api.LandRequest{Push: true}, true, api.CodeForbidden, "does not push"},
		{"push with squash", api.LandRequest{Push: true, Squash: true}, false, api.CodeBadRequest, "--squash and --message"},
		{"push with a message", api.LandRequest{Push: true, Message: "m"}, false, api.CodeBadRequest, "--squash and --message"},
		{"push to a remote", api.LandRequest{Push: true, Remote: "origin"}, false, "", ""},
		{"a remote without push", api.LandRequest{Remote: "origin"}, false, api.CodeBadRequest, `a remote ("origin") is only used with --push`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckLandRequest(tt.req, tt.dashboard)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !api.IsCode(err, tt.code) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("CheckLandRequest = %v; want %s saying %q", err, tt.code, tt.says)
			}
		})
	}
}

// A clean request that names no run, or mixes a run with --ended or
// --older-than, or gives a bad age, is refused and removes nothing.
func TestCleanRefusesBadRequests(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", "", false, "done.txt")
	for _, tt := range []struct {
		req  api.CleanRequest
		says string
	}{
		{api.CleanRequest{}, "clean needs a RUN or --ended"},
		{api.CleanRequest{OlderThan: "7d"}, "clean needs a RUN or --ended"},
		{api.CleanRequest{Run: "r1", Ended: true}, "give a RUN or --ended, not both"},
		{api.CleanRequest{Run: "r1", OlderThan: "7d"}, "--older-than goes with --ended"},
		{api.CleanRequest{Ended: true, OlderThan: "soon"}, `--older-than "soon": give a duration`},
		{api.CleanRequest{Ended: true, OlderThan: "-1h", Branches: true}, `--older-than "-1h": give a duration`},
	} {
		if _, err := w.lander.Clean(t.Context(), tt.req); !api.IsCode(err, api.CodeBadRequest) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Clean(%+v) = %v; want a bad request saying %q", tt.req, err, tt.says)
		}
	}
	if got := w.run(run.ID).WorktreeState; got == "removed" {
		t.Fatal("a refused clean removed the worktree")
	}
}

// A clean of one run, with --branches, removes its worktree and then
// looks at that run's branch only (kept: it has not landed); --ended with
// an age keeps a run that ended since.
func TestCleanOneRunWithItsBranch(t *testing.T) {
	w := newWorld(t)
	run := w.worktreeRun("r1", "", false, "done.txt")
	res, err := w.lander.Clean(t.Context(), api.CleanRequest{Ended: true, OlderThan: "30d", Branches: true})
	if err != nil || len(res.Removed) != 0 || len(res.Branches) != 0 {
		t.Fatalf("clean --ended --older-than 30d = %+v, %v; want nothing removed (the run ended just now)", res, err)
	}
	if _, err := w.lander.Clean(t.Context(), api.CleanRequest{Run: "nosuch"}); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("clean of an unknown run = %v; want an error naming it", err)
	}
	res, err = w.lander.Clean(t.Context(), api.CleanRequest{Run: "r1", Branches: true})
	if err != nil || len(res.Removed) != 1 || res.Removed[0].Worktree != run.Worktree {
		t.Fatalf("clean r1 --branches = %+v, %v; want its worktree removed", res, err)
	}
	if len(res.Branches) != 1 || res.Branches[0].Branch != "loop/r1" || res.Branches[0].Removed || !strings.Contains(res.Branches[0].Reason, "has not landed") {
		t.Errorf("branches of clean r1 --branches = %+v; want loop/r1 kept, not landed", res.Branches)
	}
}

func TestParseIteration(t *testing.T) {
	if n, err := ParseIteration(""); n != nil || err != nil {
		t.Errorf(`ParseIteration("") = %v, %v; want the whole run`, n, err)
	}
	if n, err := ParseIteration("3"); err != nil || n == nil || *n != 3 {
		t.Errorf(`ParseIteration("3") = %v, %v`, n, err)
	}
	for _, s := range []string{"0", "-1", "x", "1.5"} {
		if _, err := ParseIteration(s); !api.IsCode(err, api.CodeBadRequest) || !strings.Contains(err.Error(), "a number from 1") {
			t.Errorf("ParseIteration(%q) = %v; want a bad request", s, err)
		}
	}
}
