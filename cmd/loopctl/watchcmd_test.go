package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// fakeRunEvents serves a run's events (after the query's seq) and the run,
// which has ended once every event has been streamed.
func fakeRunEvents(t *testing.T, final api.Run, evs ...api.Event) *fakeAPI {
	f := newFakeAPI(t)
	var streamed atomic.Bool
	f.handle("GET /v1/runs/{ref}/events", func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		for _, ev := range evs[min(after, len(evs)):] {
			b, _ := jsonLine(ev)
			_, _ = w.Write(b)
		}
		streamed.Store(true)
	})
	f.handle("GET /v1/runs/{ref}", func(w http.ResponseWriter, r *http.Request) {
		if !streamed.Load() {
			writeJSON(w, http.StatusOK, api.Run{ID: final.ID, Status: api.RunRunning})
			return
		}
		writeJSON(w, http.StatusOK, final)
	})
	return f
}

// watch, off a terminal, prints a line per event and then how the run
// ended, and exits with the run's code.
func TestWatchCmdPlain(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.Local)
	one := int64(1)
	evs := []api.Event{
		{Seq: 1, Type: "RUN_STARTED", TS: api.Time{Time: at}, Payload: []byte(`{}`)},
		{Seq: 2, Type: "STEP_STARTED", StepID: &one, TS: api.Time{Time: at}, Payload: []byte(`{"seq":1,"phase":"implementation","iteration":1}`)},
		{Seq: 3, Type: "RUN_ABORTED", TS: api.Time{Time: at.Add(time.Second)}, Payload: []byte(`{"reason":"max_iterations:1"}`)},
	}
	f := fakeRunEvents(t, endedRun(api.RunAborted, "max_iterations:1"), evs...)
	r := loopctl(t, f, "watch", "0123")
	r.expect(t, 2, lines("10:00:00  RUN_STARTED", "10:00:00  STEP_STARTED", "10:00:01  RUN_ABORTED",
		"run 0123456789ab ABORTED: max_iterations:1 — the reason, described\n"))
	if n := countLines(r.out); n != 4 {
		t.Errorf("watch printed %d lines, want 3 events and the outcome:\n%s", n, r.out)
	}
	// Every request after the first names the run resolved from "0123".
	for _, req := range f.requests()[1:] {
		if !strings.HasPrefix(req.Path, "/v1/runs/"+runID) {
			t.Errorf("request %s %s does not name the resolved run", req.Method, req.Path)
		}
	}
	if q := f.requests()[1].Query; q.Get("follow") != "1" || q.Get("after") != "0" {
		t.Errorf("events query %v", q)
	}

	g := fakeRunEvents(t, endedRun(api.RunCompleted, "promise"), evs...)
	r = loopctl(t, g, "watch", runID, "--json")
	r.expect(t, exitOK, nil)
	dec := json.NewDecoder(bytes.NewReader([]byte(r.out)))
	var seqs []int64
	for dec.More() {
		var ev api.Event
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("watch --json: %v\n%s", err, r.out)
		}
		seqs = append(seqs, ev.Seq)
	}
	if len(seqs) != 3 || seqs[2] != 3 {
		t.Errorf("watch --json printed events %v, want 1 2 3 and no outcome line:\n%s", seqs, r.out)
	}
}

func TestWatchCmdErrors(t *testing.T) {
	f := newFakeAPI(t)
	f.fail("GET /v1/runs/{ref}", api.CodeNotFound, "no run matches 99")
	loopctl(t, f, "watch", "99").expect(t, exitNotFound, nil, "loopctl: no run matches 99\n")
	loopctl(t, nil, "watch", runID).expect(t, exitUnavailable, nil, "daemon unavailable")
	loopctl(t, f, "watch").expect(t, exitUsage, nil, "loopctl watch needs exactly one RUN")
	g := newFakeAPI(t)
	g.reply("GET /v1/runs/{ref}", api.Run{ID: runID, Status: api.RunRunning})
	g.fail("GET /v1/runs/{ref}/events", api.CodeInternal, "events unreadable")
	loopctl(t, g, "watch", runID, "--plain").expect(t, exitInternal, nil, "loopctl: events unreadable\n")
}
