package api

import (
	"encoding/json"
	"fmt"
)

// Summary describes an event's payload in one line, the same way for
// `loopctl events`, `loopctl watch` and a postmortem's timeline: the step
// and its outcome, a condition's progress, how the run ended. It is "" for
// an event type it does not summarise (and for an empty or unreadable
// payload); callers may show the raw payload instead.
func (e Event) Summary() string {
	var p map[string]any
	if json.Unmarshal(e.Payload, &p) != nil || len(p) == 0 {
		return ""
	}
	get := func(k string) string {
		if v, ok := p[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	switch e.Type {
	case "STEP_STARTED":
		return fmt.Sprintf("#%s %s, iteration %s", get("seq"), get("phase"), get("iteration"))
	case "STEP_FINISHED", "STEP_INTERRUPTED":
		s := fmt.Sprintf("#%s %s %s", get("seq"), get("phase"), get("status"))
		if err := get("error"); err != "" {
			s += ": " + err
		}
		return s
	case "STEP_ADOPTED":
		return fmt.Sprintf("#%s %s, pid %s", get("seq"), get("phase"), get("pid"))
	case "CONDITION_PROGRESSED":
		if get("unmeasurable") == "true" {
			return get("description") + ": " + get("reason")
		}
		if v, ok := p["progress"].(float64); ok {
			return fmt.Sprintf("%s: %.0f%%", get("description"), v*100)
		}
		return get("description")
	case "RUN_COMPLETED", "RUN_FAILED", "RUN_ABORTED", "RUN_INTERRUPTED":
		return get("reason") + " — " + get("description")
	case "RUN_WAITING":
		return "until " + get("until")
	case "NOTIFICATION_SENT":
		return fmt.Sprintf("%s of %s, attempt %s", get("channel"), get("event"), get("attempt"))
	case "NOTIFICATION_FAILED":
		s := fmt.Sprintf("%s of %s, attempt %s: %s", get("channel"), get("event"), get("attempt"), get("error"))
		if get("final") == "false" {
			s += "; retried at " + get("retry_at")
		}
		return s
	}
	return ""
}
