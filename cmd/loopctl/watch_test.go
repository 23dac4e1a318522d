package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// startedRun is a RUNNING run at its first step, as the daemon describes
// it, with the events that led there.
func startedRun(d *fakeDaemon) api.Run {
	r := runningRun()
	r.Iteration, r.Steps = 1, 1
	r.CurrentStep = &api.Step{Seq: 1, Phase: api.PhaseImplementation, Iteration: 1, Status: api.StepRunning, StartedAt: now()}
	d.setRun(r)
	d.add(event(0, "RUN_CREATED", time.Now(), map[string]any{"run_id": r.ID}),
		event(0, "RUN_STARTED", time.Now(), map[string]any{"run_id": r.ID}),
		stepEvent("STEP_STARTED", 1, api.PhaseImplementation, 1, ""))
	return r
}

type watchResult struct {
	run api.Run
	err error
}

func TestWatchTUIFollowsTheRunToItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDaemon(api.Run{})
		r := startedRun(d)
		d.write(1, "\x1b[1mbuilding\x1b[0m the widget\n", "half a line ✓")
		scr := newFakeScreen(100, 40)
		done := make(chan watchResult, 1)
		go func() {
			run, err := watchTUI(t.Context(), scr, d, api.RunRef{Ref: r.ID}, r)
			done <- watchResult{run, err}
		}()

		synctest.Wait()
		frame := scr.text()
		for _, want := range []string{"RUNNING", "step #1 implementation", "  building the widget", "  half a line ✓", "RUN_STARTED"} {
			if !strings.Contains(frame, want) {
				t.Errorf("first frame lacks %q:\n%s", want, frame)
			}
		}

		// The step ends and verification starts: the view follows the new
		// step's output, and its time runs on the tick.
		d.add(stepEvent("STEP_FINISHED", 1, api.PhaseImplementation, 1, api.StepSucceeded),
			stepEvent("STEP_STARTED", 2, api.PhaseVerification, 1, ""))
		d.endOutput(1)
		r.Steps, r.CurrentStep = 2, &api.Step{Seq: 2, Phase: api.PhaseVerification, Iteration: 1, Status: api.StepRunning, StartedAt: now()}
		d.setRun(r)
		d.write(2, "--- FAIL: TestWidget\n")
		synctest.Wait()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		frame = scr.text()
		for _, want := range []string{"step #2 verification · running 3s", "output · step #2 verification", "--- FAIL: TestWidget", "STEP_FINISHED"} {
			if !strings.Contains(frame, want) {
				t.Errorf("frame lacks %q:\n%s", want, frame)
			}
		}
		if strings.Contains(frame, "building") {
			t.Errorf("the previous step's output is still shown:\n%s", frame)
		}

		ended := r
		ended.Status, ended.Reason, ended.CurrentStep = api.RunAborted, "max_iterations:1", nil
		d.end(ended, event(0, "RUN_ABORTED", time.Now(), map[string]any{"reason": "max_iterations:1"}))
		synctest.Wait()
		select {
		case res := <-done:
			if res.err != nil || res.run.Status != api.RunAborted {
				t.Errorf("watch returned %s, %v; want the ABORTED run", res.run.Status, res.err)
			}
		default:
			t.Fatal("watch goes on after the run ended")
		}
	})
}

func TestWatchTUIQuitLeavesTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDaemon(api.Run{})
		r := startedRun(d)
		scr := newFakeScreen(80, 24)
		done := make(chan watchResult, 1)
		go func() {
			run, err := watchTUI(t.Context(), scr, d, api.RunRef{Ref: r.ID}, r)
			done <- watchResult{run, err}
		}()
		synctest.Wait()
		scr.events <- screenRedraw
		synctest.Wait()
		if scr.all != 1 {
			t.Errorf("%d full redraws after a resize, want 1", scr.all)
		}
		scr.events <- screenQuit
		synctest.Wait()
		if res := <-done; !errors.Is(res.err, errWatchQuit) {
			t.Errorf("after q: %v, want errWatchQuit", res.err)
		}
		// synctest.Test fails if a feed goroutine outlives the view.
	})
}

func TestWatchTUIRestartsOutputAfterDaemonRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDaemon(api.Run{})
		r := startedRun(d)
		d.write(1, "line-before\n")
		scr := newFakeScreen(100, 30)
		go func() { _, _ = watchTUI(t.Context(), scr, d, api.RunRef{Ref: r.ID}, r) }()
		synctest.Wait()
		// The log stream ends although the step runs on (adopted by a
		// restarted daemon): on the next refresh the view reads it again,
		// from the start, without showing any line twice.
		d.endOutput(1)
		synctest.Wait()
		d.change(func() { d.outputEnd[1] = false; d.output[1] = append(d.output[1], "line-after\n") })
		time.Sleep(watchTick)
		synctest.Wait()
		frame := scr.text()
		if strings.Count(frame, "line-before") != 1 || strings.Count(frame, "line-after") != 1 {
			t.Errorf("want before and after once each:\n%s", frame)
		}
	})
}

func TestRunFollowerResumesAfterABrokenStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDaemon(api.Run{})
		r := startedRun(d)
		d.cutAfter = 2 // the daemon restarts after sending two events
		f := newRunFollower(d, api.RunRef{Ref: r.ID})
		var got []int64
		done := make(chan watchResult, 1)
		go func() {
			run, err := f.follow(t.Context(), func(ev api.Event) { got = append(got, ev.Seq) }, nil)
			done <- watchResult{run, err}
		}()
		synctest.Wait()
		ended := r
		ended.Status = api.RunCompleted
		d.end(ended, event(0, "RUN_COMPLETED", time.Now(), nil))
		synctest.Wait()
		res := <-done
		if res.err != nil || res.run.Status != api.RunCompleted {
			t.Fatalf("follow = %s, %v", res.run.Status, res.err)
		}
		if fmt.Sprint(got) != "[1 2 3 4]" {
			t.Errorf("events %v, want each of 1..4 once, in order", got)
		}
		if fmt.Sprint(d.afters[:2]) != "[0 2]" {
			t.Errorf("streams started after %v, want the second after event 2", d.afters)
		}
	})
}

func TestRunFollowerWaitsOutAnUnreachableDaemon(t *testing.T) {
	unavailable := fmt.Errorf("%w: /x/loopd.sock: connection refused", api.ErrUnavailable)
	tests := []struct {
		name     string
		failures int // attempts that fail, one pause apart
		wantErr  error
	}{
		{"back within the retry window", 5, nil},
		{"gone for longer", 100, api.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := newFakeDaemon(api.Run{})
				r := startedRun(d)
				for range tt.failures {
					d.streamErrs = append(d.streamErrs, unavailable)
				}
				ended := r
				ended.Status = api.RunFailed
				d.end(ended, event(0, "RUN_FAILED", time.Now(), nil))
				f := newRunFollower(d, api.RunRef{Ref: r.ID})
				f.retryFor, f.pause = 10*time.Second, time.Second
				retries, events := 0, 0
				run, err := f.follow(t.Context(), func(api.Event) { events++ }, func(error) { retries++ })
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("follow error = %v, want %v", err, tt.wantErr)
				}
				if tt.wantErr == nil && (run.Status != api.RunFailed || events != 4 || retries != tt.failures) {
					t.Errorf("run %s after %d events and %d retries", run.Status, events, retries)
				}
				if tt.wantErr != nil && retries > 11 {
					t.Errorf("%d retries in a 10 s window with 1 s pauses", retries)
				}
			})
		})
	}
}

func TestRunFollowerFinalErrorsAreNotRetried(t *testing.T) {
	d := newFakeDaemon(api.Run{ID: "r1"})
	f := newRunFollower(d, api.RunRef{Ref: "other"})
	calls := 0
	_, err := f.follow(t.Context(), func(api.Event) {}, func(error) { calls++ })
	if !api.IsCode(err, api.CodeNotFound) || calls != 0 {
		t.Errorf("err = %v after %d retries; want not_found at once", err, calls)
	}
}

// A run that ended and was resumed has a terminal event in the middle of
// its history: following goes on until the run has really ended.
func TestRunFollowerOutlastsAResumedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDaemon(api.Run{})
		r := startedRun(d)
		d.add(event(0, "RUN_ABORTED", time.Now(), nil), event(0, "RUN_RESUMED", time.Now(), nil))
		var types []string
		done := make(chan watchResult, 1)
		go func() {
			run, err := newRunFollower(d, api.RunRef{Ref: r.ID}).follow(t.Context(), func(ev api.Event) { types = append(types, ev.Type) }, nil)
			done <- watchResult{run, err}
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("follow ended at the first terminal event of a resumed run")
		default:
		}
		ended := r
		ended.Status = api.RunCompleted
		d.end(ended, event(0, "RUN_COMPLETED", time.Now(), nil))
		if res := <-done; res.run.Status != api.RunCompleted || types[len(types)-1] != "RUN_COMPLETED" {
			t.Errorf("follow = %s, events %v", res.run.Status, types)
		}
	})
}

func TestWatchPlainPrintsALinePerEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDaemon(api.Run{})
		r := startedRun(d)
		time.Sleep(90 * time.Second)
		fin := stepEvent("STEP_FINISHED", 1, api.PhaseImplementation, 1, api.StepFailed)
		fin.Payload, _ = json.Marshal(map[string]any{"seq": 1, "phase": "implementation", "status": "FAILED",
			"error": "exit code 2: \x1b[31merror\x1b[0m: build failed"})
		d.add(fin)
		ended := r
		ended.Status = api.RunFailed
		d.end(ended, event(0, "RUN_FAILED", time.Now(), map[string]any{"reason": "max_consecutive_failures:implementation:1", "description": "after 1 consecutive implementation failures"}))

		var out bytes.Buffer
		run, err := watchPlain(t.Context(), &out, newRunFollower(d, api.RunRef{Ref: r.ID}), false)
		if err != nil || run.Status != api.RunFailed {
			t.Fatalf("watchPlain = %s, %v", run.Status, err)
		}
		text := out.String()
		if strings.Contains(text, "\x1b") {
			t.Errorf("plain output holds escape codes:\n%q", text)
		}
		lines := strings.Split(strings.TrimSpace(text), "\n")
		if len(lines) != 5 {
			t.Fatalf("%d lines, want one per event:\n%s", len(lines), text)
		}
		for i, want := range []string{"RUN_CREATED", "RUN_STARTED", "STEP_STARTED         #1 implementation, iteration 1",
			"STEP_FINISHED        #1 implementation FAILED: exit code 2: error: build failed in 1m30s",
			"RUN_FAILED           max_consecutive_failures:implementation:1 — after 1 consecutive implementation failures"} {
			if !strings.Contains(lines[i], want) {
				t.Errorf("line %d = %q, want %q", i+1, lines[i], want)
			}
		}
	})
}

func TestWatchPlainJSONIsNDJSONOfTheEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFakeDaemon(api.Run{})
		r := startedRun(d)
		d.streamErrs = []error{api.ErrUnavailable} // an outage is not reported in JSON
		ended := r
		ended.Status = api.RunCompleted
		d.end(ended, event(0, "RUN_COMPLETED", time.Now(), map[string]any{"reason": "completed:promise"}))
		var out bytes.Buffer
		if _, err := watchPlain(t.Context(), &out, newRunFollower(d, api.RunRef{Ref: r.ID}), true); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 4 {
			t.Fatalf("%d lines, want 4 events:\n%s", len(lines), out.String())
		}
		for i, l := range lines {
			var ev api.Event
			if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Seq != int64(i+1) {
				t.Errorf("line %d = %q (%v), want event %d", i+1, l, err, i+1)
			}
		}
	})
}
