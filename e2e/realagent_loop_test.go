package e2e

// End-to-end tests of the agent presets with the real CLIs (issue 15): the
// real loopd and loopctl run the real Claude Code, Codex and Gemini CLI,
// offline, against the scripted fake model API, and every token loopd
// records is compared with what the fake billed.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/fakemodel"
)

// newRealEnv is a loopd world whose agent is the real CLI name, talking to
// a fresh fake model API: the daemon finds the CLI on its PATH, the
// workspace is a git repository (Codex insists) and its .env holds the
// CLI's offline environment. The daemon is started with a 1s API back-off.
func newRealEnv(t *testing.T, name string) (*env, *realAgent, *fakemodel.Server) {
	t.Helper()
	srv := fakemodel.New(t)
	a := newRealAgent(t, name, srv)
	e := newEnv(t)
	e.path = a.path()
	if out, err := exec.Command("git", "-C", e.ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	e.writeFile(".env", strings.Join(a.vars, "\n")+"\n", 0o600)
	e.startDaemon("--api-backoff", "1s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("fake model API requests:\n%s", srv.Summary())
		}
	})
	return e, a, srv
}

// preset writes .loop/config for the CLI's preset and the given keys.
func (a *realAgent) preset(e *env, keys ...string) {
	e.config(append([]string{"agent=" + a.name, "model=" + a.model, "completion=promise",
		"step_timeout=2m", "idle_timeout=1m"}, keys...)...)
}

// billed converts what the fake billed into loopd's usage terms: fresh
// input, output with reasoning, cache reads, cache writes (5m and 1h).
// reasoning says whether the CLI reports reasoning tokens apart (Codex,
// Gemini); Claude reports them inside its output.
func billed(u fakemodel.Usage, reasoning bool) api.Usage {
	out := api.Usage{InputTokens: u.Input, OutputTokens: u.TotalOutput(), CacheReadTokens: u.CacheRead,
		CacheWriteTokens: u.CacheWrite + u.CacheWrite1h}
	if reasoning {
		out.ReasoningTokens = u.Reasoning
	}
	return out
}

// tokens keeps only the token counts of a usage.
func tokens(u api.Usage) api.Usage {
	return api.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}
}

// stepTokens sums the token counts of a run's steps.
func stepTokens(steps []api.Step) api.Usage {
	var s api.Usage
	for _, st := range steps {
		s.InputTokens += st.Usage.InputTokens
		s.OutputTokens += st.Usage.OutputTokens
		s.CacheReadTokens += st.Usage.CacheReadTokens
		s.CacheWriteTokens += st.Usage.CacheWriteTokens
		s.ReasoningTokens += st.Usage.ReasoningTokens
	}
	return s
}

// waitForFile waits until the workspace file exists (the agent's tool call
// created it).
func (e *env) waitForFile(name string, timeout time.Duration) {
	e.t.Helper()
	eventually(e.t, name+" in the workspace", timeout, func() bool {
		_, err := os.Stat(filepath.Join(e.ws, name))
		return err == nil
	})
}

// payload decodes an event's payload.
func payload(t *testing.T, ev api.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev.Payload, &m); err != nil {
		t.Fatalf("payload of %s: %v", ev.Type, err)
	}
	return m
}

var slowTool = fakemodel.Turn{Text: "Running the slow step.", Tool: "touch started && sleep 60",
	Usage: fakemodel.Usage{Input: 1200, Output: 70, CacheRead: 500, CacheWrite: 300, CacheWrite1h: 40, Reasoning: 12}}

// TestRealClaudeKilledStepKeepsItsTokens (issue 15, point 1): Claude Code
// is killed mid-turn, after a billed response and before its result line,
// by `stop --now` and by idle_timeout; the step records every billed token,
// the output ones included (stream-json's assistant lines carry only
// message_start's placeholder).
func TestRealClaudeKilledStepKeepsItsTokens(t *testing.T) {
	for _, how := range []string{"stop --now", "idle_timeout"} {
		t.Run(how, func(t *testing.T) {
			e, a, srv := newRealEnv(t, "claude")
			keys := []string{}
			if how == "idle_timeout" {
				keys = append(keys, "idle_timeout=2s", "max_consecutive_implementation_failures=1")
			}
			a.preset(e, keys...)
			srv.Push(slowTool)
			id := e.start("Run the slow step.")
			e.waitForFile("started", 60*time.Second)
			if how == "stop --now" {
				e.must("stop", id, "--now")
			}
			e.wait(id)
			steps := e.steps(id)
			if len(steps) != 1 {
				t.Fatalf("steps = %+v, want one", steps)
			}
			st := steps[0]
			wantStatus := api.StepCanceled
			if how == "idle_timeout" {
				wantStatus = api.StepFailed
			}
			if st.Status != wantStatus {
				t.Errorf("step %s (%s), want %s", st.Status, st.Error, wantStatus)
			}
			if got, want := tokens(st.Usage), billed(srv.Billed(), false); got != want {
				t.Errorf("recorded %+v\nbilled   %+v", got, want)
			}
			if got, want := tokens(e.status(id).Usage), billed(srv.Billed(), false); got != want {
				t.Errorf("run usage %+v, billed %+v", got, want)
			}
			if st.Usage.OutputTokens != 82 {
				t.Errorf("output tokens %d, want the 82 billed", st.Usage.OutputTokens)
			}
		})
	}
}

// TestRealClaudeAPIOutageWaits (issue 15, point 3, and point 5): 529
// overloaded, 500 and a plain 429 make the run WAIT api_unavailable with a
// doubling back-off, counting no iteration and no failure, across a kill -9
// of the daemon; when the API answers again the run completes; the step's
// error holds Claude's own words. Usage is what the fake billed.
func TestRealClaudeAPIOutageWaits(t *testing.T) {
	e, a, srv := newRealEnv(t, "claude")
	a.preset(e, "max_consecutive_implementation_failures=1")
	srv.Push(fakemodel.Turn{Status: 529}, fakemodel.Turn{Status: 500}, fakemodel.Turn{Status: 429},
		fakemodel.Turn{Text: "All done.\n<promise>COMPLETE</promise>", Usage: fakemodel.Usage{Input: 900, Output: 30, CacheRead: 100}})
	id := e.start("Finish the work.")

	// Two waits, then a daemon crash while the run waits: the third
	// attempt still knows it is the third (derived from persisted steps).
	eventually(t, "two api_unavailable waits", 60*time.Second, func() bool {
		return countWaits(e.events(id), "api_unavailable") >= 2
	})
	e.killDaemon()
	e.startDaemon("--api-backoff", "1s")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d, want 0 (COMPLETED); run %+v", code, e.status(id))
	}
	r := e.status(id)
	if r.Status != api.RunCompleted || r.Iteration != 1 || r.Counters.Implementation != 0 {
		t.Errorf("run %s %q iteration %d counters %+v; want COMPLETED at iteration 1 with no failure counted", r.Status, r.Reason, r.Iteration, r.Counters)
	}
	steps := e.steps(id)
	if len(steps) != 4 {
		t.Fatalf("%d steps, want 4", len(steps))
	}
	wantWords := []string{"API Error: 529 Overloaded", "API Error: 500 Internal server error", "API Error: Request rejected (429) · Rate limited"}
	for i, w := range wantWords {
		if !strings.HasPrefix(steps[i].Error, w) || !strings.Contains(steps[i].Error, "attempt "+string(rune('1'+i))) {
			t.Errorf("step %d error %q, want it to start with %q and name attempt %d", i+1, steps[i].Error, w, i+1)
		}
	}
	// The waits double: 1s, 2s, 4s after each attempt's end.
	var waits []time.Duration
	for _, ev := range e.events(id) {
		if ev.Type == "RUN_WAITING" {
			until, _ := time.Parse(time.RFC3339Nano, payload(t, ev)["until"].(string))
			waits = append(waits, until.Sub(ev.TS.Time).Round(time.Second))
		}
	}
	if len(waits) != 3 || waits[0] != time.Second || waits[1] != 2*time.Second || waits[2] != 4*time.Second {
		t.Errorf("back-offs %v, want [1s 2s 4s]", waits)
	}
	if got, want := tokens(r.Usage), billed(srv.Billed(), false); got != want {
		t.Errorf("run usage %+v, billed %+v", got, want)
	}
}

// TestRealClaudeAPIOutageGivesUp (issue 15, point 3): an API that stays
// overloaded ends the run ABORTED fatal:api_unavailable once max_api_wait
// has passed, with no failure counted.
func TestRealClaudeAPIOutageGivesUp(t *testing.T) {
	e, a, srv := newRealEnv(t, "claude")
	a.preset(e, "max_api_wait=6s")
	srv.SetDefault(fakemodel.Turn{Status: 529})
	id := e.start("Finish the work.")
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d, want 2 (ABORTED)", code)
	}
	r := e.status(id)
	if r.Status != api.RunAborted || r.Reason != "fatal:api_unavailable" || r.Counters.Implementation != 0 || r.Iteration > 1 {
		t.Errorf("run %s %q iteration %d counters %+v; want ABORTED fatal:api_unavailable, nothing counted", r.Status, r.Reason, r.Iteration, r.Counters)
	}
	if !strings.Contains(r.Description, "max_api_wait") || !strings.Contains(r.Description, "529 Overloaded") {
		t.Errorf("description %q names neither max_api_wait nor the API's words", r.Description)
	}
	if n := countWaits(e.events(id), "api_unavailable"); n < 2 {
		t.Errorf("%d waits before giving up, want at least 2", n)
	}
}

// countWaits counts RUN_WAITING events of the given kind.
func countWaits(evs []api.Event, kind string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == "RUN_WAITING" && strings.Contains(string(ev.Payload), `"kind":"`+kind+`"`) {
			n++
		}
	}
	return n
}
