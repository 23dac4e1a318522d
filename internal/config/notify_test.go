package config

import (
	"reflect"
	"testing"
)

func TestNotifyKeys(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		check   func(Config) any
		want    any
		wantErr string
	}{
		{name: "defaults", config: "", check: func(c Config) any { return []any{c.NotifyCommand, c.NotifyWebhook, c.NotifyDesktop, c.NotifyOn} },
			want: []any{"", "", false, []string{"ended", "waiting"}}},
		{name: "command", config: `notify_command=notify.sh "$LOOP_RUN_ID" # mine`, check: func(c Config) any { return c.NotifyCommand }, want: `notify.sh "$LOOP_RUN_ID"`},
		{name: "webhook", config: "notify_webhook=https://hooks.slack.com/services/T/B/X", check: func(c Config) any { return c.NotifyWebhook }, want: "https://hooks.slack.com/services/T/B/X"},
		{name: "webhook not a url", config: "notify_webhook=hooks.slack.com/x", wantErr: `{cfg}:1: notify_webhook: must be an http:// or https:// URL, got "hooks.slack.com/x"`},
		{name: "webhook other scheme", config: "notify_webhook=ftp://host/x", wantErr: `{cfg}:1: notify_webhook: must be an http:// or https:// URL, got "ftp://host/x"`},
		{name: "desktop", config: "notify_desktop=true", check: func(c Config) any { return c.NotifyDesktop }, want: true},
		{name: "desktop yes", config: "notify_desktop=yes", check: func(c Config) any { return c.NotifyDesktop }, want: true},
		{name: "desktop bad", config: "notify_desktop=sometimes", wantErr: `{cfg}:1: notify_desktop: must be true or false, got "sometimes"`},
		{name: "on list", config: "notify_on = completed, FAILED ,paused", check: func(c Config) any { return c.NotifyOn }, want: []string{"completed", "failed", "paused"}},
		{name: "on empty turns it off", config: "notify_on=", check: func(c Config) any { return c.NotifyOn }, want: []string(nil)},
		{name: "on unknown", config: "notify_on=ended,complete", wantErr: `{cfg}:1: notify_on: unknown change "complete" (did you mean "completed"?); use a comma list of ended, waiting, completed, failed, aborted, paused, task_done, task_blocked`},
		{name: "on twice", config: "notify_on=ended,ended", wantErr: `{cfg}:1: notify_on: "ended" is listed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkspace(t, map[string]string{"PROMPT.md": "goal"})
			writeFile(t, w.config(), tt.config+"\n")
			c, err := w.load()
			if tt.wantErr != "" {
				if err == nil || err.Error() != w.expand(tt.wantErr) {
					t.Fatalf("Load error:\n%v\nwant:\n%s", err, w.expand(tt.wantErr))
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := tt.check(c); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestNotifies(t *testing.T) {
	tests := []struct {
		on     []string
		status string
		want   bool
	}{
		{[]string{"ended", "waiting"}, "COMPLETED", true},
		{[]string{"ended", "waiting"}, "INTERRUPTED", true},
		{[]string{"ended", "waiting"}, "WAITING", true},
		{[]string{"ended", "waiting"}, "PAUSED", false},
		{[]string{"ended", "waiting"}, "RUNNING", false},
		{[]string{"failed"}, "FAILED", true},
		{[]string{"failed"}, "ABORTED", false},
		{[]string{"paused"}, "PAUSED", true},
		{nil, "FAILED", false},
	}
	for _, tt := range tests {
		if got := (Config{NotifyOn: tt.on}).Notifies(tt.status); got != tt.want {
			t.Errorf("notify_on=%v, %s: Notifies = %v, want %v", tt.on, tt.status, got, tt.want)
		}
	}
}
