package notify

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

func TestMessage(t *testing.T) {
	run := api.Run{ID: "0123456789abcdef", Name: "parser", Workspace: "/src/p", Goal: "make the parser\nhandle quotes",
		Iteration: 4, Usage: api.Usage{CostUSD: 1.5}, Config: json.RawMessage(`{"notify_webhook":"https://secret"}`)}
	tests := []struct {
		name      string
		ev        api.Event
		dashboard bool
		title     string
		text      []string
		not       []string
	}{
		{"failed", api.Event{Type: "RUN_FAILED", Payload: json.RawMessage(`{"reason":"max_consecutive_failures:verification:3","description":"after 3 consecutive verification failures"}`)}, false,
			"loopd: parser FAILED", []string{"loopd run parser FAILED: max_consecutive_failures:verification:3\nafter 3 consecutive verification failures\n/src/p · 4 iteration(s) · $1.50\nGoal: make the parser\nNext: loopctl postmortem 01234567"},
			[]string{"Dashboard"}},
		{"failed, with a dashboard", api.Event{Type: "RUN_FAILED", Payload: json.RawMessage(`{"reason":"no_progress:3"}`)}, true,
			"loopd: parser FAILED", []string{"\nNext: loopctl postmortem 01234567\nDashboard: loopctl dashboard 01234567"}, []string{"http"}},
		{"aborted", api.Event{Type: "RUN_ABORTED", Payload: json.RawMessage(`{"reason":"max_cost:5.00"}`)}, true,
			"loopd: parser ABORTED", []string{"\nNext: loopctl postmortem 01234567\nDashboard: loopctl dashboard 01234567"}, nil},
		{"completed", api.Event{Type: "RUN_COMPLETED", Payload: json.RawMessage(`{"reason":"completed:promise+verify"}`)}, true,
			"loopd: parser COMPLETED", []string{"loopd run parser COMPLETED: completed:promise+verify"}, []string{"Next:", "Dashboard"}},
		{"waiting", api.Event{Type: "RUN_WAITING", Payload: json.RawMessage(`{"until":"2026-11-24T20:00:00.000Z","reason":"usage limit reached"}`)}, true,
			"loopd: parser WAITING", []string{"loopd run parser is WAITING until ", ": usage limit reached\nIt resumes by itself."}, []string{"Next:"}},
		{"needs an answer", api.Event{Type: "RUN_WAITING", Payload: json.RawMessage(`{"kind":"needs_answer","question":"Postgres or SQLite?","reason":"the agent asks"}`)}, true,
			"loopd: parser WAITING", []string{"loopd run parser is WAITING: its agent asks a question\nPostgres or SQLite?\nAnswer with: loopctl answer 01234567 TEXT"},
			[]string{"resumes by itself", "until"}},
		{"paused", api.Event{Type: "RUN_PAUSED", Payload: json.RawMessage(`{"run_id":"0123456789abcdef"}`)}, false,
			"loopd: parser PAUSED", []string{"loopd run parser is PAUSED (loopctl resume 01234567)"}, nil},
		{"task done", api.Event{Type: "TASK_DONE", Payload: json.RawMessage(`{"task":"t2","title":"Add the printer"}`)}, false,
			"loopd: backlog parser: task t2 done", []string{"loopd backlog parser: task t2 is done (Add the printer)\nTasks: loopctl tasks 01234567"}, []string{"postmortem"}},
		{"task blocked", api.Event{Type: "TASK_BLOCKED", Payload: json.RawMessage(`{"task":"t3","title":"Wire","why":"task run 9abc ended FAILED"}`)}, false,
			"loopd: backlog parser: task t3 blocked", []string{"task t3 is blocked (Wire)\ntask run 9abc ended FAILED\nTasks: loopctl tasks 01234567"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMessage(tt.ev, run, tt.dashboard)
			if m.Title != tt.title || m.Content != m.Text {
				t.Errorf("title %q, content %q", m.Title, m.Content)
			}
			for _, want := range tt.text {
				if !strings.Contains(m.Text, want) {
					t.Errorf("text %q lacks %q", m.Text, want)
				}
			}
			for _, not := range tt.not {
				if strings.Contains(m.Text, not) {
					t.Errorf("text %q has %q", m.Text, not)
				}
			}
			if m.Run.Config != nil {
				t.Error("the message carries the run's config")
			}
		})
	}
	long := newMessage(api.Event{Type: "RUN_ABORTED", Payload: json.RawMessage(`{"description":"` + strings.Repeat("é", 3000) + `"}`)}, run, true)
	if len(long.Text) > maxText || !strings.Contains(long.Text, "…\n") ||
		!strings.HasSuffix(long.Text, "\nNext: loopctl postmortem 01234567\nDashboard: loopctl dashboard 01234567") {
		t.Errorf("a long text is %d bytes, want ≤ %d, marked cut, and still ending with the next steps:\n%s", len(long.Text), maxText, long.Text[len(long.Text)-200:])
	}
}

func TestBackoff(t *testing.T) {
	n := New(Options{Backoff: time.Second, MaxBackoff: 10 * time.Second})
	var got []time.Duration
	for a := range 6 {
		got = append(got, n.backoff(a+1))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoff = %v, want %v", got, want)
		}
	}
}

// A webhook's answer decides between delivered, retry and give up.
func TestPostWebhook(t *testing.T) {
	for _, tt := range []struct {
		code  int
		ok    bool
		retry bool
	}{{200, true, false}, {204, true, false}, {500, false, true}, {503, false, true}, {429, false, true},
		{404, false, false}, {400, false, false}, {401, false, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var m Message
			if json.NewDecoder(r.Body).Decode(&m) != nil || m.Text != "hi" || m.Content != "hi" {
				w.WriteHeader(http.StatusTeapot)
				return
			}
			w.WriteHeader(tt.code)
		}))
		err := postWebhook(context.Background(), srv.Client(), srv.URL, Message{Text: "hi", Content: "hi"})
		srv.Close()
		var ae *attemptError
		switch {
		case tt.ok && err != nil:
			t.Errorf("%d: %v, want delivered", tt.code, err)
		case !tt.ok && (!errors.As(err, &ae) || ae.retry != tt.retry || ae.code != tt.code):
			t.Errorf("%d: %#v, want retry=%v", tt.code, err, tt.retry)
		}
	}
	// Unreachable: retried, and the error does not repeat the URL (a
	// webhook URL is a secret).
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/services/SECRET"
	srv.Close()
	err := postWebhook(context.Background(), http.DefaultClient, url, Message{})
	var ae *attemptError
	if !errors.As(err, &ae) || !ae.retry || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("unreachable: %v", err)
	}
}

func TestDesktopSession(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		want bool
	}{
		{[]string{"DISPLAY=:0"}, true},
		{[]string{"WAYLAND_DISPLAY=wayland-0"}, true},
		{[]string{"DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus"}, true},
		{[]string{"HOME=/root", "XDG_RUNTIME_DIR=" + t.TempDir()}, false},
		{nil, false},
	} {
		if got, why := desktopSession(tt.env); got != tt.want || (!got && why == "") {
			t.Errorf("desktopSession(%v) = %v %q", tt.env, got, why)
		}
	}
}

// The shortest claim leaves the longest delivery whole before the cut-off
// a quarter of the claim before it expires; the default claim is never
// shorter.
func TestMinClaimTTL(t *testing.T) {
	for _, c := range []struct{ cmd, want time.Duration }{
		{0, 80 * time.Second},                 // the default command timeout, 1m
		{time.Minute, 80 * time.Second},       // the same
		{5 * time.Second, 20 * time.Second},   // a webhook's 15 s is the longest
		{10 * time.Minute, 800 * time.Second}, // 4/3 of it
		{61 * time.Second, 81333333334},       // rounded up
	} {
		got := MinClaimTTL(c.cmd)
		if got != c.want {
			t.Errorf("MinClaimTTL(%s) = %s, want %s", c.cmd, got, c.want)
		}
		if longest := max(c.cmd, WebhookTimeout, DesktopTimeout); c.cmd != 0 && got-got/4 < longest {
			t.Errorf("MinClaimTTL(%s) = %s cuts a %s delivery off at %s", c.cmd, got, longest, got-got/4)
		}
	}
	for _, cmd := range []time.Duration{0, 5 * time.Second, time.Minute, 10 * time.Minute} {
		n := New(Options{CommandTimeout: cmd, Claim: &Claim{Owner: "w"}})
		if ttl := n.opts.Claim.TTL; ttl < MinClaimTTL(cmd) {
			t.Errorf("command timeout %s: default claim %s, below the minimum %s", cmd, ttl, MinClaimTTL(cmd))
		}
	}
}
