package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// writeDaemonConf writes LOOPD_HOME/daemon.conf.
func (e *env) writeDaemonConf(mode os.FileMode, lines ...string) string {
	e.t.Helper()
	p := filepath.Join(e.home, "daemon.conf")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), mode); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		e.t.Fatal(err)
	}
	return p
}

// daemonInfo is `loopctl daemon status --json` of a running daemon.
func (e *env) daemonInfo() api.DaemonInfo {
	e.t.Helper()
	var info api.DaemonInfo
	out := e.must("daemon", "status", "--json")
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		e.t.Fatalf("daemon status json: %v\n%s", err, out)
	}
	return info
}

// A daemon loopctl starts, first or after a kill -9, runs with the
// settings of LOOPD_HOME/daemon.conf: its dashboard comes back, and the
// systemd unit of `daemon install` reads the same file.
func TestDaemonConfSurvivesACrash(t *testing.T) {
	e := newEnv(t)
	conf := e.writeDaemonConf(0o600,
		"# my daemon",
		"http = 127.0.0.1:0",
		"max_concurrent_runs = 3",
		"log_level = debug")
	auto := []string{"LOOPCTL_NO_AUTOSTART=0"}

	// The first start autostarts loopd with the file's settings.
	r := e.loopctlEnv(auto, "start", "goal", "--set", "agent=command", "--set", "agent_command=cat >/dev/null; sleep 300")
	if r.code != 0 {
		t.Fatalf("autostarting start: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	first := e.daemonInfo()
	if first.HTTP == "" || !strings.HasPrefix(first.HTTP, "127.0.0.1:") || first.Dashboard == "" {
		t.Fatalf("autostarted daemon: http %q, dashboard %q; want the dashboard of %s", first.HTTP, first.Dashboard, conf)
	}
	if first.MaxConcurrent != 3 {
		t.Errorf("autostarted daemon runs %d at once, want max_concurrent_runs = 3", first.MaxConcurrent)
	}
	text := e.must("daemon", "status")
	if !strings.Contains(text, "http    "+first.HTTP+", dashboard "+first.Dashboard) || !strings.Contains(text, "loopctl dashboard") {
		t.Errorf("daemon status does not show the dashboard and how to log in:\n%s", text)
	}
	if !strings.Contains(text, "of 3 slots") {
		t.Errorf("daemon status does not show max_concurrent_runs = 3:\n%s", text)
	}
	var login api.DashboardLogin
	if err := json.Unmarshal([]byte(e.must("dashboard", "--json")), &login); err != nil || !strings.Contains(login.URL, "code=") {
		t.Errorf("loopctl dashboard on the autostarted daemon: %+v, %v", login, err)
	}

	// A crash: the next loopctl command starts it again, dashboard and all.
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the killed daemon to be gone", 10*time.Second, func() bool {
		return e.loopctl("daemon", "status").code == 69
	})
	if r := e.loopctlEnv(auto, "status", id); r.code != 0 {
		t.Fatalf("status after the crash (autostart): exit %d: %s", r.code, r.stderr)
	}
	second := e.daemonInfo()
	if second.PID == first.PID {
		t.Fatalf("the daemon was not restarted (pid %d)", second.PID)
	}
	if second.HTTP == "" || second.Dashboard == "" || second.MaxConcurrent != 3 {
		t.Errorf("daemon autostarted after the crash: http %q, dashboard %q, %d slots; want the settings of %s",
			second.HTTP, second.Dashboard, second.MaxConcurrent, conf)
	}
	log, _ := os.ReadFile(filepath.Join(e.home, "loopd.log"))
	if !strings.Contains(string(log), "DEBUG") {
		t.Errorf("log_level = debug not applied: no DEBUG line in loopd.log")
	}

	// The service reads the same file.
	unit := e.must("daemon", "install", "--print")
	if !strings.Contains(unit, conf) || !strings.Contains(unit, "http=127.0.0.1:0 max_concurrent_runs=3 log_level=debug") {
		t.Errorf("daemon install --print does not carry the settings of %s:\n%s", conf, unit)
	}
	// A daemon that exits 75 because a crashed daemon's child still holds
	// the lock must be restarted: only 64 prevents it.
	if !strings.Contains(unit, "\nRestartPreventExitStatus=64\n") {
		t.Errorf("the unit does not restart on 75 (RestartPreventExitStatus must be 64 alone):\n%s", unit)
	}
}

// The environment overrides daemon.conf, and loopd's flags override both.
func TestDaemonConfPrecedence(t *testing.T) {
	e := newEnv(t)
	e.writeDaemonConf(0o600, "max_concurrent_runs = 3", "http = 127.0.0.1:0")
	e.daemonEnv = []string{"LOOPD_MAX_CONCURRENT_RUNS=5"}
	e.startDaemon()
	if info := e.daemonInfo(); info.MaxConcurrent != 5 || info.HTTP == "" {
		t.Errorf("env over file: %d slots, http %q; want 5 (LOOPD_MAX_CONCURRENT_RUNS) and the file's http", info.MaxConcurrent, info.HTTP)
	}
	e.stopDaemon()
	e.startDaemon("--max-concurrent-runs", "6", "--http", "")
	if info := e.daemonInfo(); info.MaxConcurrent != 6 || info.HTTP != "" {
		t.Errorf("flags over env and file: %d slots, http %q; want 6 and none (--http '')", info.MaxConcurrent, info.HTTP)
	}
	text := e.must("daemon", "status")
	if !strings.Contains(text, "http    none") || !strings.Contains(text, "daemon.conf") {
		t.Errorf("daemon status without a listener does not say how to get one:\n%s", text)
	}
}

// A bad value is refused by loopctl's autostart, by loopd and by daemon
// install, each naming the file, the line and the key; nothing starts.
func TestDaemonConfBadValue(t *testing.T) {
	e := newEnv(t)
	conf := e.writeDaemonConf(0o600, "http = 127.0.0.1:0", "max_concurrent_runs = zero", "log_levl = debug")
	want := []string{conf + ":2: max_concurrent_runs: must be a whole number", conf + ":3: log_levl: unknown setting (did you mean log_level?)"}
	check := func(what string, code int, out string) {
		t.Helper()
		if code != 64 {
			t.Errorf("%s: exit %d, want 64\n%s", what, code, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s does not say %q:\n%s", what, w, out)
			}
		}
	}
	r := e.loopctlEnv([]string{"LOOPCTL_NO_AUTOSTART=0"}, "list")
	check("autostarting list", r.code, r.stderr)
	r = e.loopctl("daemon", "install", "--print")
	check("daemon install --print", r.code, r.stderr)
	r = e.runLoopd()
	check("loopd", r.code, r.stderr)
	if r := e.loopctl("daemon", "status"); r.code != 69 {
		t.Errorf("a daemon runs after the refusals: daemon status exit %d", r.code)
	}
	if _, err := os.Stat(filepath.Join(e.home, "loopd.db")); err == nil {
		t.Errorf("loopd.db was created: a refused start changed something")
	}
}

// A daemon.conf another user can write or owns is refused: whoever
// changes it chooses where the daemon listens and writes.
func TestDaemonConfOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the file to another user")
	}
	for _, tc := range []struct {
		name  string
		setup func(path string) error
		want  string
	}{
		{"writable by others", func(p string) error { return os.Chmod(p, 0o646) }, "is writable by other users (mode 0646)"},
		{"another user's", func(p string) error { return os.Chown(p, 65534, 65534) }, "belongs to uid 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			conf := e.writeDaemonConf(0o600, "http = 127.0.0.1:0")
			if err := tc.setup(conf); err != nil {
				t.Fatal(err)
			}
			r := e.loopctlEnv([]string{"LOOPCTL_NO_AUTOSTART=0"}, "list")
			if r.code != 64 || !strings.Contains(r.stderr, conf) || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("autostart with %s daemon.conf: exit %d, want 64 naming %s and %q:\n%s", tc.name, r.code, conf, tc.want, r.stderr)
			}
			r = e.runLoopd()
			if r.code != 64 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("loopd with %s daemon.conf: exit %d, want 64 and %q:\n%s", tc.name, r.code, tc.want, r.stderr)
			}
			r = e.loopctl("daemon", "install", "--print")
			if r.code != 64 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("daemon install --print with %s daemon.conf: exit %d, want 64 and %q:\n%s", tc.name, r.code, tc.want, r.stderr)
			}
		})
	}
}

// runLoopd runs loopd in the foreground, for a start that must be
// refused: one that starts after all is killed after 15s.
func (e *env) runLoopd(args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "loopd"), args...)
	cmd.Env = e.environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("loopd %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}
