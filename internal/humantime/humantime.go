// Package humantime parses and formats durations written for people, such as
// "2h 30m", "1 hour 30 minutes" or "1day", as well as Go durations such as
// "2h30m" and "1.5h".
//
// The accepted grammar is a sequence of "<number><unit>" parts, optionally
// separated by whitespace, with whitespace also allowed between a number and
// its unit. A number is decimal digits with an optional fraction ("1.5h").
// The parts are added up: "1h 1h" is two hours. A single leading "-" or "+"
// applies to the whole duration, as in Go ("-1h30m" is minus ninety minutes).
// The bare string "0" (or "-0", "+0") is zero; any other number needs a unit,
// because a bare "90" is as likely to mean minutes as seconds.
//
// Units are case-sensitive:
//
//	ns nsec nsecs nanosecond nanoseconds
//	us µs μs usec usecs microsecond microseconds
//	ms msec msecs millisecond milliseconds
//	s sec secs second seconds
//	m min mins minute minutes
//	h hr hrs hour hours
//	d day days                       24 hours
//	w week weeks                     7 days
//	y year years                     365.25 days (as the Rust humantime crate)
//
// Months are not accepted: their length is ambiguous and "M" is one shift key
// away from minutes.
//
// [Format] writes the canonical form, days being the largest unit: "1day 2h",
// "2days", "1h 30m", "90ms", "0s". Parse(Format(d)) == d for every d.
package humantime

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

const (
	day  = 24 * time.Hour
	week = 7 * day
	year = 36525 * day / 100
)

// units maps every accepted unit spelling to its length.
var units = map[string]time.Duration{
	"ns": time.Nanosecond, "nsec": time.Nanosecond, "nsecs": time.Nanosecond,
	"nanosecond": time.Nanosecond, "nanoseconds": time.Nanosecond,

	"us": time.Microsecond, "µs": time.Microsecond, "μs": time.Microsecond,
	"usec": time.Microsecond, "usecs": time.Microsecond,
	"microsecond": time.Microsecond, "microseconds": time.Microsecond,

	"ms": time.Millisecond, "msec": time.Millisecond, "msecs": time.Millisecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,

	"s": time.Second, "sec": time.Second, "secs": time.Second,
	"second": time.Second, "seconds": time.Second,

	"m": time.Minute, "min": time.Minute, "mins": time.Minute,
	"minute": time.Minute, "minutes": time.Minute,

	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour,
	"hour": time.Hour, "hours": time.Hour,

	"d": day, "day": day, "days": day,

	"w": week, "week": week, "weeks": week,

	"y": year, "year": year, "years": year,
}

// maxMagnitude is the largest magnitude a duration can have: |math.MinInt64|.
const maxMagnitude = uint64(1) << 63

// errTooLarge is returned (wrapped) when a duration does not fit in a
// time.Duration (about 292 years).
var errTooLarge = errors.New("is too large (the maximum is about 292 years)")

// Parse parses a humantime string ("2h 30m", "1 hour 30 minutes", "1day") or a
// Go duration ("2h30m", "1.5h"). See the package documentation for the
// grammar and the units. Errors quote the input and name the offending part,
// for example: unknown unit "hx" in "2hx".
func Parse(s string) (time.Duration, error) {
	orig := s
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	neg := false
	if s[0] == '-' || s[0] == '+' {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "0" {
		return 0, nil
	}
	if s == "" {
		return 0, fmt.Errorf("missing number in %q", orig)
	}

	var total uint64 // magnitude in nanoseconds, at most maxMagnitude
	i := 0
	for i < len(s) {
		i = skipSpace(s, i)
		if i == len(s) {
			break
		}

		// The number: digits with an optional fraction.
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		intPart := s[start:i]
		fracPart := ""
		if i < len(s) && s[i] == '.' {
			i++
			fracStart := i
			for i < len(s) && isDigit(s[i]) {
				i++
			}
			fracPart = s[fracStart:i]
		}
		if intPart == "" && fracPart == "" {
			r, _ := utf8.DecodeRuneInString(s[start:])
			if isUnitRune(r) {
				end := scanUnit(s, start)
				return 0, fmt.Errorf("missing number before unit %q in %q", s[start:end], orig)
			}
			return 0, fmt.Errorf("unexpected %q in %q", string(r), orig)
		}
		number := s[start:i]

		// The unit, possibly after whitespace.
		i = skipSpace(s, i)
		unitStart := i
		i = scanUnit(s, i)
		unit := s[unitStart:i]
		if unit == "" {
			if i < len(s) {
				r, _ := utf8.DecodeRuneInString(s[i:])
				return 0, fmt.Errorf("unexpected %q after %q in %q", string(r), number, orig)
			}
			return 0, fmt.Errorf("missing unit after %q in %q (for example %q or %q)", number, orig, number+"s", number+"m")
		}
		perUnit, ok := units[unit]
		if !ok {
			return 0, fmt.Errorf("unknown unit %q in %q", unit, orig)
		}

		v, err := partValue(intPart, fracPart, uint64(perUnit))
		if err != nil || v > maxMagnitude-total {
			return 0, fmt.Errorf("duration %q %w", orig, errTooLarge)
		}
		total += v
	}

	if neg {
		if total == maxMagnitude {
			return math.MinInt64, nil
		}
		return -time.Duration(total), nil
	}
	if total == maxMagnitude {
		return 0, fmt.Errorf("duration %q %w", orig, errTooLarge)
	}
	return time.Duration(total), nil
}

// partValue computes (intPart.fracPart) * perUnit in nanoseconds, reporting
// overflow beyond maxMagnitude. The fraction is handled as in
// time.ParseDuration, so "1.5h" means the same here as in Go.
func partValue(intPart, fracPart string, perUnit uint64) (uint64, error) {
	var v uint64
	if intPart != "" {
		n, err := strconv.ParseUint(intPart, 10, 64)
		if err != nil {
			return 0, errTooLarge
		}
		if n > maxMagnitude/perUnit {
			return 0, errTooLarge
		}
		v = n * perUnit
	}
	if fracPart != "" {
		// Keep as many fraction digits as fit, like time.ParseDuration.
		var f uint64
		scale := 1.0
		for _, c := range []byte(fracPart) {
			if f > (math.MaxInt64-9)/10 {
				break // the remaining digits are below the precision kept
			}
			f = f*10 + uint64(c-'0')
			scale *= 10
		}
		frac := uint64(float64(f) * (float64(perUnit) / scale))
		if frac > maxMagnitude-v {
			return 0, errTooLarge
		}
		v += frac
	}
	return v, nil
}

// Format returns the canonical humantime form of d: its parts from days down
// to nanoseconds, largest first, separated by single spaces, zero parts left
// out ("1day 2h", "2days 30m", "1h 30m", "90ms", "1s 500ms"). Zero is "0s"
// and a negative duration has a leading "-" ("-1h 30m"). Parse(Format(d)) == d.
func Format(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	var n uint64
	if d < 0 {
		b.WriteByte('-')
		n = uint64(-(d + 1)) + 1 // no overflow for math.MinInt64
	} else {
		n = uint64(d)
	}
	parts := []struct {
		size     uint64
		one, any string
	}{
		{uint64(day), "day", "days"},
		{uint64(time.Hour), "h", "h"},
		{uint64(time.Minute), "m", "m"},
		{uint64(time.Second), "s", "s"},
		{uint64(time.Millisecond), "ms", "ms"},
		{uint64(time.Microsecond), "us", "us"},
		{uint64(time.Nanosecond), "ns", "ns"},
	}
	first := true
	for _, p := range parts {
		count := n / p.size
		n %= p.size
		if count == 0 {
			continue
		}
		if !first {
			b.WriteByte(' ')
		}
		first = false
		b.WriteString(strconv.FormatUint(count, 10))
		if count == 1 {
			b.WriteString(p.one)
		} else {
			b.WriteString(p.any)
		}
	}
	return b.String()
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isUnitRune reports whether r may be part of a unit name: letters, which
// include µ (U+00B5) and μ (U+03BC).
func isUnitRune(r rune) bool { return unicode.IsLetter(r) }

// skipSpace returns the index of the first non-space rune of s at or after i.
func skipSpace(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += size
	}
	return i
}

// scanUnit returns the index just past the unit name starting at i.
func scanUnit(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isUnitRune(r) {
			break
		}
		i += size
	}
	return i
}
