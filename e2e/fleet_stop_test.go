package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// stopNowOutcome is what a stop --now leaves: the run's status, reason
// and description, and its one step's status and error.
type stopNowOutcome struct {
	status      api.RunStatus
	reason      string
	description string
	step        api.StepStatus
	stepError   string
}

func outcomeOf(r api.Run, steps []api.Step) stopNowOutcome {
	o := stopNowOutcome{status: r.Status, reason: r.Reason, description: r.Description}
	if len(steps) == 1 {
		o.step, o.stepError = steps[0].Status, steps[0].Error
	}
	return o
}

// embeddedStopNow is a stop --now of a run whose agent works for 600 s,
// on one machine: what the fleet must do the same.
func embeddedStopNow(t *testing.T) stopNowOutcome {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_SLEEP=600"))
	id := e.start("goal")
	e.runningStep(id, 1)
	e.must("stop", id, "--now")
	if code := e.wait(id); code != 3 {
		t.Fatalf("embedded: wait exit %d, want 3 (INTERRUPTED)", code)
	}
	return outcomeOf(e.status(id), e.steps(id))
}

// A `loopctl stop --now` sent through an API node reaches the worker that
// runs the run at its next lease renewal: the agent — a step of 600 s —
// is dead within a heartbeat (plus the kill and a little slack), the step
// CANCELED and the run INTERRUPTED user_stop with the same description as
// on one machine, written by the worker's fenced writes (checkInvariants:
// the epoch is the claims', no step left RUNNING). Before the renewal
// carried the stop, the agent ran to its step's end.
func TestFleetStopNowThroughAPINode(t *testing.T) {
	want := embeddedStopNow(t)
	if want.status != api.RunInterrupted || want.reason != "user_stop" || want.step != api.StepCanceled {
		t.Fatalf("embedded stop --now left %+v, want INTERRUPTED user_stop with a CANCELED step", want)
	}

	f := newFleet(t, 2) // 0: the API node (gitFleetRun), 1: the worker
	id, _, _ := f.gitFleetRun("FAKE_SLEEP=600", "FAKE_EARLY_USAGE=1")
	f.start(1)
	invocations := filepath.Join(f.workers[1].home, "worktrees", id, ".agent-invocations")
	var pid int
	eventually(t, "the worker to run the run's agent", 60*time.Second, func() bool {
		b, _ := os.ReadFile(invocations)
		if fs := strings.Fields(string(b)); len(fs) == 3 {
			pid, _ = strconv.Atoi(fs[2])
		}
		return pid > 0
	})
	user := func(args ...string) string {
		t.Helper()
		r := f.user.loopctlEnv(f.userEnv, args...)
		if r.code != 0 {
			t.Fatalf("loopctl %s through the API node: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	if r := f.workers[0].status(id); r.Status != api.RunRunning || r.Worker != f.ids[1] || r.CurrentStep == nil {
		t.Fatalf("run %s is %s on worker %q, want RUNNING a step on %s", id, r.Status, r.Worker, f.ids[1])
	}
	if info := f.daemonInfo(0); info.Worker != "" {
		t.Fatalf("node 0 is worker %q, want an API-only node", info.Worker)
	}

	stopDeaths := make(chan struct{})
	defer close(stopDeaths)
	deaths := watchDeaths([]int{pid}, stopDeaths)
	sent := time.Now()
	user("stop", id, "--now")
	// The renewal that carries the stop comes within a heartbeat; the
	// scripted agent dies at the kill's SIGTERM. On a loaded machine a
	// renewal may be late by a second or two.
	limit := fleetHeartbeat + 3*time.Second
	select {
	case dead := <-deaths:
		took := dead[pid].Sub(sent)
		t.Logf("the agent died %s after stop --now through the API node (heartbeat %s)", took.Round(time.Millisecond), fleetHeartbeat)
		if took > limit {
			t.Errorf("the agent died %s after the stop, want ≤ %s", took, limit)
		}
	case <-time.After(limit + 2*time.Second):
		t.Fatalf("the agent (pid %d) still runs %s after stop --now through the API node: the worker did not carry the stop out "+
			"(it would at the step's end, 600 s)", pid, limit+2*time.Second)
	}

	eventually(t, "the run to end", 30*time.Second, func() bool { return f.workers[0].status(id).Status.Terminal() })
	if code := f.user.loopctlEnv(f.userEnv, "wait", id, "--timeout", "10s").code; code != 3 {
		t.Errorf("wait through the API node: exit %d, want 3 (INTERRUPTED)", code)
	}
	run := f.workers[0].status(id)
	steps := f.workers[0].steps(id)
	if got := outcomeOf(run, steps); len(steps) != 1 || got != want {
		t.Errorf("through the API node stop --now left %+v (%d steps), want what it leaves on one machine: %+v", got, len(steps), want)
	}
	if run.Worker != f.ids[1] {
		t.Errorf("run %s last held by %q, want %s", id, run.Worker, f.ids[1])
	}
	evs := f.workers[0].events(id)
	if n := countType(evs, "RUN_INTERRUPTED"); n != 1 {
		t.Errorf("%d RUN_INTERRUPTED events, want 1: %v", n, eventTypes(evs))
	}
	if log := f.workers[1].daemonLog(); !strings.Contains(log, "stop --now recorded for the run: killing its step") {
		t.Errorf("the worker's log does not say it carried the stop out:\n%s", log)
	}
	eventually(t, "the worker to let the ended run's lease go", 10*time.Second, func() bool { return len(f.daemonInfo(1).Leases) == 0 })
	f.checkInvariants()
}
