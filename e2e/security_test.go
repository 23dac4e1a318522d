package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A secret in the workspace's env_file reaches the agent's environment
// but never loopd's own records: logs, events, status, steps, postmortem.
func TestEnvFileSecretsDoNotLeak(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	const secret = "sk-loopd-test-7f3a9c21e8b4d605"
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1", "API_KEY="+secret),
		`verify_command=case "$API_KEY" in sk-loopd-test-*) echo "the key reached the command";; *) exit 1;; esac`)
	id := e.start("goal")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d: the command did not get the secret", code)
	}
	places := map[string]string{
		"daemon log": e.daemonLog(),
		"events":     e.must("events", id, "--json"),
		"status":     e.must("status", id, "--json", "--debug"),
		"steps":      e.must("steps", id, "--json"),
		"postmortem": e.must("postmortem", id) + e.must("postmortem", id, "--json"),
	}
	db, _ := os.ReadFile(filepath.Join(e.home, "loopd.db"))
	wal, _ := os.ReadFile(filepath.Join(e.home, "loopd.db-wal"))
	places["database"] = string(db) + string(wal)
	for where, text := range places {
		if strings.Contains(text, secret) {
			t.Errorf("the env_file secret appears in the %s", where)
		}
	}
	if !strings.Contains(e.must("logs", id), "the key reached the command") {
		t.Error("the secret did not reach the verification command")
	}
}
