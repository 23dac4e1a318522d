// Package events defines loopd's event types and the live bus that wakes
// followers when new events commit.
//
// Events themselves are rows in SQLite (see package storage): the bus carries
// no payloads, only "the log now reaches seq N". A follower reads the rows
// after its last seen seq, then waits on the bus for more. Because every
// follower re-reads from the database, nothing is missed or duplicated across
// the replay/live boundary, and a slow follower costs the daemon nothing but
// its own goroutine.
package events

// Type names an event (docs/reference.md, "Events").
type Type string

const (
	DaemonStarted       Type = "DAEMON_STARTED"       // a daemon took the lock and serves
	RunCreated          Type = "RUN_CREATED"          // a run was created (PENDING)
	RunStarted          Type = "RUN_STARTED"          // a run was claimed and is RUNNING
	StepStarted         Type = "STEP_STARTED"         // a step's process was launched
	StepFinished        Type = "STEP_FINISHED"        // a step ended; payload has its status
	StepAdopted         Type = "STEP_ADOPTED"         // after a restart, a still-running step was re-attached
	StepInterrupted     Type = "STEP_INTERRUPTED"     // after a restart, a step's outcome was lost
	RunPaused           Type = "RUN_PAUSED"           // the run is held by the user
	RunResumed          Type = "RUN_RESUMED"          // a paused, waiting or ended run continues
	RunWaiting          Type = "RUN_WAITING"          // the agent hit a usage limit (the run waits for its reset) or asked a question (payload kind needs_answer, question: it waits for loopctl answer)
	RunRecovered        Type = "RUN_RECOVERED"        // a RUNNING run was picked up by a restarted daemon, or taken over by another fleet worker ({from_worker, to_worker})
	ConditionProgressed Type = "CONDITION_PROGRESSED" // a stop condition's progress changed
	RunCompleted        Type = "RUN_COMPLETED"        // terminal: COMPLETED
	RunFailed           Type = "RUN_FAILED"           // terminal: FAILED
	RunAborted          Type = "RUN_ABORTED"          // terminal: ABORTED
	RunInterrupted      Type = "RUN_INTERRUPTED"      // terminal: INTERRUPTED
	PostmortemWritten   Type = "POSTMORTEM_WRITTEN"   // runs/<id>/postmortem.md and summary.json exist
	RunLanded           Type = "RUN_LANDED"           // loopctl land merged a worktree run's branch into its base branch, or land --push pushed it (payload push, pr_url)
	NotificationSent    Type = "NOTIFICATION_SENT"    // a notification was delivered (one channel, one attempt)
	NotificationFailed  Type = "NOTIFICATION_FAILED"  // a notification attempt failed; final says whether it is retried
	TaskStarted         Type = "TASK_STARTED"         // a backlog started a task run for a task (or sent it back to its agent after a refused land: land_retry)
	TaskLanded          Type = "TASK_LANDED"          // a task run was landed into the backlog's integration branch (task, run, commit, verified)
	TaskDone            Type = "TASK_DONE"            // a task is done: landed
	TaskBlocked         Type = "TASK_BLOCKED"         // a task cannot go on (why: its run failed, or its land was refused too often)
	TaskSkipped         Type = "TASK_SKIPPED"         // a task will not run: a task it depends on is blocked
	TaskState           Type = "TASK_STATE"           // a task changed state where no other task event says so: pending to ready, running to landing, running to or from waiting (task, from, to; run when it has one)
)

// Terminal reports whether t ends a run.
func (t Type) Terminal() bool {
	switch t {
	case RunCompleted, RunFailed, RunAborted, RunInterrupted:
		return true
	}
	return false
}

// TerminalPayload is the payload of every terminal event.
type TerminalPayload struct {
	RunID       string `json:"run_id"`
	Reason      string `json:"reason"`
	Description string `json:"description"`
	// Condition is the triggering condition's tagged JSON, or null.
	Condition any `json:"condition"`
}
