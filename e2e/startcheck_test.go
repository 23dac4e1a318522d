package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An agent preset whose program is not on the daemon's PATH is refused
// by start, naming it and saying how to install it; nothing is created
// (it was a run that aborted a moment later, seen only in status).
func TestStartRefusesAnAgentNotOnThePath(t *testing.T) {
	e := newEnv(t)
	e.path = "/usr/bin:/bin" // no agent CLI on it
	e.startDaemon()
	e.config("agent=claude")
	e.trust()
	r := e.loopctl("start", "goal")
	if r.code != 64 {
		t.Fatalf("start: exit %d, want 64\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{`"claude"`, "not on the daemon's PATH (/usr/bin:/bin)", "install Claude Code", "nothing was created"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("start does not say %q:\n%s", want, r.stderr)
		}
	}
	if n := e.runCount(); n != 0 {
		t.Errorf("%d runs were created", n)
	}
}

// The PATH a step has is the daemon's with the env file's on top: a
// preset's program found only on the env file's PATH starts; one that
// disappears after the start ends the run ABORTED fatal:agent_not_found
// before its next step, as before.
func TestAgentOnTheEnvFilesPathStartsAndOneThatDisappearsAborts(t *testing.T) {
	e := newEnv(t)
	e.path = "/usr/bin:/bin"
	e.startDaemon()
	bin := filepath.Join(e.home, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// A claude that works once, then uninstalls itself.
	claude := filepath.Join(bin, "claude")
	script := "#!/bin/sh\ntouch \"" + filepath.Join(e.home, "claude-ran") + "\"\nrm -f \"$0\"\necho working\n"
	if err := os.WriteFile(claude, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e.writeFile(".env", "PATH="+bin+":/usr/bin:/bin\nIS_SANDBOX=1\n", 0o600)
	e.config("agent=claude", "max_iterations=5")
	e.trust()
	r := e.loopctl("start", "goal")
	if r.code != 0 {
		t.Fatalf("start with the agent on the env file's PATH: exit %d\n%s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d, want 2 (ABORTED)", code)
	}
	if _, err := os.Stat(filepath.Join(e.home, "claude-ran")); err != nil {
		t.Fatal("the agent found on the env file's PATH never ran")
	}
	st := e.status(id)
	if st.Reason != "fatal:agent_not_found" || !strings.Contains(st.Description, "install Claude Code") || st.Steps != 1 {
		t.Errorf("run = %s %q after %d steps: %q; want fatal:agent_not_found after the one step", st.Status, st.Reason, st.Steps, st.Description)
	}
}

// signal on a run that has no user_signal condition is refused: raising
// it would do nothing.
func TestSignalWithoutAUserSignalConditionIsRefused(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go"), "max_iterations=1")
	id := e.start("goal")
	e.runningStep(id, 1)
	r := e.loopctl("signal", id)
	if r.code != 64 {
		t.Fatalf("signal: exit %d, want 64\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"run " + id + " has no user_signal stop condition", `{"type": "user_signal"}`, "loopctl stop " + id[:8]} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("signal does not say %q:\n%s", want, r.stderr)
		}
	}
	if e.status(id).UserSignal {
		t.Error("the refused signal was recorded")
	}
	e.release("go")
	e.wait(id)
}

// A worktree run's start warns of the checkout's uncommitted changes only
// when they matter: the untracked .loop/, env file and prompt file the
// getting-started guide has the user create are loopd's own.
func TestWorktreeStartWarnsOnlyOfChangesThatMatter(t *testing.T) {
	e := newEnv(t)
	e.gitRepo(map[string]string{"main.go": "package main\n"})
	e.config("agent=command", e.fakeAgent(), "isolation=worktree", "max_iterations=1")
	e.writeFile(".loop/stop.json", `{"conditions":[{"type":"max_iterations","count":1}]}`, 0o644)
	e.writeFile("PROMPT.md", "make it work\n", 0o644)
	e.startDaemon()
	start := func() string {
		t.Helper()
		e.trust()
		r := e.loopctl("start")
		if r.code != 0 {
			t.Fatalf("start: exit %d\n%s", r.code, r.stderr)
		}
		e.wait(strings.TrimSpace(r.stdout))
		return r.stderr
	}
	if out := start(); strings.Contains(out, "uncommitted") {
		t.Errorf("start warned of loopd's own untracked files (.loop/, .env, PROMPT.md):\n%s", out)
	}
	e.writeFile("notes.txt", "mine\n", 0o644)
	if out := start(); !strings.Contains(out, "uncommitted changes in notes.txt;") {
		t.Errorf("start did not warn of the untracked notes.txt:\n%s", out)
	}
	os.Remove(filepath.Join(e.ws, "notes.txt"))
	e.writeFile("main.go", "package main // edited\n", 0o644)
	if out := start(); !strings.Contains(out, "uncommitted changes in main.go;") {
		t.Errorf("start did not warn of the edited main.go:\n%s", out)
	}
}

// wait and events --follow ride out a daemon that is down at their first
// request, as they ride out one that restarts later (they exited 69 at
// once): the run goes on without the daemon, and so do they.
func TestWaitAndFollowRideOutADaemonDownAtTheStart(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go", "FAKE_DONE_AT=1"))
	id := e.start("goal")
	e.runningStep(id, 1)
	e.stopDaemon() // the step goes on, for the next daemon to adopt
	waited, followed := make(chan result, 1), make(chan result, 1)
	go func() { waited <- e.loopctl("wait", id) }()
	go func() { followed <- e.loopctl("events", id, "--follow") }()
	time.Sleep(500 * time.Millisecond) // the daemon stays down a while (the outage they ride out)
	for name, ch := range map[string]chan result{"wait": waited, "events --follow": followed} {
		select {
		case r := <-ch:
			t.Fatalf("%s gave up on a daemon that was down at its first request: exit %d %s", name, r.code, r.stderr)
		default:
		}
	}
	e.startDaemon()
	e.release("go")
	for name, ch := range map[string]chan result{"wait": waited, "events --follow": followed} {
		select {
		case r := <-ch:
			if r.code != 0 {
				t.Errorf("%s: exit %d %s", name, r.code, r.stderr)
			}
			if name == "events --follow" && (!strings.Contains(r.stdout, "RUN_CREATED") || !strings.Contains(r.stdout, "RUN_COMPLETED")) {
				t.Errorf("events --follow did not print the run's events from the start to its end:\n%s", r.stdout)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not return", name)
		}
	}
}
