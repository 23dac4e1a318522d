package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

func TestDaemonStatusCmd(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/daemon", func(w http.ResponseWriter, r *http.Request) {
		info := api.DaemonInfo{PID: 4242, Version: "v1.2.3", Home: "/h", Socket: "/h/loopd.sock", ActiveRuns: 2, MaxConcurrent: 4,
			StartedAt: api.Time{Time: time.Now().Add(-90 * time.Minute)}}
		if r.URL.Query().Get("disk") == "1" {
			info.Worktrees = &api.WorktreeDisk{Count: 3, Bytes: 5 << 20, Complete: false}
		}
		writeJSON(w, http.StatusOK, info)
	})
	loopctl(t, f, "daemon", "status").expect(t, exitOK, lines(
		"loopd v1.2.3 running: pid 4242, up 1h30m\n  home    /h\n  socket  /h/loopd.sock\n  runs    2 active of 4 slots\n",
		"  disk    3 run worktree(s), at least 5.0 MiB (measure cut short on a large tree)\n"))
	if q := f.only("GET", "/v1/daemon").Query; q.Get("disk") != "1" {
		t.Errorf("daemon status asked %v, want the disk use", q)
	}
	loopctl(t, f, "daemon", "status", "--json").expect(t, exitOK, lines(`"pid": 4242`, `"count": 3`))
}

// daemon status never starts a daemon: none running is exit 69.
func TestDaemonStatusCmdNotRunning(t *testing.T) {
	r := loopctl(t, nil, "daemon", "status", "--json")
	r.expect(t, exitUnavailable, lines(`"running": false`), "loopctl: no daemon is running at ")
	var v map[string]any
	if err := json.Unmarshal([]byte(r.out), &v); err != nil || !strings.HasSuffix(v["socket"].(string), "loopd.sock") {
		t.Errorf("daemon status --json: %q (%v)", r.out, err)
	}
	f := newFakeAPI(t)
	f.fail("GET /v1/daemon", api.CodeForbidden, "peer uid 1 is not the owner")
	loopctl(t, f, "daemon", "status").expect(t, exitUnavailable, nil, "peer uid 1 is not the owner")
}

// daemon stop asks the daemon to exit and returns once its process is gone.
func TestDaemonStopCmd(t *testing.T) {
	daemon := exec.Command("sleep", "60")
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = daemon.Wait(); close(exited) }()
	t.Cleanup(func() { _ = daemon.Process.Kill() })
	f := newFakeAPI(t)
	f.reply("GET /v1/daemon", api.DaemonInfo{PID: daemon.Process.Pid})
	f.handle("POST /v1/daemon/stop", func(w http.ResponseWriter, r *http.Request) {
		_ = daemon.Process.Kill()
		<-exited // reaped: its pid is gone
		writeJSON(w, http.StatusOK, map[string]any{})
	})
	r := loopctl(t, f, "daemon", "stop", "--kill-steps", "--json")
	r.expect(t, exitOK, lines(`"stopped": true`, `"kill_steps": true`))
	if req := decode[api.DaemonStopRequest](t, f.only("POST", "/v1/daemon/stop")); !req.KillSteps {
		t.Errorf("daemon stop --kill-steps sent %+v", req)
	}
	g := newFakeAPI(t)
	g.reply("POST /v1/daemon/stop", map[string]any{})
	loopctl(t, g, "daemon", "stop").expect(t, exitOK, lines("loopd (pid 1073741824) stopped\n"))
	if req := decode[api.DaemonStopRequest](t, g.only("POST", "/v1/daemon/stop")); req.KillSteps {
		t.Errorf("daemon stop sent %+v", req)
	}
}

func TestDaemonStopCmdErrors(t *testing.T) {
	// Nothing to stop is no failure.
	loopctl(t, nil, "daemon", "stop").expect(t, exitOK, nil, "no daemon is running at ")
	loopctl(t, nil, "daemon", "stop", "--json").expect(t, exitOK, lines(`"stopped": false`, `"running": false`))
	f := newFakeAPI(t)
	f.fail("POST /v1/daemon/stop", api.CodeShutdown, "already shutting down")
	loopctl(t, f, "daemon", "stop").expect(t, exitUnavailable, nil, "already shutting down")
}

func TestVersionCmdWithDaemon(t *testing.T) {
	f := newFakeAPI(t)
	loopctl(t, f, "version").expect(t, exitOK, lines("loopctl "+api.VersionLine()+"\nloopd   v9.9.9-test (running)\n"))
	loopctl(t, f, "version", "--json").expect(t, exitOK, lines(`"loopd": "v9.9.9-test"`))
	loopctl(t, f, "version", "extra").expect(t, exitUsage, nil, `unknown command "extra"`)
}

func TestManCmd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	loopctl(t, nil, "man", dir).expect(t, exitOK, nil, "wrote the man pages into "+dir)
	for _, page := range []string{"loopctl.1", "loopctl-start.1", "loopctl-daemon-stop.1", "loopctl-dashboard.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil || !strings.Contains(string(b), ".TH \"LOOPCTL\" \"1\"") {
			t.Errorf("%s: %v\n%.200s", page, err, b)
		}
	}
	loopctl(t, nil, "man").expect(t, exitUsage, nil, "man needs exactly one DIR")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	loopctl(t, nil, "man", file).expect(t, exitInternal, nil, "create "+file)
}

// Completion offers "last" and the daemon's runs for a RUN, config keys
// for --set and statuses for --status.
func TestCompletion(t *testing.T) {
	f := newFakeAPI(t)
	f.reply("GET /v1/runs", []api.Run{{ID: runID, Status: api.RunRunning, Name: "fix"}, {ID: "ffff000011112222", Status: api.RunFailed, Goal: "make it\nwork"}})
	r := loopctl(t, f, "__complete", "status", "")
	r.expect(t, exitOK, lines("last\tthe newest run in this workspace\n", runID+"\tRUNNING fix\n", "ffff000011112222\tFAILED make it\n"))
	if q := f.only("GET", "/v1/runs").Query; q.Get("limit") != "100" {
		t.Errorf("completion asked %v", q)
	}
	r = loopctl(t, f, "__complete", "wait", "ff")
	if strings.Contains(r.out, runID) || !strings.Contains(r.out, "ffff000011112222") {
		t.Errorf("completing ff offered:\n%s", r.out)
	}
	r = loopctl(t, nil, "__complete", "start", "--set", "max_it")
	r.expect(t, exitOK, lines("max_iterations=\n"))
	r = loopctl(t, nil, "__complete", "list", "--status", "")
	r.expect(t, exitOK, lines("RUNNING\n", "INTERRUPTED\n"))
	// With no daemon, only "last".
	r = loopctl(t, nil, "__complete", "logs", "")
	if !strings.HasPrefix(r.out, "last\t") || strings.Count(r.out, "\t") != 1 {
		t.Errorf("completion without a daemon:\n%s", r.out)
	}
}
