package humantime

import (
	"math"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"-0", 0},
		{"0s", 0},
		{"  90s  ", 90 * time.Second},
		{"2h 30m", 2*time.Hour + 30*time.Minute},
		{"2h30m", 2*time.Hour + 30*time.Minute},
		{"1h30m", 90 * time.Minute},
		{"1.5h", 90 * time.Minute},
		{".5s", 500 * time.Millisecond},
		{"1 hour 30 minutes", 90 * time.Minute},
		{"1hour 1minute 1second", time.Hour + time.Minute + time.Second},
		{"1day", 24 * time.Hour},
		{"2days 3h", 51 * time.Hour},
		{"1d", 24 * time.Hour},
		{"1w", 7 * 24 * time.Hour},
		{"2 weeks", 14 * 24 * time.Hour},
		{"1y", 36525 * 24 * time.Hour / 100},
		{"60m", time.Hour},
		{"15 mins", 15 * time.Minute},
		{"3hrs", 3 * time.Hour},
		{"1hr", time.Hour},
		{"10secs", 10 * time.Second},
		{"10 sec", 10 * time.Second},
		{"90ms", 90 * time.Millisecond},
		{"5msec", 5 * time.Millisecond},
		{"7us", 7 * time.Microsecond},
		{"7µs", 7 * time.Microsecond},
		{"7μs", 7 * time.Microsecond},
		{"3ns", 3},
		{"3 nanoseconds", 3},
		{"1h1h", 2 * time.Hour},
		{"-1h30m", -90 * time.Minute},
		{"+5m", 5 * time.Minute},
		{"1day 2h 3m 4s 5ms 6us 7ns", 26*time.Hour + 3*time.Minute + 4*time.Second + 5*time.Millisecond + 6*time.Microsecond + 7},
		{"2562047h47m16.854775807s", math.MaxInt64},
		{"-2562047h47m16.854775808s", math.MinInt64},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("Parse(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// TestParseAgreesWithGo checks that Go durations mean the same here as in
// time.ParseDuration, fractions included.
func TestParseAgreesWithGo(t *testing.T) {
	for _, in := range []string{
		"1.5h", "0.1s", "1.0000000001s", "3.14159m", "100.5ms", "2h45m30.5s",
		"-2.5h", ".25us", "1.s", "9223372036.854775807s",
	} {
		want, err := time.ParseDuration(in)
		if err != nil {
			t.Fatalf("time.ParseDuration(%q): %v", in, err)
		}
		got, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if got != want {
			t.Errorf("Parse(%q) = %v, time.ParseDuration says %v", in, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string
	}{
		{"", `empty duration`},
		{"   ", `empty duration`},
		{"-", `missing number in "-"`},
		{"2hx", `unknown unit "hx" in "2hx"`},
		{"5 fortnights", `unknown unit "fortnights" in "5 fortnights"`},
		{"1H", `unknown unit "H" in "1H"`},
		{"1month", `unknown unit "month" in "1month"`},
		{"90", `missing unit after "90" in "90" (for example "90s" or "90m")`},
		{"1h 30", `missing unit after "30" in "1h 30" (for example "30s" or "30m")`},
		{"h", `missing number before unit "h" in "h"`},
		{"1h, 30m", `unexpected "," in "1h, 30m"`},
		{"1h-30m", `unexpected "-" in "1h-30m"`},
		{"1..5h", `unexpected "." after "1." in "1..5h"`},
		{".", `unexpected "." in "."`},
		{"1e3s", `unknown unit "e" in "1e3s"`},
		{"300y", `duration "300y" is too large (the maximum is about 292 years)`},
		{"2562047h47m16.854775808s", `duration "2562047h47m16.854775808s" is too large (the maximum is about 292 years)`},
		{"99999999999999999999ns", `duration "99999999999999999999ns" is too large (the maximum is about 292 years)`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want error %q", tt.in, got, tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Fatalf("Parse(%q) error = %q, want %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{1, "1ns"},
		{90 * time.Millisecond, "90ms"},
		{1500 * time.Millisecond, "1s 500ms"},
		{90 * time.Second, "1m 30s"},
		{60 * time.Minute, "1h"},
		{150 * time.Minute, "2h 30m"},
		{24 * time.Hour, "1day"},
		{26 * time.Hour, "1day 2h"},
		{50 * time.Hour, "2days 2h"},
		{14 * 24 * time.Hour, "14days"},
		{-90 * time.Minute, "-1h 30m"},
		{time.Hour + 7*time.Microsecond, "1h 7us"},
		{math.MaxInt64, "106751days 23h 47m 16s 854ms 775us 807ns"},
		{math.MinInt64, "-106751days 23h 47m 16s 854ms 775us 808ns"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Format(tt.in); got != tt.want {
				t.Fatalf("Format(%d) = %q, want %q", int64(tt.in), got, tt.want)
			}
			back, err := Parse(tt.want)
			if err != nil || back != tt.in {
				t.Fatalf("Parse(%q) = %v, %v; want %v", tt.want, back, err, tt.in)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"0", "2h 30m", "1h30m", "1.5h", "1 hour 30 minutes", "1day", "90s", "2hx", "-1h",
		"7µs", "300y", "1e3s", ".5s", "1h, 30m", "\u00a01h\u2003",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s) // must never panic
		if err != nil {
			return
		}
		text := Format(d)
		back, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(Format(%v)) = Parse(%q): %v", d, text, err)
		}
		if back != d {
			t.Fatalf("Parse(Format(%v)) = %v via %q", d, back, text)
		}
	})
}
