package daemon

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

func TestWorkspaceEndpointsRejectBadInput(t *testing.T) {
	c, _ := testDaemon(t, Options{})
	ws := t.TempDir()
	status, _, body := do(t, c, "POST", "/v1/runs", strings.NewReader(`{"workspace":"`+ws+`","goal":"g","set":["agent=command","agent_command=true","max_iterations=1"]}`))
	if status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	var run api.Run
	if err := json.Unmarshal(body, &run); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     api.ErrorCode
		msg                      string
	}{
		{"land: unknown run", "POST", "/v1/runs/abcdef0123/land", `{}`, 404, api.CodeNotFound, "not found"},
		{"land: unknown field", "POST", "/v1/runs/" + run.ID + "/land", `{"force":true}`, 400, api.CodeBadRequest, `unknown field "force"`},
		{"land: wrong type", "POST", "/v1/runs/" + run.ID + "/land", `{"squash":"yes"}`, 400, api.CodeBadRequest, "malformed request body"},
		{"diff: unknown run", "GET", "/v1/runs/abcdef0123/diff", "", 404, api.CodeNotFound, "not found"},
		{"diff: bad iteration", "GET", "/v1/runs/" + run.ID + "/diff?iteration=two", "", 400, api.CodeBadRequest, "iteration must be a number"},
		{"diff: outside git", "GET", "/v1/runs/" + run.ID + "/diff", "", 409, api.CodeConflict, "not in a git repository"},
		{"clean: nothing named", "POST", "/v1/worktrees/clean", `{}`, 400, api.CodeBadRequest, "needs a RUN or --ended"},
		{"clean: both", "POST", "/v1/worktrees/clean", `{"run":"` + run.ID + `","ended":true}`, 400, api.CodeBadRequest, "not both"},
		{"clean: bad age", "POST", "/v1/worktrees/clean", `{"ended":true,"older_than":"banana"}`, 400, api.CodeBadRequest, `--older-than "banana"`},
		{"clean: age without ended", "POST", "/v1/worktrees/clean", `{"run":"` + run.ID + `","older_than":"7d"}`, 400, api.CodeBadRequest, "goes with --ended"},
		{"clean: unknown run", "POST", "/v1/worktrees/clean", `{"run":"abcdef0123"}`, 404, api.CodeNotFound, "not found"},
		{"clean: unknown field", "POST", "/v1/worktrees/clean", `{"prune":true}`, 400, api.CodeBadRequest, `unknown field "prune"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, e, raw := do(t, c, tt.method, tt.path, strings.NewReader(tt.body))
			if status != tt.status || e.Error.Code != tt.code || !strings.Contains(e.Error.Error(), tt.msg) {
				t.Errorf("got %d %q %q, want %d %q containing %q\n%s", status, e.Error.Code, e.Error.Error(), tt.status, tt.code, tt.msg, raw)
			}
		})
	}
	// Nothing to clean is an empty answer, and the disk measure of no
	// worktree is zero, complete.
	status, _, body = do(t, c, "POST", "/v1/worktrees/clean", strings.NewReader(`{"ended":true}`))
	if status != 200 || strings.TrimSpace(string(body)) != `{"removed":[],"skipped":[]}` {
		t.Errorf("clean --ended with no worktree: %d %s", status, body)
	}
	var info api.DaemonInfo
	status, _, body = do(t, c, "GET", "/v1/daemon?disk=1", nil)
	if err := json.Unmarshal(body, &info); err != nil || status != 200 || info.Worktrees == nil ||
		info.Worktrees.Count != 0 || info.Worktrees.Bytes != 0 || !info.Worktrees.Complete {
		t.Errorf("daemon?disk=1: %d %s", status, body)
	}
	if _, _, body = do(t, c, "GET", "/v1/daemon", nil); strings.Contains(string(body), "worktrees") {
		t.Errorf("a plain ping measured the disk: %s", body)
	}
}
