package stop

import (
	"strings"
	"testing"
	"time"
)

// max_duration reads both humantime and Go durations (package humantime
// has the full table); its canonical form round-trips.
func TestDurations(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"2h 30m", 150 * time.Minute}, {"2h30m", 150 * time.Minute}, {"90s", 90 * time.Second}, {"1day", 24 * time.Hour},
	} {
		d, err := ParseDuration(tc.in)
		if err != nil || d != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, d, err, tc.want)
		}
		if back, err := ParseDuration(FormatDuration(d)); err != nil || back != d {
			t.Errorf("FormatDuration(%v) = %q does not read back: %v, %v", d, FormatDuration(d), back, err)
		}
	}
	if _, err := ParseDuration("2 months"); err == nil || !strings.Contains(err.Error(), "examples") {
		t.Errorf("ParseDuration(2 months) = %v; want an error with examples", err)
	}
}
