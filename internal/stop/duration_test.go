package stop

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
	}{
		{"2h 30m", 150 * time.Minute},
		{"2h30m", 150 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"1.5h", 90 * time.Minute},
		{"90s", 90 * time.Second},
		{"90 sec", 90 * time.Second},
		{"1day", 24 * time.Hour},
		{"2 days 1hr", 49 * time.Hour},
		{"1w", 7 * 24 * time.Hour},
		{"2weeks 3d", 17 * 24 * time.Hour},
		{"10min", 10 * time.Minute},
		{"5 minutes 30 seconds", 330 * time.Second},
		{"250ms", 250 * time.Millisecond},
		{"3us 4ns", 3004 * time.Nanosecond},
		{"7µs", 7 * time.Microsecond},
		{"  45m  ", 45 * time.Minute},
		{"0s", 0},
		{"0", 0},
		{"-1h 30m", -90 * time.Minute},
		{"2562047h 47m 16s 854ms 775us 807ns", math.MaxInt64},
		{"-2562047h 47m 16s 854ms 775us 808ns", math.MinInt64},
	}
	for _, tc := range cases {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "h", "2", "2 months", "1y", "1.5 h", "2h 30", "2562047h 47m 16s 854ms 775us 808ns", "99999999999999999999h", "1H", "abc"} {
		if d, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", bad, d)
		} else if !strings.Contains(err.Error(), "invalid duration") {
			t.Errorf("ParseDuration(%q) error %q lacks context", bad, err)
		}
	}
}

func TestFormatDurationRoundTrips(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{150 * time.Minute, "2h 30m"},
		{48 * time.Hour, "48h"},
		{90 * time.Second, "1m 30s"},
		{time.Minute + 500*time.Millisecond, "1m 500ms"},
		{time.Hour + time.Nanosecond, "1h 1ns"},
		{-90 * time.Minute, "-1h 30m"},
		{math.MaxInt64, "2562047h 47m 16s 854ms 775us 807ns"},
		{math.MinInt64, "-2562047h 47m 16s 854ms 775us 808ns"},
	}
	for _, tc := range cases {
		got := FormatDuration(tc.d)
		if got != tc.want {
			t.Errorf("FormatDuration(%d) = %q, want %q", tc.d, got, tc.want)
		}
		back, err := ParseDuration(got)
		if err != nil || back != tc.d {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", got, back, err, tc.d)
		}
	}
}
