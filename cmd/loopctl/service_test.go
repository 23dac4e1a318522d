package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/daemonconf"
)

func TestRenderUnit(t *testing.T) {
	got := renderUnit(unitConfig{Loopd: "/home/ann/go/bin/loopd", Home: "/home/ann/.local/state/loop",
		Path: "/home/ann/go/bin:/usr/bin:/bin"})
	want := `# Written by loopctl daemon install; remove with loopctl daemon uninstall.
[Unit]
Description=loopd: runs autonomous coding-agent loops

[Service]
Type=simple
Environment=LOOPD_HOME=/home/ann/.local/state/loop
Environment=PATH=/home/ann/go/bin:/usr/bin:/bin
ExecStart=/home/ann/go/bin/loopd --home /home/ann/.local/state/loop
Restart=on-failure
RestartSec=2s
RestartPreventExitStatus=64
KillMode=process
Delegate=yes
TimeoutStopSec=30s

[Install]
WantedBy=default.target
`
	if got != want {
		t.Fatalf("unit:\n%s\nwant:\n%s", got, want)
	}
	// The unit names the settings file, and what it sets now.
	conf := filepath.Join(t.TempDir(), "daemon.conf")
	if err := os.WriteFile(conf, []byte("http = 127.0.0.1:7777\nmax_concurrent_runs=8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	settings, err := daemonconf.Load(filepath.Dir(conf))
	if err != nil {
		t.Fatal(err)
	}
	withConf := renderUnit(unitConfig{Loopd: "/bin/loopd", Home: filepath.Dir(conf), Path: "/bin", Settings: settings})
	if want := "# loopd reads its settings from " + conf + " at every start (now: http=127.0.0.1:7777 max_concurrent_runs=8);\n"; !strings.HasPrefix(withConf, got[:strings.Index(got, "\n")+1]+want) {
		t.Errorf("unit does not name its settings:\n%s", withConf)
	}
	// Spaces, quotes and specifiers survive systemd's parsing.
	odd := renderUnit(unitConfig{Loopd: "/opt/my tools/loopd", Home: `/home/a"b/100%`, Path: "/bin"})
	for _, want := range []string{`ExecStart="/opt/my tools/loopd" --home "/home/a\"b/100%%"`, `Environment="LOOPD_HOME=/home/a\"b/100%%"`} {
		if !strings.Contains(odd, want) {
			t.Errorf("unit lacks %s:\n%s", want, odd)
		}
	}
}

// serviceWorld is a home, a config dir and a loopd on PATH, isolated from
// the machine's.
func serviceWorld(t *testing.T) (unit, loopd, home string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	loopd = filepath.Join(bin, "loopd")
	if err := os.WriteFile(loopd, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	home = filepath.Join(dir, "state")
	t.Setenv("PATH", bin)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("LOOPD_HOME", home)
	t.Setenv("LOOPD_SOCKET", "")
	return filepath.Join(dir, "config", "systemd", "user", "loopd.service"), loopd, home
}

// runService runs daemon install or uninstall with a fake systemd that
// records its systemctl calls (nil: no systemd).
func runService(t *testing.T, calls *[]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := &serviceOptions{globalOptions: &globalOptions{Out: &out, Err: &errOut}}
	o.systemd = func() bool { return calls != nil }
	o.systemctl = func(_ context.Context, a ...string) error {
		*calls = append(*calls, strings.Join(a, " "))
		return nil
	}
	var cmd = installCmd(o)
	if args[0] == "uninstall" {
		cmd = uninstallCmd(o)
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "")
	cmd.SetArgs(args[1:])
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

func TestDaemonInstallPrintChangesNothing(t *testing.T) {
	unit, loopd, home := serviceWorld(t)
	out, _, err := runService(t, nil, "install", "--print")
	if err != nil {
		t.Fatal(err)
	}
	if out != renderUnit(unitConfig{Loopd: loopd, Home: home, Path: os.Getenv("PATH"), Settings: &daemonconf.File{Path: filepath.Join(home, "daemon.conf")}}) {
		t.Errorf("--print printed:\n%s", out)
	}
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Errorf("--print wrote %s", unit)
	}
}

func TestDaemonInstallWithoutSystemd(t *testing.T) {
	unit, loopd, home := serviceWorld(t)
	out, errOut, err := runService(t, nil, "install", "--json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != renderUnit(unitConfig{Loopd: loopd, Home: home, Path: os.Getenv("PATH"), Settings: &daemonconf.File{Path: filepath.Join(home, "daemon.conf")}}) {
		t.Errorf("unit file:\n%s", b)
	}
	for _, want := range []string{"systemctl --user daemon-reload", "systemctl --user enable --now loopd.service", "loginctl enable-linger"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("install did not say to run %q:\n%s", want, errOut)
		}
	}
	var res map[string]any
	if json.Unmarshal([]byte(out), &res) != nil || res["unit"] != unit || res["enabled"] != false {
		t.Errorf("--json = %s", out)
	}
	// Uninstall removes it.
	if _, _, err := runService(t, nil, "uninstall"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Errorf("uninstall left %s", unit)
	}
}

func TestDaemonInstallWithSystemd(t *testing.T) {
	unit, _, _ := serviceWorld(t)
	var calls []string
	if _, errOut, err := runService(t, &calls, "install"); err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	if _, err := os.Stat(unit); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(calls, "; "); got != "daemon-reload; enable --now loopd.service" {
		t.Errorf("systemctl calls: %s", got)
	}
	calls = calls[:0]
	if _, _, err := runService(t, &calls, "uninstall"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(calls, "; "); got != "disable --now loopd.service; daemon-reload" {
		t.Errorf("systemctl calls: %s", got)
	}
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Errorf("uninstall left %s", unit)
	}
}

// systemd itself accepts the unit, paths with spaces, quotes and '%'
// included (where systemd-analyze is installed).
func TestUnitVerifiesWithSystemd(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	dir := filepath.Join(t.TempDir(), "my tools 100%")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	loopd := filepath.Join(dir, "loopd")
	if err := os.WriteFile(loopd, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "loopd.service")
	text := renderUnit(unitConfig{Loopd: loopd, Home: filepath.Join(dir, `st"ate`), Path: "/usr/bin:/bin"})
	if err := os.WriteFile(unit, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s\nunit:\n%s", err, out, text)
	}
}

// A LOOPD_* setting of the installing shell that the service would not
// inherit is named, with where to put it instead.
func TestDaemonInstallWarnsAboutEnvironment(t *testing.T) {
	_, _, home := serviceWorld(t)
	t.Setenv("LOOPD_HTTP", "127.0.0.1:7777")
	_, errOut, err := runService(t, nil, "install", "--print")
	if err != nil {
		t.Fatal(err)
	}
	want := "LOOPD_HTTP=127.0.0.1:7777 is set in this shell, but the service does not inherit it; to keep it, add http = 127.0.0.1:7777 to " + filepath.Join(home, "daemon.conf")
	if !strings.Contains(errOut, want) {
		t.Errorf("install --print did not warn %q:\n%s", want, errOut)
	}
}
