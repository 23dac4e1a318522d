package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A loopctl that cannot open another user's socket says so, names the
// owner, and starts no daemon of its own, whether autostart is on or off.
func TestSocketOfAnotherUserSaysPermissionDenied(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client as another uid")
	}
	e := newEnv(t)
	e.startDaemon()
	sock := filepath.Join(e.home, "loopd.sock")
	// loopctl must be executable by uid 65534; the home stays 0700.
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, autostart := range []string{"1", ""} {
		cmd := exec.Command(filepath.Join(binDir, "loopctl"), "list")
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LOOPD_SOCKET=" + sock, "LOOPCTL_NO_AUTOSTART=" + autostart, "HOME=/nonexistent"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 69 {
			t.Fatalf("autostart=%q: loopctl as uid 65534: %v, want exit 69\n%s", autostart, err, out)
		}
		msg := string(out)
		for _, want := range []string{"permission denied", sock, "uid 0 (root)", "you are uid 65534"} {
			if !strings.Contains(msg, want) {
				t.Errorf("autostart=%q: message lacks %q:\n%s", autostart, want, msg)
			}
		}
		for _, wrong := range []string{"no daemon", "LOOPCTL_NO_AUTOSTART"} {
			if strings.Contains(msg, wrong) {
				t.Errorf("autostart=%q: message says %q, which is not what happened:\n%s", autostart, wrong, msg)
			}
		}
	}
	if n := len(processesWithEnv("LOOPD_SOCKET=" + sock)); n != 0 {
		t.Errorf("loopctl started %d daemon(s) on another user's socket", n)
	}
}
