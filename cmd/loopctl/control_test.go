package main

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

const runID = "0123456789abcdef"

func endedRun(st api.RunStatus, reason string) api.Run {
	return api.Run{ID: runID, Status: st, Reason: reason, Description: "the reason, described"}
}

// wait exits with the run's exit code, prints how it ended, and names the
// run it resolved once in every request after the first.
func TestWaitCmd(t *testing.T) {
	for _, tt := range []struct {
		status api.RunStatus
		code   int
	}{
		{api.RunCompleted, exitOK}, {api.RunFailed, 1}, {api.RunAborted, 2}, {api.RunInterrupted, 3},
	} {
		t.Run(string(tt.status), func(t *testing.T) {
			f := newFakeAPI(t)
			f.reply("GET /v1/runs/{ref}", api.Run{ID: runID, Status: api.RunRunning})
			f.reply("GET /v1/runs/{ref}/wait", endedRun(tt.status, "max_iterations:3"))
			r := loopctl(t, f, "wait", "0123")
			r.expect(t, tt.code, lines("run 0123456789ab "+string(tt.status)+": max_iterations:3 — the reason, described\n"))
			if got := f.only("GET", "/v1/runs/"+runID+"/wait"); got.Query.Get("timeout") != "1m0s" {
				t.Errorf("wait query %v, want the 60s long poll", got.Query)
			}
			f.only("GET", "/v1/runs/0123")
		})
	}
}

func TestWaitCmdJSON(t *testing.T) {
	f := newFakeAPI(t)
	f.reply("GET /v1/runs/{ref}", api.Run{ID: runID, Status: api.RunRunning})
	f.reply("GET /v1/runs/{ref}/wait", endedRun(api.RunCompleted, "all_tasks_done"))
	r := loopctl(t, f, "wait", runID, "--json")
	r.expect(t, exitOK, lines(`"status": "COMPLETED"`, `"reason": "all_tasks_done"`))
}

// A wait that outlasts --timeout exits 124 and says the run goes on.
func TestWaitCmdTimeout(t *testing.T) {
	f := newFakeAPI(t)
	f.reply("GET /v1/runs/{ref}", api.Run{ID: runID, Status: api.RunRunning})
	f.handle("GET /v1/runs/{ref}/wait", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	r := loopctl(t, f, "wait", runID, "--timeout", "100ms")
	r.expect(t, exitTimeout, nil, "run "+runID+" has not ended after 100ms; it goes on")
}

func TestWaitCmdErrors(t *testing.T) {
	t.Run("negative timeout", func(t *testing.T) {
		f := newFakeAPI(t)
		loopctl(t, f, "wait", runID, "--timeout", "-1s").expect(t, exitUsage, nil, "--timeout must be positive")
		if len(f.requests()) != 0 {
			t.Errorf("a refused wait asked the daemon: %+v", f.requests())
		}
	})
	t.Run("not found", func(t *testing.T) {
		f := newFakeAPI(t)
		f.fail("GET /v1/runs/{ref}", api.CodeNotFound, "no run matches nope")
		loopctl(t, f, "wait", "nope").expect(t, exitNotFound, nil, "loopctl: no run matches nope\n")
	})
	t.Run("no RUN", func(t *testing.T) {
		loopctl(t, nil, "wait").expect(t, exitUsage, nil, "loopctl wait needs exactly one RUN")
	})
	t.Run("no daemon", func(t *testing.T) {
		// A daemon that is down is waited for (a restart), within --timeout.
		loopctl(t, nil, "wait", runID, "--timeout", "1500ms").expect(t, exitTimeout, nil, "run "+runID+" has not ended after 1.5s; it goes on")
	})
}

// stop, pause, resume and signal post their request for the run named and
// print its new state; a refusal (conflict) exits 64, a daemon-side
// failure 70.
func TestControlCmds(t *testing.T) {
	running := api.Run{ID: runID, Status: api.RunRunning}
	tests := []struct {
		name   string
		args   []string
		path   string
		answer api.Run
		body   string
		want   string
	}{
		{"stop", []string{"stop", "abc"}, "/stop", running, "{}", "run 0123456789ab: will stop after the current step (use --now to kill it)\n"},
		{"stop --now", []string{"stop", "abc", "--now"}, "/stop", running, `{"now":true}`, "run 0123456789ab: stopping now; its step is being killed\n"},
		{"stop ended", []string{"stop", "abc"}, "/stop", endedRun(api.RunInterrupted, "user_stop"), "{}", "run 0123456789ab INTERRUPTED: user_stop — the reason, described\n"},
		{"pause", []string{"pause", "abc"}, "/pause", running, "{}", "run 0123456789ab will pause after the current step\n"},
		{"pause paused", []string{"pause", "abc"}, "/pause", api.Run{ID: runID, Status: api.RunPaused}, "{}",
			"run 0123456789ab PAUSED; continue it with: loopctl resume 0123456789ab\n"},
		{"resume", []string{"resume", "abc", "--set", "max_iterations=80", "--set", "max_cost=20"}, "/resume", running,
			`{"set":["max_iterations=80","max_cost=20"]}`, "run 0123456789ab resumed (RUNNING)\n"},
		{"signal", []string{"signal", "abc"}, "/signal", running, "{}", "run 0123456789ab: user_signal raised; it takes effect after the current step\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t)
			f.reply("POST /v1/runs/{ref}"+tt.path, tt.answer)
			r := loopctl(t, f, tt.args...)
			if r.code != exitOK || r.out != tt.want {
				t.Errorf("exit %d, stdout %q, want 0, %q (stderr %q)", r.code, r.out, tt.want, r.err)
			}
			if req := f.only("POST", "/v1/runs/abc"+tt.path); strings.TrimSpace(req.Body) != tt.body {
				t.Errorf("request body %q, want %q", req.Body, tt.body)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests, want 1: %+v", n, f.requests())
			}
		})
	}
	for _, verb := range []string{"stop", "pause", "resume", "signal"} {
		t.Run(verb+" refused", func(t *testing.T) {
			f := newFakeAPI(t)
			f.fail("POST /v1/runs/{ref}/"+verb, api.CodeConflict, "run "+runID+" has ended")
			loopctl(t, f, verb, runID).expect(t, exitUsage, nil, "loopctl: run "+runID+" has ended\n")
		})
		t.Run(verb+" internal", func(t *testing.T) {
			f := newFakeAPI(t)
			f.fail("POST /v1/runs/{ref}/"+verb, api.CodeInternal, "database is locked")
			loopctl(t, f, verb, runID).expect(t, exitInternal, nil, "loopctl: database is locked\n")
		})
		t.Run(verb+" JSON", func(t *testing.T) {
			f := newFakeAPI(t)
			f.reply("POST /v1/runs/{ref}/"+verb, api.Run{ID: runID, Status: api.RunPaused})
			loopctl(t, f, verb, runID, "--json").expect(t, exitOK, lines(`"id": "`+runID+`"`, `"status": "PAUSED"`))
		})
	}
}

// "last" is resolved in the workspace of -C: the daemon is asked for the
// newest run there.
func TestControlCmdLast(t *testing.T) {
	ws := t.TempDir()
	f := newFakeAPI(t)
	f.reply("POST /v1/runs/{ref}/pause", api.Run{ID: runID, Status: api.RunRunning})
	loopctl(t, f, "pause", "last", "-C", ws).expect(t, exitOK, lines("will pause"))
	if got := f.only("POST", "/v1/runs/last/pause").Query.Get("workspace"); got != ws {
		t.Errorf("workspace %q, want %q", got, ws)
	}
	loopctl(t, f, "pause", "last", "-C", ws+"/missing").expect(t, exitUsage, nil, "is not a directory")
}

func TestPostmortemCmd(t *testing.T) {
	f := newFakeAPI(t)
	f.reply("GET /v1/runs/{ref}/postmortem", api.Postmortem{RunID: runID, Markdown: "# Run report\n\nit ended\n", Summary: []byte(`{"status":"FAILED"}`)})
	r := loopctl(t, f, "postmortem", runID)
	if r.code != 0 || r.out != "# Run report\n\nit ended\n" {
		t.Errorf("postmortem: %d %q %q", r.code, r.out, r.err)
	}
	r = loopctl(t, f, "postmortem", runID, "--json")
	if r.code != 0 || r.out != "{\"status\":\"FAILED\"}\n" {
		t.Errorf("postmortem --json: %d %q %q", r.code, r.out, r.err)
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	g := newFakeAPI(t)
	g.fail("GET /v1/runs/{ref}/postmortem", api.CodeConflict, "run "+runID+" has not ended")
	loopctl(t, g, "postmortem", runID).expect(t, exitUsage, nil, "has not ended")
}

// A daemon that goes away while wait waits is waited for (a restart),
// and the wait goes on to the run's end.
func TestWaitCmdRidesOutARestart(t *testing.T) {
	f := newFakeAPI(t)
	f.reply("GET /v1/runs/{ref}", api.Run{ID: runID, Status: api.RunRunning})
	var calls atomic.Int32
	f.handle("GET /v1/runs/{ref}/wait", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			// The daemon dies mid-request: the connection breaks.
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			c.Close()
			return
		}
		writeJSON(w, http.StatusOK, endedRun(api.RunCompleted, "promise"))
	})
	start := time.Now()
	loopctl(t, f, "wait", runID).expect(t, exitOK, lines("COMPLETED: promise"))
	if n := calls.Load(); n != 2 {
		t.Errorf("%d waits, want 2 (one broken, one answered): %+v", n, f.requests())
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the retry took %s", time.Since(start))
	}
}

// A daemon that is shutting down when wait begins is waited for, and the
// wait goes on with the daemon that follows it.
func TestWaitCmdRidesOutADaemonDownAtTheStart(t *testing.T) {
	f := newFakeAPI(t)
	var pings atomic.Int32
	f.handle("GET /v1/daemon", func(w http.ResponseWriter, r *http.Request) {
		if pings.Add(1) == 1 {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": api.Error{Code: api.CodeShutdown, Message: "shutting down"}})
			return
		}
		writeJSON(w, http.StatusOK, api.DaemonInfo{PID: daemonPID})
	})
	f.reply("GET /v1/runs/{ref}", api.Run{ID: runID, Status: api.RunRunning})
	f.reply("GET /v1/runs/{ref}/wait", endedRun(api.RunCompleted, "promise"))
	loopctl(t, f, "wait", "0123").expect(t, exitOK, lines("run 0123456789ab COMPLETED: promise"))
	if n := pings.Load(); n != 2 {
		t.Errorf("%d pings, want 2 (one refused, one answered)", n)
	}
	f.only("GET", "/v1/runs/"+runID+"/wait")
}
