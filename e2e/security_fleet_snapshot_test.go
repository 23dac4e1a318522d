package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A user's token drives runs, not the API node: a start through
// LOOPD_URL whose --set names a file of the API node (its own
// http.token, as an absolute path or ../ out of the clone) is refused
// with 64 naming the key, and the node's token never reaches the run's
// goal (status shows a goal to every token holder). Before the fix, the
// run was created with the owner's token as its goal.
func TestSecurityFleetStartReadsNoFileOfTheAPINode(t *testing.T) {
	db := fleetDatabase(t)
	node := newEnv(t)
	url, owner := node.startAPINode(db)
	u := newEnv(t)
	u.config(u.fakeAgent(), "max_iterations=1")
	as := func(token string, args ...string) result {
		t.Helper()
		return u.loopctlEnv([]string{"LOOPD_URL=" + url, "LOOPD_TOKEN=" + token}, args...)
	}
	r := as(owner, "token", "create", "mallory")
	if r.code != 0 {
		t.Fatalf("token create: exit %d\n%s", r.code, r.stderr)
	}
	mallory := strings.TrimSpace(r.stdout)

	remote := t.TempDir()
	gitIn(t, remote, "init", "-q", "--bare", "-b", "main")
	gitIn(t, u.ws, "init", "-q", "-b", "main")
	gitIn(t, u.ws, "remote", "add", "origin", "file://"+remote)
	gitIn(t, u.ws, "add", "-A")
	gitIn(t, u.ws, "commit", "-q", "-m", "first")
	gitIn(t, u.ws, "push", "-q", "origin", "main")
	if r := as(mallory, "trust"); r.code != 0 {
		t.Fatalf("trust: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	tokenFile := filepath.Join(node.home, "http.token")
	rel, err := filepath.Rel(u.ws, tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{tokenFile, rel, strings.Repeat("../", 12) + strings.TrimPrefix(tokenFile, "/")} {
		r := as(mallory, "start", "--set", "prompt_file="+p)
		if r.code != 64 || !strings.Contains(r.stderr, "prompt_file") || !strings.Contains(r.stderr, "is not a file of the clone") {
			t.Errorf("start --set prompt_file=%s: exit %d, want 64 naming prompt_file\n%s%s", p, r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, owner) {
			t.Fatalf("the API node's token was shown to a user's token")
		}
	}
	list := as(mallory, "list", "--json")
	if list.code != 0 || strings.Contains(list.stdout, owner) || strings.Contains(list.stdout, `"id"`) {
		t.Fatalf("runs after the refusals (want none, and never the node's token): exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}
	if _, err := os.Stat(tokenFile); err != nil {
		t.Fatal(err)
	}
}
