package dashboard

import (
	"encoding/json"
	"strings"

	"github.com/loopd/loopd/internal/api"
)

// offer is what a run's page offers to do with the run in its present
// state: only the buttons whose request the daemon would accept. A button
// that can only earn a refusal ("run … has already ended") is noise, and a
// Land button on a run that ran in place invites a click that can never
// work.
//
//	status       stop  stop now  pause  resume        signal  land
//	PENDING      yes   -         yes    -             cond    -
//	RUNNING      yes   yes       yes¹   pause asked¹  cond    -
//	PAUSED       yes   -         -      yes           cond    -
//	WAITING      yes   -         yes    yes           cond    -
//	COMPLETED    -     -         -      -             -       worktree²
//	FAILED       -     -         -      yes³          -       worktree²
//	ABORTED      -     -         -      yes³          -       worktree²
//	INTERRUPTED  -     -         -      yes³          -       worktree²
//
// ¹ once a pause is requested, Pause gives way to Resume, which cancels it.
// ² a worktree run with a branch, until it has landed.
// ³ unless its worktree was removed (loopd never recreates one).
// cond: the run has a user_signal condition and its signal is not set yet.
// A run WAITING with reason needs_answer also offers Answer (its agent
// asked a question; loopctl answer).
// A stop asked for hides Stop (asking twice changes nothing); a stop --now
// asked for hides Stop now as well.
//
// An ended task run (a backlog's child) offers neither Resume nor Land:
// its backlog lands it, through its one-at-a-time queue, and a blocked
// task runs again by the backlog page's Retry. A task run landed or
// resumed by hand would bypass the queue, or run with its task still
// blocked; the note says where to go instead.
type offer struct {
	Stop, StopNow, Pause, Resume, Signal, Land bool
	Answer                                     bool
	// Note says why an ended run offers less than it might, or nothing.
	Note string
}

// offerFor is the table above.
func offerFor(r api.Run) offer {
	var o offer
	signal := !r.UserSignal && usesCondition(r, "user_signal")
	switch r.Status {
	case api.RunPending:
		o = offer{Stop: true, Pause: !r.PauseRequest, Resume: r.PauseRequest, Signal: signal}
	case api.RunRunning:
		o = offer{Stop: r.StopRequested == "", StopNow: r.StopRequested != "now", Pause: !r.PauseRequest,
			Resume: r.PauseRequest, Signal: signal}
	case api.RunPaused:
		o = offer{Stop: true, Resume: true, Signal: signal}
	case api.RunWaiting:
		o = offer{Stop: true, Pause: true, Resume: true, Signal: signal, Answer: r.Reason == "needs_answer"}
	default: // ended
		worktree := r.Isolation == "worktree" && r.Branch != ""
		gone := r.WorktreeState == "removed" || r.WorktreeState == "gone"
		o.Resume = r.Status != api.RunCompleted && !gone
		o.Land = worktree && r.LandedCommit == ""
		switch {
		case worktree && r.LandedCommit != "":
			o.Note = "Landed into " + r.BaseBranch + " as " + shortCommit(r.LandedCommit) + "."
		case !worktree && r.Status == api.RunCompleted:
			o.Note = "Completed in place: its changes are already in the workspace."
		case !worktree:
			o.Note = "Ran in place: its changes are already in the workspace, there is no branch to land."
		}
		if gone && r.Status != api.RunCompleted {
			o.Note = strings.TrimSpace(o.Note + " Its worktree was removed, so it cannot be resumed; every recorded iteration is on branch " + r.Branch + ".")
		}
		if r.Parent != "" {
			o.Resume, o.Land = false, false
			switch {
			case r.LandedCommit != "":
			case r.Status == api.RunCompleted:
				o.Note = "A task run is landed by its backlog, into " + r.BaseBranch + ", one land at a time."
			default:
				o.Note = "A task run is landed by its backlog; to run its task again, Retry it on the backlog's page."
			}
		}
	}
	return o
}

// Names lists what o offers, by the data-offer names of the page's
// controls, for a live update.
func (o offer) Names() []string {
	names := make([]string, 0, 7)
	for _, c := range []struct {
		on   bool
		name string
	}{{o.Stop, "stop"}, {o.StopNow, "stop-now"}, {o.Pause, "pause"}, {o.Resume, "resume"}, {o.Signal, "signal"}, {o.Answer, "answer"}, {o.Land, "land"}} {
		if c.on {
			names = append(names, c.name)
		}
	}
	return names
}

// usesCondition reports whether a condition of type typ is among the
// run's conditions at any depth: a user_signal inside an any, all or not
// reads the signal as surely as one at the top (loopctl signal accepts
// both), so the button must be offered for both.
func usesCondition(r api.Run, typ string) bool {
	for _, c := range r.Conditions {
		if c.Type == typ {
			return true
		}
		var spec any
		if len(c.Spec) > 0 && json.Unmarshal(c.Spec, &spec) == nil && specUses(spec, typ) {
			return true
		}
	}
	return false
}

// specUses walks a condition's tagged JSON: a composite holds its
// conditions under "conditions" (any, all) or "condition" (not).
func specUses(v any, typ string) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if m["type"] == typ {
		return true
	}
	if inner, ok := m["condition"]; ok && specUses(inner, typ) {
		return true
	}
	list, _ := m["conditions"].([]any)
	for _, c := range list {
		if specUses(c, typ) {
			return true
		}
	}
	return false
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
