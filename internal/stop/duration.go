package stop

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration parses a Go duration ("2h30m", "1.5h", "90s") or a humantime duration
// ("2h 30m", "90 sec", "1day", "2w 3d"): integer numbers each followed by a unit, with
// optional spaces. Units: ns, us/µs, ms, s/sec/second, m/min/minute, h/hr/hour, d/day,
// w/week (plural forms too). Months and years are rejected: their length is ambiguous.
// A leading "-" makes the duration negative (Validate rejects it for max_duration).
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	d, err := parseHumantime(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: %w (examples: \"2h 30m\", \"90s\", \"1h30m\")", s, err)
	}
	return d, nil
}

var durationUnits = map[string]uint64{
	"ns": 1, "nsec": 1, "nanos": 1, "nanosecond": 1, "nanoseconds": 1,
	"us": 1e3, "µs": 1e3, "μs": 1e3, "usec": 1e3, "micros": 1e3, "microsecond": 1e3, "microseconds": 1e3,
	"ms": 1e6, "msec": 1e6, "millis": 1e6, "millisecond": 1e6, "milliseconds": 1e6,
	"s": 1e9, "sec": 1e9, "secs": 1e9, "second": 1e9, "seconds": 1e9,
	"m": 60e9, "min": 60e9, "mins": 60e9, "minute": 60e9, "minutes": 60e9,
	"h": 3600e9, "hr": 3600e9, "hrs": 3600e9, "hour": 3600e9, "hours": 3600e9,
	"d": 86400e9, "day": 86400e9, "days": 86400e9,
	"w": 604800e9, "week": 604800e9, "weeks": 604800e9,
}

var errDurationRange = errors.New("out of range")

func parseHumantime(s string) (time.Duration, error) {
	neg := false
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		neg, s = true, strings.TrimLeft(rest, " ")
	}
	if s == "" {
		return 0, errors.New("empty")
	}
	const limit = uint64(1) << 63 // |math.MinInt64|
	var total uint64
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("expected a number at %q", s)
		}
		var n uint64
		for _, c := range s[:i] {
			if n > (math.MaxUint64-9)/10 {
				return 0, errDurationRange
			}
			n = n*10 + uint64(c-'0')
		}
		s = strings.TrimLeft(s[i:], " ")
		j := strings.IndexAny(s, "0123456789 ")
		if j < 0 {
			j = len(s)
		}
		unit := s[:j]
		if unit == "" {
			return 0, fmt.Errorf("missing unit after %d", n)
		}
		mult, ok := durationUnits[unit]
		if !ok {
			return 0, fmt.Errorf("unknown unit %q", unit)
		}
		if n != 0 && mult > limit/n {
			return 0, errDurationRange
		}
		if total+n*mult > limit || total+n*mult < total {
			return 0, errDurationRange
		}
		total += n * mult
		s = strings.TrimLeft(s[j:], " ")
	}
	if neg {
		return time.Duration(-total), nil // two's complement: -2^63 fits, 2^63 does not
	}
	if total == limit {
		return 0, errDurationRange
	}
	return time.Duration(total), nil
}

var formatUnits = [...]struct {
	name string
	ns   uint64
}{{"h", 3600e9}, {"m", 60e9}, {"s", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1}}

// FormatDuration writes d in the canonical humantime form used in JSON, descriptions and
// reasons: hours, minutes, seconds, milliseconds, microseconds and nanoseconds separated
// by spaces, zero parts left out ("2h 30m", "36h", "1m 500ms", "0s"). Hours are the largest
// unit so a limit reads as it was meant ("48h", not "2d"). ParseDuration reads it back
// exactly.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	b := make([]byte, 0, 32)
	mag := uint64(d)
	if d < 0 {
		b = append(b, '-')
		mag = -mag // two's complement: exact for every negative value, MinInt64 included
	}
	first := true
	for _, u := range formatUnits {
		if n := mag / u.ns; n > 0 {
			if !first {
				b = append(b, ' ')
			}
			first = false
			b = strconv.AppendUint(b, n, 10)
			b = append(b, u.name...)
			mag %= u.ns
		}
	}
	return string(b)
}
