package transcript

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The usage-limit notices below are the agents' own words, as captured in
// public bug reports (see testdata/README.md):
//
//	Claude AI usage limit reached|1755615600                 (Claude Code ≤ 1.0.x)
//	Claude usage limit reached. Your limit will reset at 5pm (Europe/Warsaw).
//	You've hit your limit · resets 2pm (Asia/Shanghai)       (Claude Code 2.x)
//	You've hit your session limit · resets 1:30am (Asia/Tokyo)
//	You've hit your weekly limit · resets Sep 15 at 7pm
//	You're out of extra usage · resets 1:10am (Asia/Saigon)
//	You've hit your usage limit. … or try again at 3:28 PM.  (Codex)
//	You've hit your usage limit. Try again at Apr 28th, 2026 10:03 PM.
var usageLimitRE = regexp.MustCompile(`(?i)` +
	`claude (?:ai )?usage limit reached` +
	`|you(?:'|’)ve hit your (?:[a-z0-9-]+ )?limit` +
	`|you(?:'|’)re out of (?:extra )?usage` +
	`|usage limit (?:has been )?reached` +
	`|(?:5-hour|five-hour|weekly|session|daily) limit reached`)

// isUsageLimitText reports whether an error text says a usage limit was hit.
// Use it only on texts that are errors already: an agent may mention usage
// limits in ordinary prose.
func isUsageLimitText(s string) bool { return usageLimitRE.MatchString(s) }

// noticePrefixRE strips what CLIs print before a notice on a plain line.
var noticePrefixRE = regexp.MustCompile(`^[■⚠✗×\s]*(?:(?i:api )?(?i:error)\s*:\s*)?`)

// isLimitNoticeLine reports whether a plain-text line is a usage-limit notice
// by itself, not prose that mentions one: the notice must start the line.
func isLimitNoticeLine(line string) bool {
	rest := noticePrefixRE.ReplaceAllString(line, "")
	loc := usageLimitRE.FindStringIndex(rest)
	return loc != nil && loc[0] == 0
}

// limitFromText builds a RateLimit from the agent's notice.
func limitFromText(text string, now time.Time) *RateLimit {
	text = strings.TrimSpace(text)
	rl := &RateLimit{Message: firstBytes(text, maxErrorText)}
	if t, precision, ok := parseReset(text, now); ok {
		// "try again at 6:12 AM" may mean any second of that minute: a
		// retry at 6:12:00 can meet the limit again. Wait to its end.
		rl.ResetsAt = t.Add(precision)
	}
	return rl
}

var (
	// "…usage limit reached|1755615600": a Unix time after a pipe.
	epochRE = regexp.MustCompile(`\|\s*(\d{9,13})\b`)
	// "try again in 3 days 6 hours 57 minutes", "resets in 2h 30m".
	// "Please retry in 7200.5s." (Gemini CLI, quoting Google's API).
	inRE = regexp.MustCompile(`(?i)\b(?:try\s+again|retry|resets?)\s+in\s+~?\s*` +
		`((?:\d+(?:\.\d+)?\s*(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b[\s,]*(?:and\s+)?)+` +
		`|less than a minute)`)
	durPartRE = regexp.MustCompile(`(?i)(\d+)(?:\.(\d+))?\s*([a-z]+)`)
	// "resets 3pm (America/New_York)", "resets Jan 12, 10:59am (…)",
	// "resets Apr 23 at 4pm", "reset at 5pm (Europe/Warsaw)",
	// "try again at 3:28 PM", "try again at Apr 28th, 2026 10:03 PM".
	atRE = regexp.MustCompile(`(?i)\b(?:resets?|try\s+again)(?:\s+at|\s+on)?\s+` +
		`(?:(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?(?:\s+(\d{4}),?)?(?:\s+at)?\s+)?` +
		`(\d{1,2})(?::(\d{2}))?\s*([ap]\.?\s?m\b\.?)?` +
		`(?:\s*\(([A-Za-z][A-Za-z0-9_+\-/]*)\)|\s+(UTC|GMT)\b)?`)
)

var months = map[string]time.Month{
	"jan": time.January, "feb": time.February, "mar": time.March,
	"apr": time.April, "may": time.May, "jun": time.June,
	"jul": time.July, "aug": time.August, "sep": time.September,
	"oct": time.October, "nov": time.November, "dec": time.December,
}

// ParseResetTime finds when a limit resets in an agent's notice, relative to
// now (the time the notice was written). It understands Claude Code's
// "resets 3pm (America/New_York)", "resets 10:30am", "resets Jan 12, 10:59am
// (America/New_York)", "resets Apr 23 at 4pm (America/Recife)" and "Your
// limit will reset at 5pm (Europe/Warsaw)", the older "…limit reached|<unix
// seconds>", and Codex's "try again at 3:28 PM", "try again at Apr 28th, 2026
// 10:03 PM" and "try again in 3 days 6 hours".
//
// A time without a zone is in now's location. A time without a date is its
// next occurrence (one up to 5 minutes past still counts as today: the
// notice may be read a little late). A date without a year is this year's,
// or next year's when it is more than a week past. It returns false when the
// text holds no reset time it can read, or names an unknown zone.
func ParseResetTime(text string, now time.Time) (time.Time, bool) {
	t, _, ok := parseReset(text, now)
	return t, ok
}

// parseReset is ParseResetTime that also says how precise the text was:
// a clock time ("3:28 PM", "5pm") is given to the minute, an epoch or a
// duration to the second.
func parseReset(text string, now time.Time) (time.Time, time.Duration, bool) {
	if m := epochRE.FindStringSubmatch(text); m != nil {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil {
			if t := unixTime(money{v: v, ok: true}); !t.IsZero() {
				return t, 0, true
			}
		}
	}
	if m := inRE.FindStringSubmatch(text); m != nil {
		if d, ok := parseDuration(m[1]); ok {
			return now.Add(d), 0, true
		}
	}
	for _, m := range atRE.FindAllStringSubmatch(text, -1) {
		if t, ok := resolveAt(m, now); ok {
			return t, time.Minute, true
		}
	}
	return time.Time{}, 0, false
}

// resolveAt turns one atRE match into a time.
func resolveAt(m []string, now time.Time) (time.Time, bool) {
	mon, dayS, yearS, hourS, minS, ampm := m[1], m[2], m[3], m[4], m[5], m[6]
	zone := m[7] + m[8]
	if ampm == "" && minS == "" {
		return time.Time{}, false // "resets 3" is not a time
	}
	hour, _ := strconv.Atoi(hourS)
	minute, _ := strconv.Atoi(minS)
	if minute > 59 {
		return time.Time{}, false
	}
	if ampm != "" {
		if hour < 1 || hour > 12 {
			return time.Time{}, false
		}
		hour %= 12
		if strings.HasPrefix(strings.ToLower(ampm), "p") {
			hour += 12
		}
	} else if hour > 23 {
		return time.Time{}, false
	}

	loc := now.Location()
	if zone != "" {
		switch strings.ToUpper(zone) {
		case "UTC", "GMT", "Z":
			loc = time.UTC
		default:
			l, err := time.LoadLocation(zone)
			if err != nil {
				return time.Time{}, false
			}
			loc = l
		}
	}
	ref := now.In(loc)

	if mon == "" {
		t := time.Date(ref.Year(), ref.Month(), ref.Day(), hour, minute, 0, 0, loc)
		if t.Before(now.Add(-5 * time.Minute)) {
			t = time.Date(ref.Year(), ref.Month(), ref.Day()+1, hour, minute, 0, 0, loc)
		}
		return t, true
	}

	month := months[strings.ToLower(mon[:3])]
	day, _ := strconv.Atoi(dayS)
	year := ref.Year()
	if yearS != "" {
		year, _ = strconv.Atoi(yearS)
	}
	t := time.Date(year, month, day, hour, minute, 0, 0, loc)
	if t.Day() != day { // Feb 30 and the like
		return time.Time{}, false
	}
	if yearS == "" && t.Before(now.Add(-7*24*time.Hour)) {
		t = time.Date(year+1, month, day, hour, minute, 0, 0, loc)
	}
	return t, true
}

// parseDuration reads "3 days 6 hours 57 minutes", "90 min", "2h 30m".
func parseDuration(s string) (time.Duration, bool) {
	if strings.EqualFold(strings.TrimSpace(s), "less than a minute") {
		return time.Minute, true
	}
	var d time.Duration
	found := false
	for _, p := range durPartRE.FindAllStringSubmatch(s, -1) {
		n, err := strconv.Atoi(p[1])
		if err != nil || n > 1_000_000 {
			return 0, false
		}
		if p[2] != "" {
			n++ // a fraction: round up, never retry early
		}
		var unit time.Duration
		switch u := strings.ToLower(p[3]); {
		case strings.HasPrefix(u, "d"):
			unit = 24 * time.Hour
		case strings.HasPrefix(u, "h"):
			unit = time.Hour
		case strings.HasPrefix(u, "m"):
			unit = time.Minute
		case strings.HasPrefix(u, "s"):
			unit = time.Second
		default:
			return 0, false
		}
		d += time.Duration(n) * unit
		found = true
	}
	return d, found
}
