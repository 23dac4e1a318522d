package e2e

import (
	"database/sql"
	"fmt"
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
	f.userMust("stop", id, "--now")
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

// pause, a graceful stop and signal sent through an API node act where
// they act on one machine: at the end of the step that runs. The step is
// not killed — after the worker's next lease renewal (it read the
// request then) its agent still runs — and once the step ends the run is
// PAUSED, INTERRUPTED "after the current step", or COMPLETED by its
// user_signal condition, each right after that step.
func TestFleetGracefulRequestsThroughAPINode(t *testing.T) {
	f := newFleet(t, 2) // 0: the API node (gitFleetRun), 1: the worker
	f.files = map[string]string{".loop/stop.json": `{"success_conditions":[{"type":"user_signal"}]}`}
	id, _, _ := f.gitFleetRun("FAKE_WAIT_FILE=go-%d")
	f.start(1)
	wt := filepath.Join(f.workers[1].home, "worktrees", id)
	db, err := sql.Open("pgx", f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// agent waits for iteration it's agent on the worker and returns its pid.
	agent := func(it int) int {
		t.Helper()
		pid := 0
		eventually(t, fmt.Sprintf("iteration %d's agent to run", it), 60*time.Second, func() bool {
			b, _ := os.ReadFile(filepath.Join(wt, ".agent-invocations"))
			for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
				if fs := strings.Fields(l); len(fs) == 3 && fs[0] == strconv.Itoa(it) {
					pid, _ = strconv.Atoi(fs[2])
				}
			}
			return pid > 0
		})
		return pid
	}
	// afterRenewal waits for a renewal of the run's lease that began after
	// now: the worker has read the run's requests since they were sent.
	afterRenewal := func() {
		t.Helper()
		var before int64
		if err := db.QueryRowContext(t.Context(), `SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $2
			FROM runs WHERE id = $1`, id, fleetTTL.Milliseconds()).Scan(&before); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the worker's next lease renewal", 2*fleetHeartbeat+5*time.Second, func() bool {
			var exp int64
			err := db.QueryRowContext(t.Context(), `SELECT lease_expires_at FROM runs WHERE id = $1`, id).Scan(&exp)
			return err == nil && exp >= before
		})
	}
	// holds checks, after a renewal, that the request did not kill the
	// step, then lets the step end and waits for the run to be status.
	holds := func(what string, it int, pid int, status api.RunStatus) api.Run {
		t.Helper()
		afterRenewal()
		if !pidAlive(pid) {
			t.Fatalf("%s through the API node killed iteration %d's agent; it must let the step finish", what, it)
		}
		if r := f.workers[0].status(id); r.Status != api.RunRunning {
			t.Fatalf("after %s the run is %s while its step runs, want RUNNING until the step ends", what, r.Status)
		}
		if err := os.WriteFile(filepath.Join(wt, fmt.Sprintf("go-%d", it)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var r api.Run
		eventually(t, fmt.Sprintf("the run to be %s after %s", status, what), 30*time.Second, func() bool {
			r = f.workers[0].status(id)
			return r.Status == status
		})
		return r
	}

	pid := agent(1)
	f.userMust("pause", id)
	holds("pause", 1, pid, api.RunPaused)
	f.userMust("resume", id)

	pid = agent(2)
	f.userMust("stop", id)
	r := holds("a graceful stop", 2, pid, api.RunInterrupted)
	if r.Reason != "user_stop" || r.Description != "stopped by the user after the current step (loopctl stop)" {
		t.Errorf("a graceful stop through the API node: %s %q %q", r.Status, r.Reason, r.Description)
	}
	f.userMust("resume", id)

	pid = agent(3)
	f.userMust("signal", id)
	r = holds("signal", 3, pid, api.RunCompleted)
	if r.Reason != "condition:user_signal" {
		t.Errorf("signal through the API node: %s %q, want COMPLETED condition:user_signal", r.Status, r.Reason)
	}
	steps := f.workers[0].steps(id)
	if len(steps) != 3 {
		t.Fatalf("%d steps, want 3: one per request, each let finish", len(steps))
	}
	for _, st := range steps {
		if st.Status != api.StepSucceeded {
			t.Errorf("step %d is %s (%s), want SUCCEEDED: no request here kills a step", st.Seq, st.Status, st.Error)
		}
	}
	f.checkInvariants()
}

// userMust runs loopctl as the fleet's user (through the API node, with
// the user's LOOPD_URL and LOOPD_TOKEN) and returns its output; any exit
// but 0 ends the test.
func (f *fleet) userMust(args ...string) string {
	f.t.Helper()
	r := f.user.loopctlEnv(f.userEnv, args...)
	if r.code != 0 {
		f.t.Fatalf("loopctl %s through the API node: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}
