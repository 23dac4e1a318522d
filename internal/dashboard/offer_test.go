package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

func TestOfferFollowsTheRunsState(t *testing.T) {
	signal := []api.Condition{{Type: "user_signal"}}
	// As views.Conditions gives them: the top-level condition, its spec.
	nested := []api.Condition{{Type: "any", Spec: json.RawMessage(`{"type":"any","conditions":[{"type":"max_iterations","count":3},{"type":"all","conditions":[{"type":"user_signal"},{"type":"all_tests_pass"}]}]}`)}}
	negated := []api.Condition{{Type: "not", Spec: json.RawMessage(`{"type":"not","condition":{"type":"user_signal"}}`)}}
	noSignal := []api.Condition{{Type: "any", Spec: json.RawMessage(`{"type":"any","conditions":[{"type":"max_iterations","count":3}]}`)}}
	for _, tc := range []struct {
		name string
		run  api.Run
		want string
	}{
		{"pending", api.Run{Status: api.RunPending}, "[stop pause]"},
		{"running", api.Run{Status: api.RunRunning}, "[stop stop-now pause]"},
		{"running with a user_signal condition", api.Run{Status: api.RunRunning, Conditions: signal}, "[stop stop-now pause signal]"},
		{"running with a user_signal inside an any", api.Run{Status: api.RunRunning, Conditions: nested}, "[stop stop-now pause signal]"},
		{"running with a user_signal inside a not", api.Run{Status: api.RunRunning, Conditions: negated}, "[stop stop-now pause signal]"},
		{"running with a composite without user_signal", api.Run{Status: api.RunRunning, Conditions: noSignal}, "[stop stop-now pause]"},
		{"running, signal already set", api.Run{Status: api.RunRunning, Conditions: signal, UserSignal: true}, "[stop stop-now pause]"},
		{"running, pause asked", api.Run{Status: api.RunRunning, PauseRequest: true}, "[stop stop-now resume]"},
		{"running, stop asked", api.Run{Status: api.RunRunning, StopRequested: "graceful"}, "[stop-now pause]"},
		{"running, stop --now asked", api.Run{Status: api.RunRunning, StopRequested: "now"}, "[pause]"},
		{"paused", api.Run{Status: api.RunPaused, Conditions: signal}, "[stop resume signal]"},
		{"waiting", api.Run{Status: api.RunWaiting}, "[stop pause resume]"},
		{"waiting for an answer", api.Run{Status: api.RunWaiting, Reason: "needs_answer"}, "[stop pause resume answer]"},
		{"completed in place", api.Run{Status: api.RunCompleted, Isolation: "in_place", Conditions: signal}, "[]"},
		{"failed in place", api.Run{Status: api.RunFailed, Isolation: "in_place"}, "[resume]"},
		{"interrupted in place", api.Run{Status: api.RunInterrupted, Isolation: "in_place"}, "[resume]"},
		{"completed worktree", api.Run{Status: api.RunCompleted, Isolation: "worktree", Branch: "loop/1"}, "[land]"},
		{"aborted worktree", api.Run{Status: api.RunAborted, Isolation: "worktree", Branch: "loop/1"}, "[resume land]"},
		{"landed worktree", api.Run{Status: api.RunCompleted, Isolation: "worktree", Branch: "loop/1", LandedCommit: "abc"}, "[]"},
		{"worktree removed", api.Run{Status: api.RunFailed, Isolation: "worktree", Branch: "loop/1", WorktreeState: "removed"}, "[land]"},
		// A backlog's task runs: landed by their backlog, retried from its page.
		{"task run running", api.Run{Status: api.RunRunning, Parent: "bl", Isolation: "worktree", Branch: "loop/1"}, "[stop stop-now pause]"},
		{"task run waiting for an answer", api.Run{Status: api.RunWaiting, Reason: "needs_answer", Parent: "bl"}, "[stop pause resume answer]"},
		{"task run completed", api.Run{Status: api.RunCompleted, Parent: "bl", Isolation: "worktree", Branch: "loop/1", BaseBranch: "loop/bl"}, "[]"},
		{"task run aborted", api.Run{Status: api.RunAborted, Parent: "bl", Isolation: "worktree", Branch: "loop/1"}, "[]"},
		{"backlog failed", api.Run{Status: api.RunFailed, Kind: "backlog", Isolation: "worktree", Branch: "loop/bl"}, "[resume land]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := offerFor(tc.run)
			if got := fmt.Sprint(o.Names()); got != tc.want {
				t.Fatalf("offers %s, want %s", got, tc.want)
			}
			if tc.run.Status.Terminal() && (o.Stop || o.StopNow || o.Pause || o.Signal) {
				t.Fatal("an ended run offers stop, pause or signal")
			}
			if tc.run.Isolation == "in_place" && o.Land {
				t.Fatal("an in-place run offers land")
			}
		})
	}
	if n := offerFor(api.Run{Status: api.RunCompleted, Isolation: "worktree", Branch: "loop/1", BaseBranch: "main", LandedCommit: "0123456789abcdef"}).Note; n != "Landed into main as 0123456789ab." {
		t.Errorf("a landed run's note: %q", n)
	}
}

func TestBreakAfter(t *testing.T) {
	for _, tc := range []struct {
		in   string
		seps []string
		want string
	}{
		{"max_consecutive_failures:verification:3", []string{":"}, "max_consecutive_failures:<wbr>verification:<wbr>3"},
		{"user_stop", []string{":"}, "user_stop"},
		{"a:", []string{":"}, "a:"},
		{"tests/test_x.py::test_<b>", []string{"::", "/"}, "tests/<wbr>test_x.py::<wbr>test_&lt;b&gt;"},
	} {
		if got := string(breakAfter(tc.in, tc.seps...)); got != tc.want {
			t.Errorf("breakAfter(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A chosen step's log: its text, then an end, for an ended step; a step
// the run does not have is a 404, a malformed one a 400.
func TestStepLogStreamsOneStep(t *testing.T) {
	src := newFakeSource()
	src.commit(api.Run{ID: "r", Status: api.RunRunning})
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/1.log", []byte("step one said <b>hi</b>\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/2.log", []byte("step two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src.steps["r"] = []Step{
		{Step: api.Step{RunID: "r", Seq: 1, Phase: api.PhaseImplementation, Iteration: 1, LogPath: dir + "/1.log", Status: api.StepSucceeded}},
		{Step: api.Step{RunID: "r", Seq: 2, Phase: api.PhaseVerification, Iteration: 1, LogPath: dir + "/2.log", Status: api.StepRunning}},
	}
	// Another run's step: never served through this run's page.
	src.commit(api.Run{ID: "other", Status: api.RunRunning})
	src.steps["other"] = []Step{{Step: api.Step{RunID: "other", Seq: 3, Phase: api.PhaseImplementation, Iteration: 1, LogPath: dir + "/1.log", Status: api.StepSucceeded}}}
	srv, s, _ := testServer(t, src)
	c := login(t, srv, s, "/")
	get := func(q string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/live/runs/r/log"+q, nil)
		req.AddCookie(c)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for q, want := range map[string]int{"?step=x": http.StatusBadRequest, "?step=0": http.StatusBadRequest, "?step=9": http.StatusNotFound, "?step=3": http.StatusNotFound} {
		if resp := get(q); resp.StatusCode != want {
			t.Errorf("GET log%s: %d, want %d", q, resp.StatusCode, want)
		}
	}

	resp := get("?step=1")
	rd := bufio.NewReader(resp.Body)
	var evs []string
	var text strings.Builder
	for {
		ev, data := sseEvent(t, rd)
		var u logUpdate
		if err := json.Unmarshal([]byte(data), &u); err != nil {
			t.Fatal(err)
		}
		if u.Seq != 1 {
			t.Fatalf("step 1's stream sent %+v", u)
		}
		evs = append(evs, ev)
		text.WriteString(u.Text)
		if ev == "end" {
			break
		}
	}
	// The text goes as data for the page to add as text: never the newest
	// step's, and as it is in the file.
	if text.String() != "step one said <b>hi</b>\n" || evs[0] != "log" {
		t.Fatalf("step 1's log arrived as %q in %v", text.String(), evs)
	}

	// A running step: followed until it ends.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/live/runs/r/log?step=2", nil)
	req.AddCookie(c)
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	rd = bufio.NewReader(resp2.Body)
	if ev, data := sseEvent(t, rd); ev != "log" || !strings.Contains(data, `"start":true`) {
		t.Fatalf("first event %s %s", ev, data)
	}
	if _, data := sseEvent(t, rd); !strings.Contains(data, "step two") {
		t.Fatalf("second event %s", data)
	}
	f, err := os.OpenFile(dir+"/2.log", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "and more")
	f.Close()
	src.mu.Lock()
	src.steps["r"][1].Status = api.StepFailed
	src.mu.Unlock()
	src.commit(api.Run{ID: "r", Status: api.RunRunning})
	var rest []string
	for {
		ev, data := sseEvent(t, rd)
		rest = append(rest, ev+" "+data)
		if ev == "end" {
			break
		}
	}
	if !strings.Contains(strings.Join(rest, "\n"), "and more") {
		t.Fatalf("the running step's later output did not arrive before its end: %q", rest)
	}
}
