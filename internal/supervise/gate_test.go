package supervise

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ran reports whether a test step's command (`touch "$STEP_DIR/ran"`) ran.
func ran(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "ran"))
	return err == nil
}

// A gated step waits for Open, then runs and records like any other, in
// both of the wrapper's modes.
func TestGatedStepRunsWhenOpened(t *testing.T) {
	for name, commands := range map[string][]string{
		"one plain command": {`touch "$STEP_DIR/ran"`},
		"several commands":  {`touch "$STEP_DIR/ran"`, "exit 3"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			spec := specIn(dir, commands...)
			p := startGated(t, spec)
			if ran(dir) {
				t.Fatal("the command ran before the step was opened")
			}
			if err := p.Open(); err != nil {
				t.Fatal(err)
			}
			ex := waitDone(t, p)
			want := 0
			if len(commands) > 1 {
				want = 3
			}
			if !ran(dir) || ex.Code != want || !ex.Recorded {
				t.Errorf("ran %v, exit %+v; want it run with exit %d, recorded", ran(dir), ex, want)
			}
			if code, ok := ReadStatus(spec.StatusPath, spec.Tag); !ok || code != want {
				t.Errorf("exits file: %d, %v", code, ok)
			}
			if err := p.Open(); err == nil {
				t.Error("a second Open succeeded")
			}
		})
	}
}

// An abandoned step runs nothing and records nothing: its outcome is not
// the commands'.
func TestAbandonedGatedStepRunsNothing(t *testing.T) {
	dir := t.TempDir()
	spec := specIn(dir, `touch "$STEP_DIR/ran"`)
	p := startGated(t, spec)
	p.Abandon()
	if ex := p.Exit(); ex.Recorded {
		t.Errorf("exit %+v of an abandoned step counts as recorded", ex)
	}
	if ran(dir) {
		t.Error("an abandoned step ran its command")
	}
	if _, ok := ReadStatus(spec.StatusPath, spec.Tag); ok {
		t.Error("an abandoned step recorded a status")
	}
	if err := p.Open(); err == nil {
		t.Error("Open after Abandon succeeded")
	}
}

// The daemon dies (here: a mini daemon exits) after starting a gated step
// and before opening it: the step ends without running its command or
// recording a status, so a restarted daemon finds its outcome lost and
// never takes an unrecorded run of the command for a result.
func TestGatedStepOfADeadDaemonRunsNothing(t *testing.T) {
	dir := t.TempDir()
	id := startDetached(t, dir, `touch "$STEP_DIR/ran"`, "LOOPD_SUPERVISE_TEST_GATED=1")
	eventually(t, "the gated step to end", func() bool { return !alive(id.Pid) })
	if ran(dir) {
		t.Error("the step ran although its daemon never opened it")
	}
	if _, ok := ReadStatus(filepath.Join(dir, "exits"), specIn(dir).Tag); ok {
		t.Error("the step recorded a status")
	}
}

// A TERM that reaches a gated wrapper while it waits does not end the
// wait: opened afterwards, the step runs and records its own status.
func TestTermAtTheGateDoesNotEndTheWait(t *testing.T) {
	dir := t.TempDir()
	spec := specIn(dir, `touch "$STEP_DIR/ran"`)
	p := startGated(t, spec)
	eventually(t, "the wrapper to wait at its gate", func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/wchan")
		return strings.Contains(string(b), "pipe")
	})
	if !p.Signal(syscall.SIGTERM) {
		t.Fatal("TERM not sent")
	}
	// No wait needed: the wrapper ignores TERM while it waits (trap ''),
	// so the kernel discards the signal when it is sent; had the wrapper
	// not ignored it, it would be dead or dying by now, and Open fails.
	if err := p.Open(); err != nil {
		t.Fatal(err)
	}
	if ex := waitDone(t, p); ex.Code != 0 || !ex.Recorded || !ran(dir) {
		t.Errorf("exit %+v, ran %v; want the command run and recorded", ex, ran(dir))
	}
}

// The idle clock of a step this daemon started begins when Watch does,
// however old its log file: a gated step's log can be created long before
// the step is opened.
func TestIdleClockIgnoresAnOldLogFile(t *testing.T) {
	dir := t.TempDir()
	spec := specIn(dir, "sleep 0.5")
	if err := os.WriteFile(spec.LogPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(spec.LogPath, old, old); err != nil {
		t.Fatal(err)
	}
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Watch(t.Context(), Limits{IdleTimeout: 2 * time.Second, LogPath: spec.LogPath}); got != Exited {
		t.Errorf("Watch = %v, want the step to run to its end (%v)", got, Exited)
	}
}

// startGated starts spec's step gated.
func startGated(t *testing.T, spec Spec) *Process {
	t.Helper()
	spec.Gated = true
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runGated starts a gated step, opens it and waits for its end.
func runGated(t *testing.T, spec Spec) Exit {
	t.Helper()
	p := startGated(t, spec)
	if err := p.Open(); err != nil {
		t.Fatal(err)
	}
	return waitDone(t, p)
}

// A gated step's wrapper creates its own log, 0600 whatever the umask,
// and its commands create files under the daemon's umask as usual.
func TestGatedStepCreatesItsLog(t *testing.T) {
	dir := t.TempDir()
	spec := specIn(dir, `echo out; echo err >&2; touch "$STEP_DIR/made"`)
	if ex := runGated(t, spec); ex.Code != 0 || !ex.Recorded {
		t.Fatalf("exit %+v", ex)
	}
	fi, err := os.Stat(spec.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode %v, want 0600", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(spec.LogPath); string(b) != "out\nerr\n" {
		t.Errorf("log %q, want both streams", b)
	}
	mask, _ := strconv.ParseUint(umask, 8, 32)
	made, err := os.Stat(filepath.Join(dir, "made"))
	if err != nil {
		t.Fatal(err)
	}
	if want := os.FileMode(0o666 &^ mask); made.Mode().Perm() != want {
		t.Errorf("a command's file has mode %v, want %v (umask %s)", made.Mode().Perm(), want, umask)
	}
}

// A log the wrapper cannot create fails the step with the shell's
// reason: nothing ran and nothing was recorded.
func TestGatedStepWithoutItsLogRunsNothing(t *testing.T) {
	dir := t.TempDir()
	spec := specIn(dir, `touch "$STEP_DIR/ran"`)
	spec.LogPath = filepath.Join(dir, "missing", "step.log")
	p := startGated(t, spec)
	_ = p.Open() // fails if the wrapper has exited already
	ex := waitDone(t, p)
	if ex.Recorded || !strings.Contains(ex.Failed, spec.LogPath) || !strings.Contains(ex.String(), spec.LogPath) {
		t.Errorf("exit %+v; want it failed, naming %s, not recorded", ex, spec.LogPath)
	}
	if ran(dir) {
		t.Error("the command ran without its log")
	}
	if _, ok := ReadStatus(spec.StatusPath, spec.Tag); ok {
		t.Error("a status was recorded")
	}
}

// A wrapper may wait at its gate for a whole step (the scheduler starts a
// step's process while the step before it runs), and that step may
// remove or replace the file at the log's path meanwhile. Once opened, the
// step's output goes to the file at the path all the same, created again
// 0600; or, when the path cannot be a file any more, the step fails
// naming it, having run nothing.
func TestGatedStepsLogReplacedWhileItWaits(t *testing.T) {
	for name, replace := range map[string]func(path string) error{
		"removed": os.Remove,
		"replaced by a directory": func(path string) error {
			if err := os.Remove(path); err != nil {
				return err
			}
			return os.Mkdir(path, 0o700)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			spec := specIn(dir, `echo out; touch "$STEP_DIR/ran"`)
			p := startGated(t, spec)
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := os.Stat(spec.LogPath); err == nil {
					break // the waiting wrapper created it
				}
				if time.Now().After(deadline) {
					t.Fatal("the gated wrapper did not create its log")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := replace(spec.LogPath); err != nil {
				t.Fatal(err)
			}
			if err := p.Open(); err != nil {
				t.Fatal(err)
			}
			ex := waitDone(t, p)
			fi, err := os.Stat(spec.LogPath)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				if ex.Recorded || !strings.Contains(ex.Failed, spec.LogPath) || ran(dir) {
					t.Errorf("exit %+v, ran %v; want it failed naming %s, nothing run", ex, ran(dir), spec.LogPath)
				}
				return
			}
			if ex.Code != 0 || !ex.Recorded || !ran(dir) {
				t.Fatalf("exit %+v, ran %v", ex, ran(dir))
			}
			if b, _ := os.ReadFile(spec.LogPath); string(b) != "out\n" || fi.Mode().Perm() != 0o600 {
				t.Errorf("the log at the path holds %q, mode %v; want the step's output, 0600", b, fi.Mode().Perm())
			}
		})
	}
}

// A wrapper that waited at its gate enters its working directory again,
// by its path, once opened: the step runs in the directory at that path
// as it is then (one replaced meanwhile, by the step before, included),
// as a process started then would; a directory that is gone fails the
// step with a recorded 126, having run nothing.
func TestGatedStepEntersItsDirectoryWhenOpened(t *testing.T) {
	for _, replaced := range []bool{true, false} {
		t.Run(map[bool]string{true: "replaced", false: "gone"}[replaced], func(t *testing.T) {
			dir := t.TempDir()
			ws := filepath.Join(dir, "ws")
			if err := os.Mkdir(ws, 0o700); err != nil {
				t.Fatal(err)
			}
			spec := specIn(dir, `touch ran-here`)
			spec.Dir = ws
			p := startGated(t, spec)
			if err := os.Rename(ws, ws+".old"); err != nil {
				t.Fatal(err)
			}
			if replaced {
				if err := os.Mkdir(ws, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Open(); err != nil {
				t.Fatal(err)
			}
			ex := waitDone(t, p)
			_, errOld := os.Stat(filepath.Join(ws+".old", "ran-here"))
			_, errNew := os.Stat(filepath.Join(ws, "ran-here"))
			if replaced && (ex.Code != 0 || errNew != nil || errOld == nil) {
				t.Fatalf("exit %+v; ran in the new directory: %v, in the old one: %v", ex, errNew == nil, errOld == nil)
			}
			if !replaced && (ex.Code != 126 || !ex.Recorded || errOld == nil) {
				t.Fatalf("exit %+v, ran in the old directory %v; want a recorded 126, nothing run", ex, errOld == nil)
			}
		})
	}
}

// A command's own exit status 124 is not mistaken for a log the wrapper
// could not create.
func TestGatedStepsOwn124(t *testing.T) {
	dir := t.TempDir()
	if ex := runGated(t, specIn(dir, "exit 124")); ex.Code != 124 || !ex.Recorded || ex.Failed != "" {
		t.Errorf("exit %+v, want the command's recorded 124", ex)
	}
}

// A gated step's stdin is opened only once the step is opened, so it may
// be written after the start; one missing then fails the step with a
// recorded status and the shell's message in the log.
func TestGatedStepOpensItsStdinWhenOpened(t *testing.T) {
	dir := t.TempDir()
	spec := specIn(dir, `cat >"$STEP_DIR/got"`)
	spec.StdinPath = filepath.Join(dir, "prompt")
	p := startGated(t, spec)
	if err := os.WriteFile(spec.StdinPath, []byte("the prompt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Open(); err != nil {
		t.Fatal(err)
	}
	if ex := waitDone(t, p); ex.Code != 0 || !ex.Recorded {
		t.Fatalf("exit %+v", ex)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "got")); string(b) != "the prompt\n" {
		t.Errorf("the command read %q", b)
	}

	dir = t.TempDir()
	spec = specIn(dir, `touch "$STEP_DIR/ran"`)
	spec.StdinPath = filepath.Join(dir, "never-written")
	if ex := runGated(t, spec); ex.Code != 126 || !ex.Recorded {
		t.Errorf("exit %+v, want a recorded 126", ex)
	}
	if code, ok := ReadStatus(spec.StatusPath, spec.Tag); !ok || code != 126 {
		t.Errorf("exits file: %d, %v; want 126", code, ok)
	}
	if ran(dir) {
		t.Error("the command ran without its stdin")
	}
	if b, _ := os.ReadFile(spec.LogPath); !strings.Contains(string(b), "never-written") {
		t.Errorf("log %q does not say which file was missing", b)
	}
}

// Only the wrapper's marker makes early output a log failure: bash as
// /bin/sh may warn about a locale before the wrapper opens its log, and a
// command's own 124 must still be its own.
func TestLogFailure(t *testing.T) {
	for _, tt := range []struct {
		out, want string
		ok        bool
	}{
		{"", "", false},
		{"/bin/sh: warning: setlocale: LC_ALL: cannot change locale (de_DE.UTF-8)\n", "", false},
		{"sh: 1: cannot create /x/0002-verification.log: Is a directory\n" + noLog + "\n",
			"could not create the step's log: sh: 1: cannot create /x/0002-verification.log: Is a directory", true},
		{"/bin/sh: warning: setlocale: LC_ALL\n/bin/sh: /x/a.log: No space left on device\n" + noLog + "\n",
			"could not create the step's log: /bin/sh: warning: setlocale: LC_ALL\n/bin/sh: /x/a.log: No space left on device", true},
	} {
		why, ok := logFailure([]byte(tt.out))
		if why != tt.want || ok != tt.ok {
			t.Errorf("logFailure(%q) = %q, %v; want %q, %v", tt.out, why, ok, tt.want, tt.ok)
		}
	}
}
