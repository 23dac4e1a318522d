package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// landMessages answers a land with NDJSON lines, as the daemon does.
func landMessages(msgs ...api.LandMessage) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for _, m := range msgs {
			b, _ := jsonLine(m)
			_, _ = w.Write(b)
			w.(http.Flusher).Flush()
		}
	}
}

func TestLandCmd(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("POST /v1/runs/{ref}/land", landMessages(
		api.LandMessage{Progress: "testing the merge with the moved main"},
		api.LandMessage{Result: &api.LandResult{Branch: "loop/0123", BaseBranch: "main", Mode: "merge", Commit: "1234567890abcdef0000",
			Verified: true, BaseMoved: true, TestedCommit: "abcabcabcabcabc"}}))
	r := loopctl(t, f, "land", runID, "--squash", "-m", "the message", "--no-verify")
	r.expect(t, exitOK, lines("landed loop/0123 into main (merge): main is now 1234567890ab\n",
		"verified: the merge with the moved main (abcabcabcabc) passed verify_command\n"),
		"testing the merge with the moved main\n")
	req := decode[api.LandRequest](t, f.only("POST", "/v1/runs/"+runID+"/land"))
	if req != (api.LandRequest{Squash: true, Message: "the message", NoVerify: true}) {
		t.Errorf("land sent %+v", req)
	}

	g := newFakeAPI(t)
	g.handle("POST /v1/runs/{ref}/land", landMessages(api.LandMessage{Progress: "p"},
		api.LandMessage{Result: &api.LandResult{Branch: "b", BaseBranch: "main", Mode: "fast-forward", Commit: "c1", Note: "not verified: --no-verify"}}))
	r = loopctl(t, g, "land", runID, "--json")
	r.expect(t, exitOK, lines(`"result": {`, `"mode": "fast-forward"`))
	if r.err != "" {
		t.Errorf("land --json wrote progress to stderr: %q", r.err)
	}
	loopctl(t, g, "land", runID).expect(t, exitOK, lines("NOT verified (--no-verify)\n"))

	h := newFakeAPI(t)
	h.handle("POST /v1/runs/{ref}/land", landMessages(api.LandMessage{Result: &api.LandResult{Branch: "b", BaseBranch: "main", Mode: "squash", Commit: "c2",
		Verified: true, TestedCommit: "t1"}}))
	loopctl(t, h, "land", runID).expect(t, exitOK, lines("verified: the run's last verification of t1 stands\n"))
}

// A refused land changes nothing and exits 64, with the refusal on stderr
// (stdout with --json).
func TestLandCmdRefused(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("POST /v1/runs/{ref}/land", landMessages(api.LandMessage{Refusal: &api.LandRefusal{Kind: "verify_failed",
		Message: "the merge fails verify_command", Branch: "loop/0123", OutputTail: "--- FAIL: TestX\nFAIL\n", LogPath: "/h/land.log",
		Hand: []string{"git merge loop/0123", "go test ./..."}}}))
	loopctl(t, f, "land", runID).expect(t, exitUsage, nil,
		"land refused (verify_failed): the merge fails verify_command\n",
		"\nlast output of verify_command (all of it: /h/land.log):\n  --- FAIL: TestX\n  FAIL\n",
		"\nthe run's branch is loop/0123; to finish by hand:\n  git merge loop/0123\n  go test ./...\n",
		"loopctl: land refused: nothing was changed\n")
	loopctl(t, f, "land", runID, "--json").expect(t, exitUsage, lines(`"refusal": {`, `"kind": "verify_failed"`))
}

func TestLandCmdErrors(t *testing.T) {
	// The daemon dies mid-land: the connection breaks after a progress
	// line, and loopctl says how to tell whether anything landed.
	f := newFakeAPI(t)
	f.handle("POST /v1/runs/{ref}/land", func(w http.ResponseWriter, _ *http.Request) {
		landMessages(api.LandMessage{Progress: "verifying"})(w, nil)
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close()
	})
	loopctl(t, f, "land", "0123").expect(t, exitUnavailable, nil, "verifying\n",
		"the land did not finish: a verification under way was stopped and nothing landed, unless `loopctl status 0123` shows",
		"run `loopctl land 0123` again")
	// An error line from the daemon is its error.
	g := newFakeAPI(t)
	g.handle("POST /v1/runs/{ref}/land", landMessages(api.LandMessage{Error: &api.Error{Code: api.CodeConflict, Message: "run is active"}}))
	loopctl(t, g, "land", runID).expect(t, exitUsage, nil, "loopctl: run is active\n")
	h := newFakeAPI(t)
	h.fail("POST /v1/runs/{ref}/land", api.CodeNotFound, "no run zz")
	loopctl(t, h, "land", "zz").expect(t, exitNotFound, nil, "no run zz")
}

// land --push sends the remote (a path made absolute: the daemon has no
// working directory of ours) and prints the push and the pull request.
func TestLandPushCmd(t *testing.T) {
	f := newFakeAPI(t)
	push := &api.PushResult{Remote: "origin", URL: "git@example.com:o/r.git", Branch: "loop/0123", Commit: "1234567890abcdef0000"}
	f.handle("POST /v1/runs/{ref}/land", landMessages(api.LandMessage{Progress: "pr_command: https://github.com/o/r/pull/7"},
		api.LandMessage{Result: &api.LandResult{Branch: "loop/0123", BaseBranch: "main", Mode: "push", Commit: push.Commit, Verified: true,
			TestedCommit: push.Commit, Push: push, PRURL: "https://github.com/o/r/pull/7", PRCommand: &api.PRCommandResult{LogPath: "/h/pr.log"}}}))
	loopctl(t, f, "land", runID, "--push").expect(t, exitOK, lines(
		"pushed loop/0123 to origin (git@example.com:o/r.git): 1234567890ab (a new branch)\n",
		"verified: the run's last verification of 1234567890ab stands\n",
		"pull request: https://github.com/o/r/pull/7\n"), "pr_command: https://github.com/o/r/pull/7\n")
	if req := decode[api.LandRequest](t, f.only("POST", "/v1/runs/"+runID+"/land")); req != (api.LandRequest{Push: true}) {
		t.Errorf("land --push sent %+v", req)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("remote.git", 0o700); err != nil {
		t.Fatal(err)
	}
	g := newFakeAPI(t)
	g.handle("POST /v1/runs/{ref}/land", landMessages(api.LandMessage{Result: &api.LandResult{Mode: "push", Push: push}}))
	loopctl(t, g, "land", runID, "./remote.git", "--push").expect(t, exitOK, nil)
	if req := decode[api.LandRequest](t, g.only("POST", "/v1/runs/"+runID+"/land")); req.Remote != filepath.Join(dir, "remote.git") || !req.Push {
		t.Errorf("land --push ./remote.git sent %+v", req)
	}
	// The push was made, the pull request was not: exit 70, and why.
	h := newFakeAPI(t)
	h.handle("POST /v1/runs/{ref}/land", landMessages(api.LandMessage{Result: &api.LandResult{Mode: "push", Push: push, Note: "not verified: --no-verify",
		PRCommand: &api.PRCommandResult{ExitCode: 4, Error: "pr_command exited 4", LogPath: "/h/pr.log"}}}))
	loopctl(t, h, "land", runID, "--push", "--no-verify").expect(t, exitInternal, lines("NOT verified (--no-verify)\n"),
		"the branch was pushed, but pr_command exited 4 (its output: /h/pr.log)")
	// A refused push says so.
	k := newFakeAPI(t)
	k.handle("POST /v1/runs/{ref}/land", landMessages(api.LandMessage{Refusal: &api.LandRefusal{Kind: "remote_moved", Message: "someone else pushed there"}}))
	loopctl(t, k, "land", runID, "--push").expect(t, exitUsage, nil, "push refused (remote_moved): someone else pushed there\n",
		"loopctl: push refused: nothing was pushed\n")
	// Bad combinations are refused before the daemon is asked.
	loopctl(t, k, "land", runID, "origin").expect(t, exitUsage, nil, "a second argument is the REMOTE of --push")
	loopctl(t, k, "land", runID, "--push", "--squash").expect(t, exitUsage, nil, "--squash and --message apply to a land")
}

func TestCleanCmd(t *testing.T) {
	f := newFakeAPI(t)
	f.reply("POST /v1/worktrees/clean", api.CleanResult{
		Removed: []api.CleanedWorktree{{RunID: runID, Worktree: "/h/worktrees/a", Branch: "loop/a"}, {RunID: "ffff000011112222", Worktree: "/h/worktrees/b", Branch: "loop/b", Gone: true}},
		Skipped: []api.CleanedWorktree{{RunID: "eeee000011112222", Worktree: "/h/worktrees/c", Reason: "uncommitted changes to tracked files"}},
	})
	loopctl(t, f, "clean", "--ended", "--older-than", "7d").expect(t, exitOK, lines(
		"0123456789ab  /h/worktrees/a removed; branch loop/a stays\n",
		"ffff00001111  /h/worktrees/b forgotten (it had been removed by hand); branch loop/b stays\n",
		"eeee00001111  /h/worktrees/c skipped: uncommitted changes to tracked files\n"))
	if req := decode[api.CleanRequest](t, f.only("POST", "/v1/worktrees/clean")); req != (api.CleanRequest{Ended: true, OlderThan: "7d"}) {
		t.Errorf("clean sent %+v", req)
	}
	loopctl(t, f, "clean", runID, "--json").expect(t, exitOK, lines(`"removed": [`))
}

// A clean that removes nothing says why.
func TestCleanCmdNothing(t *testing.T) {
	tests := []struct {
		args []string
		run  api.Run
		want string
	}{
		{[]string{"--ended"}, api.Run{}, "no worktree to clean: no ended run has one\n"},
		{[]string{"--ended", "--older-than", "2d"}, api.Run{}, "no worktree to clean: no run with a worktree ended 2d ago or more\n"},
		{[]string{"abc"}, api.Run{ID: runID, Isolation: "in_place"}, "run 0123456789ab ran in place: it has no worktree to clean\n"},
		{[]string{"abc"}, api.Run{ID: runID, Isolation: "worktree", WorktreeState: "removed"}, "the worktree of run 0123456789ab was already removed (loopctl clean)\n"},
		{[]string{"abc"}, api.Run{ID: runID, Isolation: "worktree"}, "run 0123456789ab never had its worktree made: nothing to clean\n"},
		{[]string{"abc"}, api.Run{ID: runID, Isolation: "worktree", WorktreeState: "present"}, "no worktree to clean\n"},
	}
	for _, tt := range tests {
		f := newFakeAPI(t)
		f.reply("POST /v1/worktrees/clean", api.CleanResult{})
		f.reply("GET /v1/runs/{ref}", tt.run)
		r := loopctl(t, f, append([]string{"clean"}, tt.args...)...)
		if r.code != 0 || r.out != tt.want {
			t.Errorf("clean %v: %d %q, want %q", tt.args, r.code, r.out, tt.want)
		}
		if tt.args[0] == "abc" {
			if req := decode[api.CleanRequest](t, f.only("POST", "/v1/worktrees/clean")); req.Run != "abc" || req.Ended {
				t.Errorf("clean %v sent %+v", tt.args, req)
			}
		}
	}
}

func TestCleanCmdErrors(t *testing.T) {
	f := newFakeAPI(t)
	loopctl(t, f, "clean").expect(t, exitUsage, nil, "clean needs a RUN (an id, a unique id prefix, or last) or --ended")
	loopctl(t, f, "clean", "a", "b").expect(t, exitUsage, nil, "clean takes at most one RUN")
	loopctl(t, f, "clean", "a", "--ended").expect(t, exitUsage, nil, "give a RUN or --ended, not both")
	loopctl(t, f, "clean", "--older-than", "7d").expect(t, exitUsage, nil, "--older-than goes with --ended: loopctl clean --ended --older-than 7d")
	if len(f.requests()) != 0 {
		t.Errorf("refused cleans asked the daemon: %+v", f.requests())
	}
	f.fail("POST /v1/worktrees/clean", api.CodeBadRequest, `--older-than "7x": not a duration`)
	loopctl(t, f, "clean", "--ended", "--older-than", "7x").expect(t, exitUsage, nil, "not a duration")
}

func TestDashboardCmd(t *testing.T) {
	ws := t.TempDir()
	f := newFakeAPI(t)
	f.reply("POST /v1/dashboard/login", api.DashboardLogin{URL: "http://127.0.0.1:7777/login?t=abc", RunID: runID})
	loopctl(t, f, "dashboard", "last", "-C", ws).expect(t, exitOK, lines("http://127.0.0.1:7777/login?t=abc\n"),
		"(it works once) to log in to the dashboard\n")
	if req := decode[api.DashboardLoginRequest](t, f.only("POST", "/v1/dashboard/login")); req != (api.DashboardLoginRequest{Run: "last", Workspace: ws}) {
		t.Errorf("dashboard sent %+v", req)
	}
	loopctl(t, f, "dashboard", "--json").expect(t, exitOK, lines(`"url": "http://127.0.0.1:7777/login?t=abc"`))
	g := newFakeAPI(t)
	g.fail("POST /v1/dashboard/login", api.CodeConflict, "the daemon serves no dashboard: start it with loopd --http")
	loopctl(t, g, "dashboard").expect(t, exitUsage, nil, "serves no dashboard")
	loopctl(t, g, "dashboard", "a", "b").expect(t, exitUsage, nil, "accepts at most 1 arg(s)")
}
