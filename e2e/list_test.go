package e2e

import (
	"strings"
	"testing"
)

// list --status with no match says that no run has that status, not that
// the workspace has no runs.
func TestListStatusWithNoMatch(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"), verifyDone)
	id := e.start("goal")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "--status", "failed"}, "no runs with status FAILED in this workspace\n"},
		{[]string{"list", "--status", "RUNNING", "--all-workspaces"}, "no runs with status RUNNING in any workspace\n"},
	} {
		r := e.loopctl(c.args...)
		if r.code != 0 || r.stderr != c.want || r.stdout != "" {
			t.Errorf("loopctl %v: exit %d, stdout %q, stderr %q; want %q", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
	if r := e.loopctl("list", "--status", "COMPLETED"); r.code != 0 || !strings.Contains(r.stdout, id[:12]) {
		t.Errorf("list --status COMPLETED: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// A workspace with no runs at all still says so.
	e.ws = t.TempDir()
	if r := e.loopctl("list", "--status", "FAILED"); r.stderr != "no runs with status FAILED in this workspace\n" {
		t.Errorf("list --status FAILED in an empty workspace: %q", r.stderr)
	}
	if r := e.loopctl("list"); r.code != 0 || r.stderr != "no runs in this workspace\n" {
		t.Errorf("list in an empty workspace: exit %d %q", r.code, r.stderr)
	}
}
