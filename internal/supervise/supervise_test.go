package supervise

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// When LOOPD_SUPERVISE_TEST_DAEMON is set, the test binary plays a daemon
// that starts a step (gated, without opening it, when
// LOOPD_SUPERVISE_TEST_GATED is set) and exits at once without waiting for
// it, so the test can adopt a process that is not its child.
func TestMain(m *testing.M) {
	if dir := os.Getenv("LOOPD_SUPERVISE_TEST_DAEMON"); dir != "" {
		spec := specIn(dir, os.Getenv("LOOPD_SUPERVISE_TEST_CMD"))
		spec.Gated = os.Getenv("LOOPD_SUPERVISE_TEST_GATED") != ""
		useCgroups = os.Getenv("LOOPD_SUPERVISE_TEST_NO_CGROUP") == ""
		p, err := Start(spec)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		id := p.Ident() // its start time is read in the background: read it here
		id.StartTicks, _ = StartTicks(id.Pid)
		_ = json.NewEncoder(os.Stdout).Encode(id)
		os.Exit(0)
	}
	code := m.Run()
	// Steps the tests killed by hand leave their cgroups behind.
	PruneCgroups()
	os.Exit(code)
}

func specIn(dir string, commands ...string) Spec {
	return Spec{
		Dir:        dir,
		Commands:   commands,
		Env:        []string{"PATH=" + os.Getenv("PATH"), "STEP_DIR=" + dir},
		LogPath:    filepath.Join(dir, "step.log"),
		StatusPath: filepath.Join(dir, "exits"),
		Tag:        "loopd-step:test:" + dir, // temp dirs are unique
	}
}

func waitDone(t *testing.T, p *Process) Exit {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("step did not end")
	}
	return p.Exit()
}

func alive(pid int) bool {
	if err := unix.Kill(pid, 0); err != nil {
		return false
	}
	// A zombie is not alive for our purposes.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && !strings.HasPrefix(string(b[i+2:]), "Z")
}

// groupHasLiveMembers scans /proc for a non-zombie process in group pgid.
func groupHasLiveMembers(pgid int) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if g, err := unix.Getpgid(pid); err == nil && g == pgid && alive(pid) {
			return true
		}
	}
	return false
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 300 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		commands []string
		wantCode int
		wantLog  string
	}{
		{"success", []string{"echo hello"}, 0, "hello\n"},
		{"exit code", []string{"echo out; echo err >&2; exit 3"}, 3, "out\nerr\n"},
		{"stops at first failure", []string{"echo one", "false", "echo three"}, 1, "\n$ echo one\none\n\n$ false\n"},
		{"all commands", []string{"echo one", "echo two"}, 0, "\n$ echo one\none\n\n$ echo two\ntwo\n"},
		{"exit inside a command ends only that command", []string{"exit 0", "echo after"}, 0, "\n$ exit 0\n\n$ echo after\nafter\n"},
		{"exit in a single command is recorded", []string{"echo a; exit 7; echo b"}, 7, "a\n"},
		{"a single failing builtin", []string{"false"}, 1, ""},
		{"a command that sets its own EXIT trap", []string{"trap 'echo cleanup' EXIT; exit 4"}, 4, "cleanup\n"},
		{"a command that execs", []string{"exec sh -c 'echo replaced; exit 6'"}, 6, "replaced\n"},
		{"command not found", []string{"definitely-not-a-command-xyz"}, 127, ""},
		{"environment and cwd", []string{`echo "$STEP_DIR" | grep -q "$(pwd)"`}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := Start(specIn(dir, tt.commands...))
			if err != nil {
				t.Fatal(err)
			}
			ex := waitDone(t, p)
			if ex.Code != tt.wantCode || !ex.Recorded || ex.Signal != 0 {
				t.Errorf("exit = %+v, want code %d recorded", ex, tt.wantCode)
			}
			code, ok := ReadStatus(filepath.Join(dir, "exits"), specIn(dir).Tag)
			if !ok || code != tt.wantCode {
				t.Errorf("status file = %d, %v; want %d", code, ok, tt.wantCode)
			}
			if tt.wantLog != "" {
				b, _ := os.ReadFile(filepath.Join(dir, "step.log"))
				if string(b) != tt.wantLog {
					t.Errorf("log = %q, want %q", b, tt.wantLog)
				}
			}
		})
	}
}

func TestStdinFromFile(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "prompt")
	if err := os.WriteFile(in, []byte("the prompt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := specIn(dir, "cat")
	spec.StdinPath = in
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	if ex := waitDone(t, p); ex.Code != 0 {
		t.Fatalf("exit %v", ex)
	}
	b, _ := os.ReadFile(spec.LogPath)
	if string(b) != "the prompt\n" {
		t.Errorf("log = %q", b)
	}
}

func TestOwnSessionAndIdentity(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(specIn(dir, "sleep 5"))
	if err != nil {
		t.Fatal(err)
	}
	pgid, _ := unix.Getpgid(p.Pid)
	sid, _ := unix.Getsid(p.Pid)
	if pgid != p.Pid || sid != p.Pid {
		t.Errorf("pgid %d sid %d, want both %d", pgid, sid, p.Pid)
	}
	id, ok := Find(specIn(dir).Tag)
	if !ok || id.Pid != p.Pid || id.StartTicks == 0 || id.BootID == "" {
		t.Fatalf("Find by /proc scan = %+v, %v", id, ok)
	}
	if !Matches(id, specIn(dir).Tag) {
		t.Error("Matches(own identity) = false")
	}
	if Matches(id, "loopd-step:someone-else") {
		t.Error("Matches with another tag = true")
	}
	wrong := id
	wrong.StartTicks++
	if Matches(wrong, specIn(dir).Tag) {
		t.Error("Matches with another start time = true (pid reuse guard)")
	}
	p.Terminate(time.Second)
	if got := p.Ident(); got != id {
		t.Errorf("identity recorded with the step's end = %+v, want %+v", got, id)
	}
}

// A step that ignores SIGTERM and has a child in the background: Terminate
// must leave no process of the group alive.
func TestTerminateKillsWholeGroup(t *testing.T) {
	dir := t.TempDir()
	childPid := filepath.Join(dir, "child.pid")
	p, err := Start(specIn(dir, `trap '' TERM; sleep 300 & echo $! > child.pid; while :; do sleep 0.05; done`))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "background child", func() bool { _, err := os.Stat(childPid); return err == nil })
	b, _ := os.ReadFile(childPid)
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	p.Terminate(200 * time.Millisecond)
	ex := p.Exit()
	if ex.Signal != syscall.SIGKILL || ex.String() != "killed by SIGKILL" {
		t.Errorf("exit = %v, want killed by SIGKILL after the grace period", ex)
	}
	if ex.Recorded {
		t.Error("a killed step must not look recorded")
	}
	eventually(t, "group gone", func() bool { return !alive(child) && !groupHasLiveMembers(p.Pid) })
}

// When the step's commands end by themselves, whatever they left running in
// the background is killed: no orphans.
func TestNoOrphansAfterNaturalExit(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(specIn(dir, `sleep 300 & echo $! > child.pid; exit 4`))
	if err != nil {
		t.Fatal(err)
	}
	if ex := waitDone(t, p); ex.Code != 4 {
		t.Fatalf("exit %v", ex)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "child.pid"))
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	eventually(t, "orphan killed", func() bool { return !alive(child) })
	if p.Signal(syscall.SIGTERM) {
		t.Error("Signal after reap must refuse: the pgid may be reused")
	}
}

// A step that handles SIGTERM gets the grace period to exit cleanly.
func TestTerminateGivesGrace(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(specIn(dir, `trap 'echo cleaned up; exit 9' TERM; echo ready; while :; do sleep 0.02; done`))
	if err != nil {
		t.Fatal(err)
	}
	// The command prints "ready" once its trap is installed: a TERM sent
	// before then would kill it without running the handler.
	eventually(t, "the trap installed", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "step.log"))
		return strings.Contains(string(b), "ready")
	})
	p.Terminate(10 * time.Second)
	b, _ := os.ReadFile(filepath.Join(dir, "step.log"))
	if !strings.Contains(string(b), "cleaned up") {
		t.Errorf("log = %q: the command's TERM handler did not run", b)
	}
	if ex := p.Exit(); ex.Code != 9 {
		t.Errorf("exit = %+v, want the command's own code 9", ex)
	}
}

func TestWatchLimits(t *testing.T) {
	tests := []struct {
		name    string
		command string
		limits  func(Limits) Limits
		cancel  bool
		want    Ending
	}{
		{"exits", "echo hi", func(l Limits) Limits { return l }, false, Exited},
		{"deadline", "sleep 30", func(l Limits) Limits { l.Deadline = time.Now().Add(100 * time.Millisecond); return l }, false, TimedOut},
		{"idle", "echo start; sleep 30", func(l Limits) Limits { l.IdleTimeout = 200 * time.Millisecond; return l }, false, Idle},
		// Runs 2.5× the idle timeout, printing every tenth of it: a margin
		// that a loaded machine's scheduling does not eat.
		{"busy is not idle", "i=0; while [ $i -lt 25 ]; do echo $i; i=$((i+1)); sleep 0.1; done",
			func(l Limits) Limits { l.IdleTimeout = time.Second; return l }, false, Exited},
		{"canceled", "sleep 30", func(l Limits) Limits { return l }, true, Canceled},
		{"detached", "sleep 30", func(l Limits) Limits { ch := make(chan struct{}); close(ch); l.Detach = ch; return l }, false, Detached},
		{"turn ended, lingering", "sleep 30", func(l Limits) Limits { l.Check = func(time.Time) bool { return true }; return l }, false, Lingered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := specIn(dir, tt.command)
			p, err := Start(spec)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			if tt.cancel {
				cancel()
			}
			defer cancel()
			got := p.Watch(ctx, tt.limits(Limits{LogPath: spec.LogPath, Grace: 200 * time.Millisecond}))
			if got != tt.want {
				t.Errorf("Watch = %v, want %v", got, tt.want)
			}
			if tt.want == Detached {
				if p.ended() {
					t.Error("a detached step must keep running")
				}
				p.Terminate(time.Second)
			} else if !p.ended() {
				t.Error("Watch returned before the process ended")
			}
		})
	}
}

// A step started by another (now dead) daemon is adopted: its real exit
// status is learned from the status file when it ends.
func TestAdoptRunningStep(t *testing.T) {
	dir := t.TempDir()
	id := startDetached(t, dir, `echo working; while [ ! -f release ]; do sleep 0.02; done; exit 5`)
	tag := specIn(dir).Tag
	p, err := Adopt(id, tag, filepath.Join(dir, "exits"))
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	select {
	case <-p.Done():
		t.Fatal("adopted step ended early")
	case <-time.After(50 * time.Millisecond):
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ex := waitDone(t, p)
	if ex.Code != 5 || !ex.Recorded {
		t.Errorf("adopted exit = %+v, want recorded code 5", ex)
	}
}

// An adopted step's idle clock starts at its log's last change, but not
// before the step started (Limits.Since): the log of a step whose process
// was started ahead of it was created, and left unchanged, a whole step
// earlier.
func TestAdoptedIdleClockStartsNoEarlierThanTheStep(t *testing.T) {
	dir := t.TempDir()
	id := startDetached(t, dir, `i=0; while [ $i -lt 50 ]; do sleep 0.02; i=$((i+1)); done`) // quiet: its log does not change
	log := specIn(dir).LogPath
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(log, old, old); err != nil {
		t.Fatal(err)
	}
	p, err := Adopt(id, specIn(dir).Tag, filepath.Join(dir, "exits"))
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	ending := p.Watch(context.Background(), Limits{IdleTimeout: 5 * time.Second, LogPath: log, Since: time.Now()})
	if ending != Exited {
		t.Fatalf("Watch = %v; want the step to end by itself, its idle clock started at the step's start", ending)
	}
}

func TestAdoptRefusesWrongIdentity(t *testing.T) {
	dir := t.TempDir()
	id := startDetached(t, dir, `while :; do sleep 0.02; done`)
	t.Cleanup(func() {
		_ = unix.Kill(-id.Pid, unix.SIGKILL)
		eventually(t, "step killed", func() bool { return !groupHasLiveMembers(id.Pid) })
	})
	for name, tc := range map[string]struct {
		id  Identity
		tag string
	}{
		"other tag":        {id, "loopd-step:other"},
		"other start time": {Identity{Pid: id.Pid, StartTicks: id.StartTicks + 1, BootID: id.BootID}, specIn(dir).Tag},
		"other boot":       {Identity{Pid: id.Pid, StartTicks: id.StartTicks, BootID: "not-this-boot"}, specIn(dir).Tag},
		"no pid":           {Identity{}, specIn(dir).Tag},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Adopt(tc.id, tc.tag, filepath.Join(dir, "exits")); err != ErrGone {
				t.Errorf("Adopt = %v, want ErrGone", err)
			}
		})
	}
}

func TestAdoptTerminate(t *testing.T) {
	dir := t.TempDir()
	// `wait $!`, not `wait`: with no operand, a wait that starts after
	// the TERM-ed sleep has been reaped returns 0.
	id := startDetached(t, dir, `sleep 300 & echo $! > child.pid.tmp && mv child.pid.tmp child.pid; wait $!`)
	p, err := Adopt(id, specIn(dir).Tag, filepath.Join(dir, "exits"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "child pid", func() bool { _, err := os.Stat(filepath.Join(dir, "child.pid")); return err == nil })
	b, _ := os.ReadFile(filepath.Join(dir, "child.pid"))
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	p.Terminate(200 * time.Millisecond)
	// The wrapper outlives its TERM-ed commands and records their status.
	if ex := p.Exit(); ex.Code != 128+int(syscall.SIGTERM) {
		t.Errorf("terminated step exit = %+v, want 143", ex)
	}
	eventually(t, "child killed", func() bool { return !alive(child) })
}

func startDetached(t *testing.T, dir, command string, env ...string) Identity {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := newCmd(exe)
	cmd.Env = append(os.Environ(), "LOOPD_SUPERVISE_TEST_DAEMON="+dir, "LOOPD_SUPERVISE_TEST_CMD="+command)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mini daemon: %v", err)
	}
	var id Identity
	if err := json.Unmarshal(out, &id); err != nil {
		t.Fatalf("mini daemon output %q: %v", out, err)
	}
	// The mini daemon exited; its step is now a child of init (or of a
	// subreaper), not of this test.
	return id
}

// An agent that is a child of the step's shell (the usual case: claude is
// started by the command line) gets the grace period to clean up.
func TestTerminateGivesGraceToAChildAgent(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(specIn(dir, `sh -c 'trap "sleep 0.3; echo bye; exit 7" TERM; echo ready; while :; do sleep 0.02; done'`))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "agent ready", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "step.log"))
		return strings.Contains(string(b), "ready")
	})
	p.Terminate(10 * time.Second)
	b, _ := os.ReadFile(filepath.Join(dir, "step.log"))
	if !strings.Contains(string(b), "bye") {
		t.Errorf("log = %q: the agent was killed before its TERM handler finished", b)
	}
	if ex := p.Exit(); ex.Code != 7 || !ex.Recorded {
		t.Errorf("exit = %+v, want the agent's own code 7, recorded", ex)
	}
}

// Without pidfds (old kernels, seccomp, gVisor) a live step is still
// adopted, never taken for lost.
func TestAdoptWithoutPidfds(t *testing.T) {
	orig := pidfdOpen
	pidfdOpen = func(int, int) (int, error) { return -1, unix.ENOSYS }
	defer func() { pidfdOpen = orig }()
	dir := t.TempDir()
	id := startDetached(t, dir, `while [ ! -f release ]; do sleep 0.02; done; exit 6`)
	p, err := Adopt(id, specIn(dir).Tag, filepath.Join(dir, "exits"))
	if err != nil {
		t.Fatalf("Adopt without pidfds: %v", err)
	}
	select {
	case <-p.Done():
		t.Fatal("ended early")
	case <-time.After(100 * time.Millisecond):
	}
	os.WriteFile(filepath.Join(dir, "release"), nil, 0o600)
	if ex := waitDone(t, p); ex.Code != 6 || !ex.Recorded {
		t.Errorf("exit = %+v, want recorded 6", ex)
	}
	if _, err := Adopt(id, specIn(dir).Tag, filepath.Join(dir, "exits")); err != ErrGone {
		t.Errorf("Adopt of an ended step = %v, want ErrGone", err)
	}
}

// When an adopted step ends, what it left running is killed — found by
// its tag, never by signalling a group whose leader is gone.
func TestAdoptedStepLeavesNoOrphans(t *testing.T) {
	dir := t.TempDir()
	id := startDetached(t, dir, `sleep 300 & echo $! > child.pid; while [ ! -f release ]; do sleep 0.02; done`)
	p, err := Adopt(id, specIn(dir).Tag, filepath.Join(dir, "exits"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "child pid", func() bool { _, err := os.Stat(filepath.Join(dir, "child.pid")); return err == nil })
	b, _ := os.ReadFile(filepath.Join(dir, "child.pid"))
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	os.WriteFile(filepath.Join(dir, "release"), nil, 0o600)
	waitDone(t, p)
	eventually(t, "the orphan killed", func() bool { return !alive(child) })
}

// A process outside the step that happens to share nothing but a pgid
// number is never signalled: adopted steps are signalled by tag.
func TestSignalTaggedOnlyTouchesTheStep(t *testing.T) {
	dir := t.TempDir()
	id := startDetached(t, dir, `while :; do sleep 0.02; done`)
	defer unix.Kill(-id.Pid, unix.SIGKILL)
	if n := signalTagged(id.Pid, "loopd-step:someone-else", 0); n != 0 {
		t.Errorf("signalled %d processes of another tag", n)
	}
	if n := signalTagged(id.Pid, specIn(dir).Tag, 0); n == 0 {
		t.Error("found none of the step's own processes")
	}
}

func TestReadStatus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exits")
	os.WriteFile(path, []byte("\nloopd-step:r:1 exit 0\n\nloopd-step:r:2 exit 3\n\nloopd-step:r:10 exit 1\n\nloopd-step:r:3 exi"), 0o600)
	for _, tc := range []struct {
		tag  string
		code int
		ok   bool
	}{
		{"loopd-step:r:1", 0, true},
		{"loopd-step:r:2", 3, true},
		{"loopd-step:r:10", 1, true},
		{"loopd-step:r:3", 0, false}, // cut short: not recorded
		{"loopd-step:r:4", 0, false},
	} {
		if code, ok := ReadStatus(path, tc.tag); code != tc.code || ok != tc.ok {
			t.Errorf("ReadStatus(%s) = %d, %v; want %d, %v", tc.tag, code, ok, tc.code, tc.ok)
		}
	}
	if _, ok := ReadStatus(filepath.Join(t.TempDir(), "missing"), "x"); ok {
		t.Error("a missing file has a status")
	}
}

// A command that execs another program cannot take the leader's place:
// a restarted daemon still finds the step by its tag, and its status is
// still recorded.
func TestFindAStepWhoseCommandExecs(t *testing.T) {
	dir := t.TempDir()
	id := startDetached(t, dir, `exec sh -c 'while [ ! -f release ]; do sleep 0.02; done; exit 8'`)
	found, ok := Find(specIn(dir).Tag)
	if !ok || found.Pid != id.Pid {
		t.Fatalf("Find = %+v, %v; want the leader %d", found, ok, id.Pid)
	}
	p, err := Adopt(found, specIn(dir).Tag, filepath.Join(dir, "exits"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "release"), nil, 0o600)
	if ex := waitDone(t, p); ex.Code != 8 || !ex.Recorded {
		t.Errorf("exit = %+v, want recorded 8", ex)
	}
}

// Without pidfds an adopted step can still be stopped.
func TestTerminateAdoptedWithoutPidfds(t *testing.T) {
	orig := pidfdOpen
	pidfdOpen = func(int, int) (int, error) { return -1, unix.ENOSYS }
	defer func() { pidfdOpen = orig }()
	dir := t.TempDir()
	id := startDetached(t, dir, `while :; do sleep 0.02; done`)
	p, err := Adopt(id, specIn(dir).Tag, filepath.Join(dir, "exits"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.Terminate(200 * time.Millisecond); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Terminate of an adopted step without pidfds did not return")
	}
	eventually(t, "the group gone", func() bool { return !groupHasLiveMembers(id.Pid) })
}

// A step's error names the signal ("killed by SIGTERM"), not its
// description ("killed by terminated").
func TestExitNamesTheSignal(t *testing.T) {
	for _, tc := range []struct {
		ex   Exit
		want string
	}{
		{Exit{Code: -1, Signal: syscall.SIGKILL}, "killed by SIGKILL"},
		{Exit{Code: -1, Signal: syscall.SIGTERM}, "killed by SIGTERM"},
		{Exit{Code: -1, Signal: syscall.SIGSEGV}, "killed by SIGSEGV"},
		{Exit{Code: 3}, "exit code 3"},
	} {
		if got := tc.ex.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.ex, got, tc.want)
		}
	}
}
