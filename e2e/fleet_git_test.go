package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A fleet worker's agents never see how to reach the fleet's database or
// API: the worker here gets its store through LOOPD_STORE (the URL with
// its password) and has PGPASSWORD and LOOPD_TOKEN in its environment;
// the agent dumps its environment, which holds none of them (and no
// GIT_ASKPASS or credential helper loopd would have added).
func TestFleetAgentEnvHasNoCredentials(t *testing.T) {
	f := newFleet(t, 1)
	e := f.workers[0]
	e.daemonEnv = append(e.daemonEnv, "LOOPD_STORE="+f.url, "PGPASSWORD=pg-s3cret", "LOOPD_TOKEN=tok-s3cret")
	e.startDaemon("--worker-id", f.ids[0], "--lease-ttl", fleetTTL.String(),
		"--heartbeat", fleetHeartbeat.String(), "--fence-margin", fleetMargin.String())

	ws := filepath.Join(t.TempDir(), "ws")
	dump := filepath.Join(t.TempDir(), "agent-env")
	agent := filepath.Join(t.TempDir(), "dump-env-agent")
	script := "#!/bin/sh\nenv > " + dump + ".tmp && mv " + dump + ".tmp " + dump + "\nexec " + scriptedAgent() + " \"$@\"\n"
	if err := os.MkdirAll(filepath.Join(ws, ".loop"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		agent:                             script,
		filepath.Join(ws, ".loop/config"): "agent=command\nagent_command=" + agent + "\nmax_iterations=2\n",
		filepath.Join(ws, ".env"):         "FAKE_DONE_AT=1\n",
	} {
		if err := os.WriteFile(name, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"trust"}, {"start", "goal"}} {
		if r := e.loopctlAt(ws, nil, args...); r.code != 0 {
			t.Fatalf("loopctl %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	var env []byte
	eventually(t, "the agent to dump its environment", 60*time.Second, func() bool {
		var err error
		env, err = os.ReadFile(dump)
		return err == nil
	})
	if !strings.Contains(string(env), "LOOP_RUN_ID=") {
		t.Fatalf("the dump is not the agent's environment:\n%s", env)
	}
	for _, bad := range []string{"LOOPD_STORE=", "PGPASSWORD=", "LOOPD_TOKEN=", "pg-s3cret", "tok-s3cret", "postgres://", "GIT_ASKPASS=", "credential.helper"} {
		if strings.Contains(string(env), bad) {
			t.Errorf("the agent's environment holds %q:\n%s", bad, env)
		}
	}
}
