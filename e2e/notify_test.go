package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// receiver is a local incoming-webhook endpoint (127.0.0.1 only) that
// records every body it is sent and answers as told.
type receiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	bodies  [][]byte
	answers []int         // status per request, in order; 200 once they run out
	hold    chan struct{} // when set, the next request blocks until it is closed
	held    chan struct{} // closed when a request is being held
}

func newReceiver(t *testing.T, answers ...int) *receiver {
	r := &receiver{answers: answers}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		hold, held := r.hold, r.held
		r.hold = nil
		r.mu.Unlock()
		if hold != nil {
			close(held)
			select {
			case <-hold:
			case <-req.Context().Done():
			}
			return // no answer: the sender died or gave up
		}
		r.mu.Lock()
		r.bodies = append(r.bodies, body)
		code := http.StatusOK
		if len(r.answers) > 0 {
			code, r.answers = r.answers[0], r.answers[1:]
		}
		r.mu.Unlock()
		if req.Header.Get("Content-Type") != "application/json" {
			code = http.StatusUnsupportedMediaType
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(r.srv.Close)
	if host, _, _ := net.SplitHostPort(r.srv.Listener.Addr().String()); host != "127.0.0.1" {
		t.Fatalf("receiver listens on %s, not loopback", host)
	}
	return r
}

// holdNext makes the next request block without an answer; the returned
// channel is closed once that request arrived.
func (r *receiver) holdNext() (arrived <-chan struct{}, release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hold, r.held = make(chan struct{}), make(chan struct{})
	hold := r.hold
	return r.held, func() { close(hold) }
}

func (r *receiver) messages(t *testing.T) []map[string]any {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, b := range r.bodies {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("webhook body is not JSON: %v\n%s", err, b)
		}
		out = append(out, m)
	}
	return out
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

func eventsOfType(evs []api.Event, typ string) []map[string]any {
	var out []map[string]any
	for _, ev := range evs {
		if ev.Type == typ {
			var p map[string]any
			_ = json.Unmarshal(ev.Payload, &p)
			out = append(out, p)
		}
	}
	return out
}

// A run that ends notifies its webhook and its command, once each, with
// the event and the run; each delivery is a NOTIFICATION_SENT event.
func TestNotifyWebhookAndCommand(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	rcv := newReceiver(t)
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"), verifyDone,
		"notify_webhook="+rcv.srv.URL+"/hook   # Slack, Discord or ntfy",
		`notify_command=cat > notified.json; echo "$LOOP_EVENT $LOOP_STATUS $LOOP_REASON $LOOP_EXIT_CODE $LOOP_RUN_ID" >> notified.txt`)
	id := e.start("goal", "--name", "notify-me")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	eventually(t, "both notifications", 20*time.Second, func() bool {
		return rcv.count() == 1 && len(eventsOfType(e.events(id), "NOTIFICATION_SENT")) == 2
	})
	m := rcv.messages(t)[0]
	text, _ := m["text"].(string)
	if !strings.Contains(text, "notify-me COMPLETED") || !strings.Contains(text, "completed:promise+verify") || m["content"] != text {
		t.Errorf("webhook text/content = %q / %q", text, m["content"])
	}
	ev, _ := m["event"].(map[string]any)
	run, _ := m["run"].(map[string]any)
	if ev["type"] != "RUN_COMPLETED" || run["id"] != id || run["status"] != "COMPLETED" || m["status"] != "COMPLETED" {
		t.Errorf("webhook event/run = %v / %v", ev, run)
	}
	if _, ok := run["config"]; ok {
		t.Error("the webhook body carries the run's config (it may hold secrets)")
	}
	line, _ := os.ReadFile(filepath.Join(e.ws, "notified.txt"))
	if got, want := strings.TrimSpace(string(line)), "RUN_COMPLETED COMPLETED completed:promise+verify 0 "+id; got != want {
		t.Errorf("command saw %q, want %q", got, want)
	}
	var stdin map[string]any
	if b, _ := os.ReadFile(filepath.Join(e.ws, "notified.json")); json.Unmarshal(b, &stdin) != nil || stdin["text"] != text {
		t.Errorf("command stdin = %s", b)
	}
	sent := eventsOfType(e.events(id), "NOTIFICATION_SENT")
	channels := map[any]bool{}
	for _, p := range sent {
		channels[p["channel"]] = true
		if p["event"] != "RUN_COMPLETED" || p["attempt"] != float64(1) {
			t.Errorf("NOTIFICATION_SENT payload %v", p)
		}
	}
	if !channels["webhook"] || !channels["command"] {
		t.Errorf("sent channels %v", channels)
	}
	// A restart sends nothing again: a second run's notification arrives
	// after anything still due, and it is the only new one.
	e.stopDaemon()
	e.startDaemon()
	id2 := e.start("goal", "--name", "second")
	e.wait(id2)
	eventually(t, "the second run's notification", 20*time.Second, func() bool { return rcv.count() >= 2 })
	if n := rcv.count(); n != 2 || !strings.Contains(rcv.messages(t)[1]["text"].(string), "second COMPLETED") {
		t.Errorf("after a restart the receiver got %d messages: %v", n, rcv.messages(t))
	}
}

// A webhook that answers 5xx is retried with back-off; every attempt is an
// event; the run ended on time whatever the receiver did.
func TestNotifyWebhookRetries(t *testing.T) {
	e := newEnv(t)
	e.startDaemon("--notify-backoff", "100ms")
	rcv := newReceiver(t, 503, 500)
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"), verifyDone, "notify_webhook="+rcv.srv.URL,
		"notify_command=exit 3")
	id := e.start("goal")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d; a failing notification must not fail the run", code)
	}
	eventually(t, "the third webhook attempt", 20*time.Second, func() bool {
		return len(eventsOfType(e.events(id), "NOTIFICATION_SENT")) == 1
	})
	evs := e.events(id)
	var webhookFails, commandFails []map[string]any
	for _, p := range eventsOfType(evs, "NOTIFICATION_FAILED") {
		if p["channel"] == "webhook" {
			webhookFails = append(webhookFails, p)
		} else {
			commandFails = append(commandFails, p)
		}
	}
	if len(webhookFails) != 2 || webhookFails[0]["final"] != false || webhookFails[0]["status_code"] != float64(503) ||
		webhookFails[1]["attempt"] != float64(2) || webhookFails[1]["retry_at"] == nil {
		t.Errorf("webhook failures: %v", webhookFails)
	}
	if sent := eventsOfType(evs, "NOTIFICATION_SENT")[0]; sent["channel"] != "webhook" || sent["attempt"] != float64(3) {
		t.Errorf("sent: %v", sent)
	}
	if len(commandFails) != 1 || commandFails[0]["final"] != true || !strings.Contains(commandFails[0]["error"].(string), "exit status 3") {
		t.Errorf("command failures: %v (a command is attempted once)", commandFails)
	}
	if rcv.count() != 3 {
		t.Errorf("receiver got %d requests, want 3", rcv.count())
	}
}

// A notification due when the daemon is killed -9 (its delivery in flight,
// unrecorded) is sent after the restart, and only once.
func TestNotifyDueAtCrashIsSentOnceAfterRestart(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	rcv := newReceiver(t)
	arrived, release := rcv.holdNext()
	defer release()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"), verifyDone, "notify_webhook="+rcv.srv.URL)
	id := e.start("goal", "--name", "crash")
	e.wait(id)
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the webhook was never called")
	}
	e.killDaemon()
	e.startDaemon()
	eventually(t, "the notification after the restart", 20*time.Second, func() bool {
		return len(eventsOfType(e.events(id), "NOTIFICATION_SENT")) == 1
	})
	if n := rcv.count(); n != 1 || !strings.Contains(rcv.messages(t)[0]["text"].(string), "crash COMPLETED") {
		t.Fatalf("receiver got %d answered deliveries: %v", n, rcv.messages(t))
	}
	// Once: another restart and a later notification bring no repeat.
	e.killDaemon()
	e.startDaemon()
	id2 := e.start("goal", "--name", "later")
	e.wait(id2)
	eventually(t, "the later run's notification", 20*time.Second, func() bool { return rcv.count() >= 2 })
	if n := rcv.count(); n != 2 {
		t.Fatalf("receiver got %d deliveries, want 2 (one per run): %v", n, rcv.messages(t))
	}
	if n := len(eventsOfType(e.events(id), "NOTIFICATION_SENT")); n != 1 {
		t.Fatalf("%d NOTIFICATION_SENT events for the first run, want 1", n)
	}
}

// notify_desktop shows the notification with notify-send when the daemon
// has a desktop session, and says why not when it has none.
func TestNotifyDesktop(t *testing.T) {
	bin := t.TempDir()
	log := filepath.Join(bin, "notify-send.log")
	if err := os.WriteFile(filepath.Join(bin, "notify-send"), []byte("#!/bin/sh\nfor a; do printf '%s\\n' \"$a\"; done > "+log+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	e := newEnv(t)
	e.daemonEnv = []string{"DISPLAY=:42"}
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"), verifyDone, "notify_desktop=true", "notify_on=completed")
	id := e.start("goal", "--name", "desk")
	e.wait(id)
	eventually(t, "the desktop notification", 20*time.Second, func() bool {
		return len(eventsOfType(e.events(id), "NOTIFICATION_SENT")) == 1
	})
	b, _ := os.ReadFile(log)
	args := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(args) < 5 || args[0] != "--app-name=loopd" || args[2] != "--" || args[3] != "loopd: desk COMPLETED" ||
		!strings.HasPrefix(args[4], "loopd run desk COMPLETED") {
		t.Errorf("notify-send got %q", args)
	}

	// No session: the attempt fails for good and says why.
	e.stopDaemon()
	e.daemonEnv = nil
	e.startDaemon()
	id2 := e.start("goal", "--name", "nodesk")
	e.wait(id2)
	eventually(t, "the failed desktop notification", 20*time.Second, func() bool {
		return len(eventsOfType(e.events(id2), "NOTIFICATION_FAILED")) == 1
	})
	if p := eventsOfType(e.events(id2), "NOTIFICATION_FAILED")[0]; p["final"] != true || !strings.Contains(p["error"].(string), "no desktop session") {
		t.Errorf("NOTIFICATION_FAILED %v", p)
	}
}

// A run that fails notifies with the command to read what happened and,
// when the daemon serves the dashboard, the command that opens the run's
// page there.
func TestNotifyFailedGivesTheNextCommandAndTheDashboard(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback TCP")
	}
	addr := l.Addr().String()
	l.Close()
	e := newEnv(t)
	e.startDaemon("--http", addr)
	rcv := newReceiver(t)
	e.config("agent=command", e.fakeAgent(), "verify_command=exit 1", "notify_webhook="+rcv.srv.URL+"/hook")
	id := e.start("goal", "--name", "stuck")
	if code := e.wait(id); code != 1 {
		t.Fatalf("wait exit %d, want 1 (FAILED)", code)
	}
	eventually(t, "the notification", 20*time.Second, func() bool { return rcv.count() == 1 })
	text, _ := rcv.messages(t)[0]["text"].(string)
	want := "\nNext: loopctl postmortem " + id[:8] + "\nDashboard: loopctl dashboard " + id[:8]
	if !strings.Contains(text, "stuck FAILED") || !strings.HasSuffix(text, want) {
		t.Errorf("notification text %q, want it to end with %q", text, want)
	}
	// The dashboard's random host name is told only to its user, never
	// to a webhook.
	if strings.Contains(text, ".localhost") || strings.Contains(text, "http://") {
		t.Errorf("the notification names the dashboard's address: %q", text)
	}
	// The commands it names work: the postmortem, and a login link that
	// leads to the run's page.
	if r := e.loopctl("postmortem", id[:8]); r.code != 0 || !strings.Contains(r.stdout, "FAILED") {
		t.Errorf("loopctl postmortem %s: exit %d %s", id[:8], r.code, r.stderr)
	}
	if r := e.loopctl("dashboard", id[:8]); r.code != 0 || !strings.Contains(r.stdout, "/login?code=") {
		t.Errorf("loopctl dashboard %s: exit %d %q %s", id[:8], r.code, r.stdout, r.stderr)
	}
}
