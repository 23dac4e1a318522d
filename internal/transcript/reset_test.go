package transcript

import (
	"testing"
	"time"
)

func TestParseResetTime(t *testing.T) {
	la := mustLoad(t, "America/Los_Angeles")
	tests := []struct {
		name   string
		text   string
		now    time.Time
		want   time.Time
		wantOK bool
	}{
		{
			name:   "time and zone, reset later the same local day",
			text:   "You've hit your limit · resets 3pm (America/New_York)",
			now:    time.Date(2026, time.July, 1, 12, 0, 0, 0, time.UTC), // 8am EDT
			want:   time.Date(2026, time.July, 1, 19, 0, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "zone whose local date is already tomorrow",
			text:   "You've hit your limit · resets 2am (Europe/Berlin)",
			now:    time.Date(2026, time.January, 26, 23, 3, 46, 0, time.UTC), // 00:03 in Berlin
			want:   time.Date(2026, time.January, 27, 1, 0, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "minutes and no zone use now's location",
			text:   "You've hit your session limit · resets 10:30am",
			now:    time.Date(2026, time.July, 1, 8, 0, 0, 0, la),
			want:   time.Date(2026, time.July, 1, 10, 30, 0, 0, la),
			wantOK: true,
		},
		{
			name:   "a time already past today is tomorrow's",
			text:   "resets 10:30am",
			now:    time.Date(2026, time.July, 1, 12, 0, 0, 0, time.UTC),
			want:   time.Date(2026, time.July, 2, 10, 30, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "read a few minutes late still means today",
			text:   "resets 3pm (UTC)",
			now:    time.Date(2026, time.July, 1, 15, 4, 0, 0, time.UTC),
			want:   time.Date(2026, time.July, 1, 15, 0, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "midnight",
			text:   "You've hit your limit · resets 12am (America/New_York)",
			now:    time.Date(2026, time.March, 2, 20, 0, 0, 0, time.UTC), // 3pm EST
			want:   time.Date(2026, time.March, 3, 5, 0, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "date with a comma",
			text:   "resets Nov 22, 5pm (Europe/Berlin)",
			now:    time.Date(2025, time.November, 20, 10, 0, 0, 0, time.UTC),
			want:   time.Date(2025, time.November, 22, 16, 0, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "date with minutes, as /usage prints it",
			text:   "Resets Jan 12, 10:59am (America/New_York)",
			now:    time.Date(2026, time.January, 7, 14, 12, 0, 0, time.UTC),
			want:   time.Date(2026, time.January, 12, 15, 59, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "date with at",
			text:   "You've hit your limit · resets Apr 23 at 4pm (America/Recife)",
			now:    time.Date(2026, time.April, 22, 13, 39, 0, 0, time.UTC),
			want:   time.Date(2026, time.April, 23, 19, 0, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "date without zone",
			text:   "You've hit your weekly limit · resets Sep 15 at 7pm",
			now:    time.Date(2026, time.September, 8, 9, 0, 0, 0, time.UTC),
			want:   time.Date(2026, time.September, 15, 19, 0, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "January date read in December is next year",
			text:   "resets Jan 3, 9am (UTC)",
			now:    time.Date(2025, time.December, 30, 12, 0, 0, 0, time.UTC),
			want:   time.Date(2026, time.January, 3, 9, 0, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "older Claude wording",
			text:   "Claude usage limit reached. Your limit will reset at 5pm (Europe/Warsaw).",
			now:    time.Date(2025, time.August, 19, 14, 8, 25, 0, time.UTC),
			want:   time.Date(2025, time.August, 19, 15, 0, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "out of extra usage, zone alias",
			text:   "You're out of extra usage · resets 1:10am (Asia/Saigon)",
			now:    time.Date(2025, time.May, 11, 18, 0, 0, 0, time.UTC), // 01:00 in Saigon
			want:   time.Date(2025, time.May, 11, 18, 10, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "unix seconds after a pipe",
			text:   "Claude AI usage limit reached|1755615600",
			now:    fixedNow,
			want:   time.Unix(1755615600, 0),
			wantOK: true,
		},
		{
			name:   "codex same-day time",
			text:   "You've hit your usage limit. To get more access now, send a request to your admin or try again at 12:16 PM.",
			now:    time.Date(2025, time.November, 12, 11, 47, 4, 0, time.UTC),
			want:   time.Date(2025, time.November, 12, 12, 16, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "codex date with ordinal and year",
			text:   "You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at Apr 28th, 2026 10:03 PM.",
			now:    time.Date(2026, time.April, 25, 9, 0, 0, 0, time.UTC),
			want:   time.Date(2026, time.April, 28, 22, 3, 0, 0, time.UTC),
			wantOK: true,
		},
		{
			name:   "codex relative duration",
			text:   "You've hit your usage limit. To get more access now, send a request to your admin or try again in 3 days 6 hours 57 minutes.",
			now:    fixedNow,
			want:   fixedNow.Add(3*24*time.Hour + 6*time.Hour + 57*time.Minute),
			wantOK: true,
		},
		{
			name:   "approximate minutes",
			text:   "ERROR: You've hit your usage limit. Try again in ~90 min.",
			now:    fixedNow,
			want:   fixedNow.Add(90 * time.Minute),
			wantOK: true,
		},
		{name: "no time at all", text: "You've hit your usage limit. Try again later.", now: fixedNow},
		{name: "a bare number is not a time", text: "resets 3", now: fixedNow},
		{name: "hour out of range", text: "resets 13pm", now: fixedNow},
		{name: "minutes out of range", text: "resets 10:75", now: fixedNow},
		{name: "no such day", text: "resets Feb 30, 1pm (UTC)", now: fixedNow},
		{name: "unknown zone", text: "resets 3pm (Mars/Olympus_Mons)", now: fixedNow},
		{name: "empty", text: "", now: fixedNow},
		{name: "a resetsAt key is not prose", text: `{"resetsAt":1778565600}`, now: fixedNow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseResetTime(tt.text, tt.now)
			if ok != tt.wantOK || !got.Equal(tt.want) {
				t.Fatalf("ParseResetTime(%q) = %v, %v; want %v, %v", tt.text, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestIsLimitNoticeLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want bool
	}{
		{name: "claude legacy", line: "Claude AI usage limit reached|1755615600", want: true},
		{name: "claude 2.x", line: "You've hit your limit · resets 3pm (America/New_York)", want: true},
		{name: "curly apostrophe", line: "You’ve hit your limit for Claude messages. Limits will reset at 9:30 AM.", want: true},
		{name: "error prefix", line: "API Error: You've hit your session limit · resets 1:30pm", want: true},
		{name: "codex TUI marker", line: "■ You've hit your usage limit. Try again later.", want: true},
		{name: "five-hour wording", line: "5-hour limit reached ∙ resets 3am", want: true},
		{name: "prose mention", line: "The harness handles: You have hit your session limit", want: false},
		{name: "quoted", line: "> You've hit your limit · resets 3pm", want: false},
		{name: "unrelated", line: "all tests pass", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isLimitNoticeLine(tt.line); got != tt.want {
				t.Fatalf("isLimitNoticeLine(%q) = %v, want %v", tt.line, got, tt.want)
			}
		})
	}
}

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("time zone data unavailable: %v", err)
	}
	return loc
}
