package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// follower runs `loopctl events RUN --follow --json` in the background.
type follower struct{ *bgLoopctl }

// caughtUp waits until the follower has printed the event seq (or a later
// one): it has replayed the stored events up to there and follows live.
func (f *follower) caughtUp(t *testing.T, seq int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("the follower to print event %d", seq), 30*time.Second, func() bool {
		out := strings.TrimSpace(f.out.String())
		if out == "" {
			return false
		}
		var ev api.Event
		last := out[strings.LastIndexByte(out, '\n')+1:]
		return json.Unmarshal([]byte(last), &ev) == nil && ev.Seq >= seq
	})
}

func (e *env) follow(args ...string) *follower {
	e.t.Helper()
	return &follower{e.background(append([]string{"events", "--follow", "--json"}, args...)...)}
}

// events waits for the follower to end by itself and decodes its output.
func (f *follower) events(t *testing.T) []api.Event {
	t.Helper()
	select {
	case <-f.done:
		if f.err != nil {
			t.Fatalf("follower: %v", f.err)
		}
	case <-time.After(60 * time.Second):
		_ = f.cmd.Process.Kill()
		t.Fatal("the follower did not end after the run's terminal event")
	}
	var evs []api.Event
	for line := range strings.SplitSeq(strings.TrimSpace(f.out.String()), "\n") {
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("follower line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func seqs(evs []api.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// upToTerminal cuts the stored events after the run's terminal event (the
// postmortem event follows it; a follower ends at the terminal event).
func upToTerminal(evs []api.Event) []api.Event {
	for i, e := range evs {
		if strings.HasPrefix(e.Type, "RUN_") && (e.Type == "RUN_COMPLETED" || e.Type == "RUN_FAILED" || e.Type == "RUN_ABORTED" || e.Type == "RUN_INTERRUPTED") {
			return evs[:i+1]
		}
	}
	return evs
}

// Followers started before the run, and one started mid-run with --after,
// receive exactly the stored events: nothing missed, nothing twice, in
// order, across the replay/live boundary.
func TestFollowersReceiveExactlyTheStoredEvents(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=1 12"), "max_iterations=25")
	id := e.start("goal")
	e.runningStep(id, 1)
	first, second := e.follow(id), e.follow(id)
	now := e.events(id)
	first.caughtUp(t, now[len(now)-1].Seq) // both follow live from here on
	second.caughtUp(t, now[len(now)-1].Seq)
	e.release("go-1")
	e.runningStep(id, 12)
	sofar := e.events(id)
	mid := sofar[len(sofar)/2].Seq
	third := e.follow(id, "--after", strconvI(mid))
	third.caughtUp(t, sofar[len(sofar)-1].Seq) // past the replay: what follows is live
	e.release("go-12")
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d", code)
	}
	stored := upToTerminal(e.events(id))
	if len(stored) < 25*3 {
		t.Fatalf("only %d stored events for 25 iterations", len(stored))
	}
	for name, f := range map[string]*follower{"first": first, "second": second} {
		got := f.events(t)
		if !equalSeqs(seqs(got), seqs(stored)) {
			t.Errorf("%s follower got %d events %v…, stored %d", name, len(got), head(seqs(got)), len(stored))
		}
	}
	var rest []api.Event
	for _, ev := range stored {
		if ev.Seq > mid {
			rest = append(rest, ev)
		}
	}
	if got := third.events(t); !equalSeqs(seqs(got), seqs(rest)) {
		t.Errorf("--after %d follower got %d events, want the %d after it exactly once", mid, len(got), len(rest))
	}
}

func strconvI(n int64) string { b, _ := json.Marshal(n); return string(b) }

func equalSeqs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func head(s []int64) []int64 { return s[:min(len(s), 8)] }

// logs --follow streams a step's output while the step is still running,
// goes on into the next steps, and ends with the run.
func TestLogsFollowStreamsARunningStep(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=1", "FAKE_DONE_AT=2"),
		`verify_command=echo "checking: héllo wörld ✓"; test -f done.txt`)
	id := e.start("goal")
	e.runningStep(id, 1)
	f := e.background("logs", id, "--follow")
	eventually(t, "the running step's output", 20*time.Second, func() bool {
		return strings.Contains(f.String(), "working on iteration 1")
	})
	if r := e.status(id); r.CurrentStep == nil || r.CurrentStep.Seq != 1 {
		t.Fatal("the output arrived after the step ended; it must stream live")
	}
	e.release("go-1")
	select {
	case <-f.done:
	case <-time.After(60 * time.Second):
		t.Fatal("logs --follow did not end with the run")
	}
	out := f.String()
	for _, want := range []string{"==> #1 implementation (iteration 1) <==", "==> #4 verification (iteration 2) <==", "checking: héllo wörld ✓"} {
		if !strings.Contains(out, want) {
			t.Errorf("followed logs lack %q", want)
		}
	}
	// One step, as JSON chunks.
	js := e.must("logs", id, "--step", "2", "--json")
	var chunk struct {
		Seq   int    `json:"seq"`
		Phase string `json:"phase"`
		Text  string `json:"text"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(js, "\n", 2)[0]), &chunk); err != nil || chunk.Seq != 2 ||
		chunk.Phase != "verification" || !strings.Contains(chunk.Text, "héllo wörld ✓") {
		t.Errorf("logs --json = %q (%v)", js, err)
	}
}

func TestPostmortemForEachTerminalStatus(t *testing.T) {
	tests := []struct {
		name   string
		config []string
		agent  []string
		stop   bool
		status api.RunStatus
		reason string
	}{
		{"completed", []string{verifyDone}, []string{"FAKE_DONE_AT=2"}, false, api.RunCompleted, "completed:promise+verify"},
		{"failed", []string{verifyFails}, nil, false, api.RunFailed, "max_consecutive_failures:verification:3"},
		{"aborted", []string{"max_iterations=1"}, nil, false, api.RunAborted, "max_iterations:1"},
		{"interrupted", nil, []string{"FAKE_WAIT_FILE=never"}, true, api.RunInterrupted, "user_stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.startDaemon()
			e.config(append([]string{"agent=command", e.fakeAgent(tt.agent...),
				`postmortem_command=echo "analysing $LOOP_RUN_ID $LOOP_STATUS"; head -n 1 "$LOOP_POSTMORTEM"`}, tt.config...)...)
			id := e.start("goal")
			if tt.stop {
				e.runningStep(id, 1)
				e.must("stop", id, "--now")
			}
			code := e.wait(id)
			var s struct {
				Status      api.RunStatus `json:"status"`
				Reason      string        `json:"reason"`
				Description string        `json:"description"`
				ExitCode    int           `json:"exit_code"`
				Iterations  int           `json:"iterations"`
				DurationMS  *int64        `json:"duration_ms"`
				Usage       *api.Usage    `json:"usage"`
				Phases      map[string]struct {
					Steps, Passed, Failed int
					Longest               int `json:"longest_failure_streak"`
				} `json:"phases"`
				Timeline []json.RawMessage `json:"timeline"`
			}
			out := e.must("postmortem", id, "--json")
			if err := json.Unmarshal([]byte(out), &s); err != nil {
				t.Fatalf("summary.json: %v\n%s", err, out)
			}
			if s.Status != tt.status || s.Reason != tt.reason || s.ExitCode != code || s.Description == "" ||
				s.DurationMS == nil || s.Usage == nil || len(s.Timeline) == 0 || s.Iterations < 1 {
				t.Errorf("summary = %+v (wait exit %d)", s, code)
			}
			if tt.status == api.RunFailed && s.Phases["verification"].Longest != 3 {
				t.Errorf("longest verification streak = %d, want 3", s.Phases["verification"].Longest)
			}
			md := e.must("postmortem", id)
			if !strings.Contains(md, string(tt.status)) || !strings.Contains(md, tt.reason) || !strings.Contains(md, "## Timeline") {
				t.Errorf("postmortem.md:\n%s", md)
			}
			if n := countType(e.events(id), "POSTMORTEM_WRITTEN"); n != 1 {
				t.Errorf("%d POSTMORTEM_WRITTEN events", n)
			}
			logPath := filepath.Join(e.home, "runs", id, "postmortem-command.log")
			eventually(t, "the postmortem command", 20*time.Second, func() bool {
				b, _ := os.ReadFile(logPath)
				return strings.Contains(string(b), "analysing "+id+" "+string(tt.status)) && strings.Contains(string(b), "# Postmortem")
			})
		})
	}
}

// A follower that stops reading does not hold the daemon: the run goes on
// while the stalled stream's socket is full, another follower gets every
// event, and when the stalled client reads again it too gets every event
// in order — its stream waited for it instead of dropping events. (What
// the waiting stream holds is bounded by construction: it reads one page
// of events and writes it before it reads the next. Daemon RSS, under the
// race detector, is too noisy to measure a page against.)
func TestStalledFollowerDoesNotHoldTheDaemon(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	// Every verification fails 300 tests, so each STEP_FINISHED event
	// carries their names (~14 kB) and the stream outgrows a socket buffer
	// within a few dozen iterations.
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=go-%d", "FAKE_WAIT_ITERATION=1"), "max_iterations=100",
		"max_consecutive_implementation_failures=0", "max_consecutive_verification_failures=0",
		`verify_command=for i in $(seq 300); do echo "--- FAIL: TestWidgetKeepsItsShapeUnderLoad$i (0.00s)"; done; echo FAIL; exit 1`)
	id := e.start("goal")
	e.runningStep(id, 1)
	// A raw client that asks to follow and reads nothing until the run has
	// stored several times what a socket buffer holds.
	conn, err := net.Dial("unix", filepath.Join(e.home, "loopd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/runs/%s/events?follow=1 HTTP/1.1\r\nHost: loopd\r\n\r\n", id)
	reader := e.follow(id)
	e.release("go-1")
	full := 4 * sysctlInt(t, "/proc/sys/net/core/wmem_default")
	eventually(t, "the run to store more events than a socket holds", 90*time.Second, func() bool {
		return len(e.must("events", id, "--json")) > full
	})
	_ = conn.SetReadDeadline(time.Now().Add(90 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the stalled stream: %v", err)
	}
	var stalled []api.Event
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.Event
		if err := dec.Decode(&ev); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the stalled stream after %d events: %v", len(stalled), err)
		}
		stalled = append(stalled, ev)
	}
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d", code)
	}
	want := seqs(upToTerminal(e.events(id)))
	if got := seqs(stalled); !slices.Equal(got, want) {
		t.Errorf("the stalled follower got %d events, want %d: %v", len(got), len(want), got)
	}
	if got := seqs(reader.events(t)); !slices.Equal(got, want) {
		t.Errorf("the reading follower got %d events, want %d", len(got), len(want))
	}
}

// sysctlInt reads a numeric kernel setting such as a socket buffer size.
func sysctlInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}
