//go:build unix

package stop

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Seed 001, testing requirement 8.
func TestSlowScriptTimesOut(t *testing.T) {
	ws := t.TempDir()
	// The script starts a child in its group and sleeps; both must die on the timeout.
	writeFile(t, ws, "slow.sh", "#!/bin/sh\nsleep 30 &\necho $! > child.$$.pid\nsleep 1\necho finished\n", 0o755)
	core, logs := observer.New(zapcore.WarnLevel)
	set := Set{
		SuccessConditions: []Condition{CustomScript{Script: "slow.sh"}, And(UserSignal{}, CustomScript{Script: "slow.sh"})},
		Conditions:        []Condition{MaxIterations{Count: 1}},
	}
	e := NewEvaluator(set, Options{ConditionTimeout: 100 * time.Millisecond, Logger: zap.New(core), CacheTTL: time.Hour})
	ev := e.Evaluate(t.Context(), Context{RunID: "r", Step: 1, Iteration: 1, Workspace: ws, UserSignal: true})
	for _, r := range ev.Results[1:] {
		if !r.TimedOut || r.Met || !strings.Contains(r.Reason, "timed out after 100ms") {
			t.Errorf("slow condition: %+v", r)
		}
	}
	if ev.Stop == nil || ev.Stop.Reason != "max_iterations:1" {
		t.Errorf("the limit that was met must still stop the run: %+v", ev.Stop)
	}
	if n := logs.FilterMessage("stop condition timed out").Len(); n != 2 {
		t.Errorf("%d timeout warnings, want 2", n)
	}

	pidFiles, _ := filepath.Glob(filepath.Join(ws, "child.*.pid"))
	if len(pidFiles) == 0 {
		t.Error("the script never started its child")
	}
	for _, f := range pidFiles {
		text, _ := os.ReadFile(f)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(text)))
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("child %d of the timed-out script is still alive", pid)
				syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// A timed-out result is not cached: the next evaluation of the same step tries again.
	ev = e.Evaluate(t.Context(), Context{RunID: "r", Step: 1, Workspace: ws})
	if r := ev.Results[1]; r.Cached || !r.TimedOut {
		t.Errorf("second evaluation: %+v", r)
	}
}

// alive reports whether pid is a live process; a zombie waiting for a slow init to
// reap it is dead.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc: trust kill(0)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) == 0 || fields[0] != "Z"
}
