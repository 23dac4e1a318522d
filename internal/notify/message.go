package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

// Message is what every channel delivers: the webhook's JSON body and the
// notify command's standard input.
//
// One body serves the usual incoming webhooks: Slack reads "text",
// Discord reads "content" (the same text; Discord refuses a body without
// it), and ntfy publishes a template of the JSON when the URL asks for one
// (https://ntfy.sh/TOPIC?tpl=1&t={{.title}}&m={{.text}}). Each ignores the
// fields it does not know, so the event and the run ride along for
// programs of your own.
type Message struct {
	// Text is the human summary, a few short lines (at most 1,900
	// characters, under Discord's limit).
	Text string `json:"text"`
	// Content repeats Text for Discord.
	Content string `json:"content"`
	// Title is a one-line headline, for ntfy and notify-send.
	Title string `json:"title"`
	// Status is the run status the event reports (COMPLETED, WAITING…).
	Status api.RunStatus `json:"status"`
	// Event is the event that made the notification due, as `loopctl
	// events --json` prints it.
	Event api.Event `json:"event"`
	// Run is the run as `loopctl status --json` shows it now, without its
	// configuration (which may hold secrets such as this webhook's URL).
	Run api.Run `json:"run"`
}

// statusOf maps a notifiable event to the run status it reports.
func statusOf(t events.Type) (api.RunStatus, bool) {
	switch t {
	case events.RunCompleted:
		return api.RunCompleted, true
	case events.RunFailed:
		return api.RunFailed, true
	case events.RunAborted:
		return api.RunAborted, true
	case events.RunInterrupted:
		return api.RunInterrupted, true
	case events.RunWaiting:
		return api.RunWaiting, true
	case events.RunPaused:
		return api.RunPaused, true
	}
	return "", false
}

// taskChange is the notify_on name of a backlog's task event ("" for
// other events): its TASK_DONE and TASK_BLOCKED.
func taskChange(t events.Type) string {
	switch t {
	case events.TaskDone:
		return "TASK_DONE"
	case events.TaskBlocked:
		return "TASK_BLOCKED"
	}
	return ""
}

// maxText keeps Text under Discord's 2,000-character limit for content.
const maxText = 1900

// newMessage builds the message for ev about run. The reason and
// description come from the event, not the run, which may have moved on
// (resumed) since. dashboard tells whether the daemon serves the
// dashboard.
func newMessage(ev api.Event, run api.Run, dashboard bool) Message {
	status, _ := statusOf(events.Type(ev.Type))
	if taskChange(events.Type(ev.Type)) != "" {
		return taskMessage(ev, run)
	}
	var p struct {
		Reason      string   `json:"reason"`
		Description string   `json:"description"`
		Until       api.Time `json:"until"`
		Kind        string   `json:"kind"`
		Question    string   `json:"question"`
	}
	_ = json.Unmarshal(ev.Payload, &p)
	name := run.Name
	if name == "" {
		name = shortID(run.ID)
	}
	title := fmt.Sprintf("loopd: %s %s", name, status)
	var b strings.Builder
	switch status {
	case api.RunWaiting:
		fmt.Fprintf(&b, "loopd run %s is WAITING", name)
		if !p.Until.IsZero() {
			fmt.Fprintf(&b, " until %s", p.Until.Local().Format(time.DateTime))
		}
		switch {
		case p.Kind == "needs_answer":
			fmt.Fprintf(&b, ": its agent asks a question\n%s\nAnswer with: loopctl answer %s TEXT", p.Question, shortID(run.ID))
		default:
			if p.Reason != "" {
				fmt.Fprintf(&b, ": %s", p.Reason)
			}
			b.WriteString("\nIt resumes by itself.")
		}
	case api.RunPaused:
		fmt.Fprintf(&b, "loopd run %s is PAUSED (loopctl resume %s)", name, shortID(run.ID))
	default:
		fmt.Fprintf(&b, "loopd run %s %s", name, status)
		if p.Reason != "" {
			fmt.Fprintf(&b, ": %s", p.Reason)
		}
		if p.Description != "" {
			fmt.Fprintf(&b, "\n%s", p.Description)
		}
	}
	fmt.Fprintf(&b, "\n%s · %d iteration(s) · %s", run.Workspace, run.Iteration, costText(run.Usage))
	if g := firstLine(run.Goal); g != "" {
		fmt.Fprintf(&b, "\nGoal: %s", g)
	}
	// A run that got stuck or hit a limit wants a look: say how. These
	// lines survive the clip (a long description is cut instead). The
	// dashboard's address is not written: its random host name is told
	// only to the user (the session cookie's defence against other local
	// users), and a webhook's text goes to a third party; `loopctl
	// dashboard RUN` prints a login link that opens the run's page.
	var next string
	if status == api.RunFailed || status == api.RunAborted {
		next = fmt.Sprintf("\nNext: loopctl postmortem %s", shortID(run.ID))
		if dashboard {
			next += fmt.Sprintf("\nDashboard: loopctl dashboard %s", shortID(run.ID))
		}
	}
	text := clip(b.String(), maxText-len(next)) + next
	run.Config, run.Evaluations = nil, nil
	return Message{Text: text, Content: text, Title: title, Status: status, Event: ev, Run: run}
}

// taskMessage is the message of a backlog's TASK_DONE or TASK_BLOCKED.
func taskMessage(ev api.Event, run api.Run) Message {
	var p struct {
		Task  string `json:"task"`
		Title string `json:"title"`
		Why   string `json:"why"`
	}
	_ = json.Unmarshal(ev.Payload, &p)
	name := run.Name
	if name == "" {
		name = shortID(run.ID)
	}
	what := "done"
	if ev.Type == string(events.TaskBlocked) {
		what = "blocked"
	}
	title := fmt.Sprintf("loopd: backlog %s: task %s %s", name, p.Task, what)
	var b strings.Builder
	fmt.Fprintf(&b, "loopd backlog %s: task %s is %s", name, p.Task, what)
	if p.Title != "" {
		fmt.Fprintf(&b, " (%s)", firstLine(p.Title))
	}
	if p.Why != "" {
		fmt.Fprintf(&b, "\n%s", p.Why)
	}
	next := fmt.Sprintf("\nTasks: loopctl tasks %s", shortID(run.ID))
	text := clip(b.String(), maxText-len(next)) + next
	run.Config, run.Evaluations = nil, nil
	return Message{Text: text, Content: text, Title: title, Status: run.Status, Event: ev, Run: run}
}

func costText(u api.Usage) string {
	s := fmt.Sprintf("$%.2f", u.CostUSD)
	if u.CostUnknown {
		s += "+?"
	}
	return s
}

func shortID(id string) string { return id[:min(len(id), 8)] }

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return clip(s, 200)
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
