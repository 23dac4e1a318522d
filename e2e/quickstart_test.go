package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's first command must keep working: the quickstart ends
// COMPLETED and leaves the repository clean.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs a full loop")
	}
	repo := repoRoot()
	tmp := t.TempDir()
	cmd := exec.Command(filepath.Join(repo, "examples", "quickstart", "run.sh"))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "LOOPCTL_NO_AUTOSTART=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out)
	}
	for _, want := range []string{"command  agent_command: ./.loop/demo-agent.sh", "COMPLETED", "completed:promise+verify", "4 passed, 0 failed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("quickstart output lacks %q:\n%s", want, out)
		}
	}
	// No daemon is left behind.
	if pids := processesMentioning(tmp); len(pids) > 0 {
		t.Errorf("processes left running: %v", pids)
	}
	// The repository's example project is untouched.
	b, _ := os.ReadFile(filepath.Join(repo, "examples", "quickstart", "project", "calc.go"))
	if strings.Count(string(b), "TODO") != 4 {
		t.Error("the quickstart modified the repository's example project")
	}
}
