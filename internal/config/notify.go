package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// The names notify_on accepts: which run changes send a notification.
const (
	// NotifyEnded notifies when a run reaches any terminal status.
	NotifyEnded = "ended"
	// NotifyWaiting notifies when a run goes WAITING (a usage limit, or the
	// model API being unavailable).
	NotifyWaiting = "waiting"
	// NotifyCompleted notifies when a run ends COMPLETED.
	NotifyCompleted = "completed"
	// NotifyFailed notifies when a run ends FAILED.
	NotifyFailed = "failed"
	// NotifyAborted notifies when a run ends ABORTED.
	NotifyAborted = "aborted"
	// NotifyPaused notifies when a run is PAUSED.
	NotifyPaused = "paused"
	// NotifyTaskDone notifies when a backlog's task is done (landed).
	NotifyTaskDone = "task_done"
	// NotifyTaskBlocked notifies when a backlog's task is blocked.
	NotifyTaskBlocked = "task_blocked"
)

// notifyNames lists the valid notify_on names in the order errors name them.
var notifyNames = []string{NotifyEnded, NotifyWaiting, NotifyCompleted, NotifyFailed, NotifyAborted, NotifyPaused,
	NotifyTaskDone, NotifyTaskBlocked}

// Notifies reports whether a change of the run to status (a RunStatus such
// as "FAILED", or a backlog's TASK_DONE or TASK_BLOCKED) sends a
// notification under the notify_on list.
func (c Config) Notifies(status string) bool {
	for _, n := range c.NotifyOn {
		switch {
		case n == NotifyEnded && (status == "COMPLETED" || status == "FAILED" || status == "ABORTED" || status == "INTERRUPTED"):
			return true
		case strings.EqualFold(n, status):
			return true
		}
	}
	return false
}

// Notifying reports whether any notification channel is configured.
func (c Config) Notifying() bool {
	return c.NotifyCommand != "" || c.NotifyWebhook != "" || c.NotifyDesktop
}

func setNotifyWebhook(c *Config, v, _ string) string {
	if msg := webhookProblem(v); msg != "" {
		return msg
	}
	c.NotifyWebhook = v
	return ""
}

func checkNotifyWebhook(c *Config) string { return webhookProblem(c.NotifyWebhook) }

// webhookProblem accepts "" (none) or an absolute http(s) URL with a host.
func webhookProblem(v string) string {
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("must be an http:// or https:// URL, got %q", v)
	}
	return ""
}

func setNotifyOn(c *Config, v, _ string) string {
	var list []string
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			list = append(list, n)
		}
	}
	if msg := notifyOnProblem(list); msg != "" {
		return msg
	}
	c.NotifyOn = list
	return ""
}

func checkNotifyOn(c *Config) string { return notifyOnProblem(c.NotifyOn) }

// notifyOnProblem checks a notify_on list; an empty list turns
// notifications off.
func notifyOnProblem(list []string) string {
	var problems []string
	for i, n := range list {
		switch {
		case !slices.Contains(notifyNames, n):
			msg := fmt.Sprintf("unknown change %q", n)
			if s := suggest(n, notifyNames); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			problems = append(problems, msg+"; use a comma list of "+strings.Join(notifyNames, ", "))
		case slices.Index(list, n) < i:
			problems = append(problems, fmt.Sprintf("%q is listed twice", n))
		}
	}
	return strings.Join(problems, "; ")
}
