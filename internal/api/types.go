// Package api holds loopd's wire contract: the JSON types exchanged between
// the daemon and loopctl over the Unix socket, the error type, and Client.
//
// Field names are part of the product contract (docs/http-api.md): add fields,
// never rename them. The package uses only the standard library so that
// loopctl stays free of SQLite and the daemon's dependencies.
package api

import (
	"encoding/json"
	"time"
)

// RunStatus is the state of a run (docs/reference.md, "Run statuses").
type RunStatus string

const (
	RunPending     RunStatus = "PENDING"     // created, waiting for a slot
	RunRunning     RunStatus = "RUNNING"     // steps are executing
	RunPaused      RunStatus = "PAUSED"      // held by the user; survives daemon restarts
	RunWaiting     RunStatus = "WAITING"     // the agent hit a usage limit; resumes by itself at the reset time
	RunCompleted   RunStatus = "COMPLETED"   // the completion gate or a success condition was met
	RunFailed      RunStatus = "FAILED"      // stuck: failure streak, stuck task, no progress, failure condition
	RunAborted     RunStatus = "ABORTED"     // a limit was reached, or a fatal error
	RunInterrupted RunStatus = "INTERRUPTED" // stopped by the user
)

// Terminal reports whether a run in this status has ended.
func (s RunStatus) Terminal() bool {
	switch s {
	case RunCompleted, RunFailed, RunAborted, RunInterrupted:
		return true
	}
	return false
}

// ExitCode is the `loopctl wait` exit code of a terminal status, and -1 for
// a run that has not ended.
func (s RunStatus) ExitCode() int {
	switch s {
	case RunCompleted:
		return 0
	case RunFailed:
		return 1
	case RunAborted:
		return 2
	case RunInterrupted:
		return 3
	}
	return -1
}

// Valid reports whether s is one of the run statuses.
func (s RunStatus) Valid() bool {
	switch s {
	case RunPending, RunRunning, RunPaused, RunWaiting:
		return true
	}
	return s.Terminal()
}

// StepStatus is the state of one step.
type StepStatus string

const (
	StepRunning     StepStatus = "RUNNING"     // the step's process is executing
	StepSucceeded   StepStatus = "SUCCEEDED"   // the phase passed
	StepFailed      StepStatus = "FAILED"      // the phase failed (exit code, timeout, failing tests, not approved)
	StepCanceled    StepStatus = "CANCELED"    // killed by `loopctl stop --now` or a run limit
	StepInterrupted StepStatus = "INTERRUPTED" // the daemon died and the outcome was lost; never counted as a failure
)

// Phase is the kind of work a step does.
type Phase string

const (
	PhaseSetup          Phase = "setup"          // setup_command, once in a new worktree before iteration 1
	PhaseBaseline       Phase = "baseline"       // verify_baseline: the verification, once on the untouched workspace before iteration 1
	PhaseImplementation Phase = "implementation" // the agent works on the goal
	PhaseReview         Phase = "review"         // the optional reviewer command judges the work
	PhaseVerification   Phase = "verification"   // the project's own checks
)

// Phases lists every phase of an iteration in pipeline order (setup and
// baseline are not part of an iteration).
var Phases = []Phase{PhaseImplementation, PhaseReview, PhaseVerification}

// Time is a timestamp that encodes as RFC 3339 with milliseconds, and as
// null when zero.
type Time struct{ time.Time }

// TimeFormat is the JSON timestamp layout.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + t.UTC().Format(TimeFormat) + `"`), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

// Millis converts Unix milliseconds to a Time; 0 is the zero Time.
func Millis(ms int64) Time {
	if ms == 0 {
		return Time{}
	}
	return Time{time.UnixMilli(ms)}
}

// Usage is token usage and cost, of a step or summed over a run.
type Usage struct {
	InputTokens      int64    `json:"input_tokens"`       // input not served from cache
	OutputTokens     int64    `json:"output_tokens"`      //
	CacheReadTokens  int64    `json:"cache_read_tokens"`  //
	CacheWriteTokens int64    `json:"cache_write_tokens"` //
	CostUSD          float64  `json:"cost_usd"`           // priced from the table when the model is known, else as reported
	ReportedCostUSD  *float64 `json:"reported_cost_usd"`  // what the agent itself reported; null when it reported none
	// CostUnknown is true when some usage could not be priced and the agent
	// reported no cost for it: CostUSD then undercounts, and says so.
	CostUnknown bool   `json:"cost_unknown,omitempty"`
	Model       string `json:"model,omitempty"`
	// ReasoningTokens are the part of OutputTokens the agent reported as
	// reasoning (Codex reasoning, Gemini thoughts, Claude thinking).
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// ReportedCost returns what the agent reported, and whether it reported
// anything at all.
func (u Usage) ReportedCost() (float64, bool) {
	if u.ReportedCostUSD == nil {
		return 0, false
	}
	return *u.ReportedCostUSD, true
}

// Tests is what a verification step's output says about the project's tests.
// A nil count is unknown (the runner's output did not show it), never 0.
type Tests struct {
	Format      string   `json:"format,omitempty"`
	Passed      *int     `json:"passed"`
	Failed      *int     `json:"failed"`
	Skipped     *int     `json:"skipped"`
	FailedNames []string `json:"failed_names"`
	// IgnoredNames are the failing tests (of FailedNames) that were already
	// failing in the run's baseline step (verify_baseline): pre-existing,
	// not held against the run by the verify gate.
	IgnoredNames []string `json:"ignored_names,omitempty"`
	BuildFailed  bool     `json:"build_failed,omitempty"`
	Summary      string   `json:"summary,omitempty"`
}

// Counters are a run's current consecutive-failure streaks per phase.
type Counters struct {
	Implementation int `json:"implementation"`
	Review         int `json:"review"`
	Verification   int `json:"verification"`
}

// Condition is one stop condition (or the completion gate) as evaluated for
// a run, for `loopctl status`.
type Condition struct {
	Type        string          `json:"type"`
	Kind        string          `json:"kind"` // class: "limit", "success" or "failure"
	Description string          `json:"description"`
	Met         bool            `json:"met"`
	Progress    *float64        `json:"progress"`
	Reason      string          `json:"reason"`
	Spec        json.RawMessage `json:"spec,omitempty"` // the condition's tagged JSON
	TimedOut    bool            `json:"timed_out,omitempty"`
	Unmeasured  bool            `json:"unmeasurable,omitempty"`
	Error       string          `json:"error,omitempty"`
	DurationUS  int64           `json:"duration_us,omitempty"`
}

// Run is one loop toward one goal in one workspace.
type Run struct {
	ID          string      `json:"id"`
	Name        string      `json:"name"`
	Workspace   string      `json:"workspace"`
	Goal        string      `json:"goal"`
	Status      RunStatus   `json:"status"`
	Reason      string      `json:"reason"`
	Description string      `json:"description"`
	ExitCode    *int        `json:"exit_code"`
	CreatedAt   Time        `json:"created_at"`
	StartedAt   Time        `json:"started_at"`
	EndedAt     Time        `json:"ended_at"`
	Iteration   int         `json:"iteration"`
	Counters    Counters    `json:"counters"`
	Usage       Usage       `json:"usage"`
	Conditions  []Condition `json:"conditions"`
	// More detail for `loopctl status`.
	ElapsedMS     int64           `json:"elapsed_ms"`
	Steps         int             `json:"steps"`
	CurrentStep   *Step           `json:"current_step,omitempty"`
	StopRequested string          `json:"stop_requested,omitempty"` // "graceful" or "now"
	PauseRequest  bool            `json:"pause_requested,omitempty"`
	UserSignal    bool            `json:"user_signal,omitempty"`
	WaitUntil     Time            `json:"wait_until"`
	Condition     json.RawMessage `json:"condition,omitempty"` // the triggering condition
	Config        json.RawMessage `json:"config,omitempty"`
	Warnings      []string        `json:"warnings,omitempty"`
	Evaluations   []Evaluation    `json:"evaluations,omitempty"` // --debug: the last 100 evaluations

	// FailingTrend is the failing-test counts of the verification failures
	// since the last passing one, oldest first (at most eight; -1 where not
	// parsed): "failing 5 → 4 → 3" in status.
	FailingTrend []int `json:"failing_trend,omitempty"`
	// Baseline is what verify_baseline found before iteration 1 and what
	// the newest verification ignored of it (status only; nil without
	// verify_baseline).
	Baseline *Baseline `json:"baseline,omitempty"`

	// Workspace isolation and landing (docs/workspaces.md).
	Isolation     string `json:"isolation"`      // "in_place" or "worktree"
	Worktree      string `json:"worktree"`       // the run's worktree; "" for in_place
	Branch        string `json:"branch"`         // loop/<short-id>; "" for in_place
	BaseBranch    string `json:"base_branch"`    // the checkout's branch when the run started
	BaseCommit    string `json:"base_commit"`    // the checkout's HEAD when the run started
	LandedCommit  string `json:"landed_commit"`  // what `loopctl land` made; "" until landed
	WorktreeState string `json:"worktree_state"` // "", "present", "gone" (removed by hand) or "removed" (cleaned)

	// RepoURL is a fleet run's repository: the origin of the clone it was
	// started from through LOOPD_URL ("" otherwise).
	RepoURL string `json:"repo_url,omitempty"`
	// CreatedBy is the user whose token created the run ("" for the
	// daemon's owner).
	CreatedBy string `json:"created_by,omitempty"`
	// Worker is the fleet worker that holds, or last held, the run
	// (docs/fleet.md); absent in the embedded mode.
	Worker string `json:"worker,omitempty"`
	// Backlogs (docs/backlogs.md).
	Kind   string `json:"kind,omitempty"` // "backlog" for a backlog run
	Parent string `json:"parent"`         // a task run's backlog; "" otherwise
	// Tasks counts a backlog's tasks by state (pending, ready, running,
	// waiting, landing, done, blocked, skipped); nil for any other run.
	Tasks map[string]int `json:"tasks,omitempty"`
}

// Baseline is a run's verify_baseline record.
type Baseline struct {
	// Seq is the baseline step's; 0 when it has not run (yet).
	Seq int `json:"seq"`
	// Known says the baseline's tests were parsed: only then are failures
	// ignored. Failing lists the tests failing there (pre-existing).
	Known   bool     `json:"known"`
	Failing []string `json:"failing"`
	// IgnoredSeq is the newest counted verification step; Ignored lists
	// its failing tests that were pre-existing, and so ignored.
	IgnoredSeq int      `json:"ignored_seq,omitempty"`
	Ignored    []string `json:"ignored"`
}

// Changes is what one implementation step changed in the workspace, from the
// change ledger (docs/workspaces.md).
type Changes struct {
	Commit       string   `json:"commit"` // "" when nothing changed
	FilesChanged int      `json:"files_changed"`
	Insertions   int      `json:"insertions"`
	Deletions    int      `json:"deletions"`
	BinaryFiles  int      `json:"binary_files"` // of FilesChanged, those git counts no lines for (images, big files)
	Files        []string `json:"files"`
}

// Evaluation is one pass of the stop-condition evaluator over a run.
type Evaluation struct {
	StepID     int64       `json:"step_id"`
	Iteration  int         `json:"iteration"`
	At         Time        `json:"at"`
	DurationUS int64       `json:"duration_us"`
	Results    []Condition `json:"results"`
}

// Step is one execution of one phase.
type Step struct {
	ID         int64      `json:"id"`
	RunID      string     `json:"run_id"`
	Seq        int        `json:"seq"`
	Phase      Phase      `json:"phase"`
	Iteration  int        `json:"iteration"`
	Status     StepStatus `json:"status"`
	ExitCode   *int       `json:"exit_code"`
	Error      string     `json:"error"`
	StartedAt  Time       `json:"started_at"`
	EndedAt    Time       `json:"ended_at"`
	DurationMS int64      `json:"duration_ms"`
	LogPath    string     `json:"log_path"`
	Usage      Usage      `json:"usage"`
	Tests      *Tests     `json:"tests"`
	Promise    bool       `json:"promise,omitempty"`
	// Question is what the agent asked at the end of this step (the run
	// WAITs with reason needs_answer); Answer is the user's answer.
	Question string   `json:"question,omitempty"`
	Answer   string   `json:"answer,omitempty"`
	Pid      int      `json:"pid,omitempty"`
	Changes  *Changes `json:"changes"` // nil: nothing is known (not an implementation step, or no ledger)
}

// Event is one entry of the durable event log (docs/reference.md, "Events").
type Event struct {
	Seq     int64           `json:"seq"`
	RunID   string          `json:"run_id"`
	StepID  *int64          `json:"step_id"`
	Type    string          `json:"type"`
	TS      Time            `json:"ts"`
	Payload json.RawMessage `json:"payload"`
}

// CreateRunRequest asks the daemon to create a run. Paths are absolute:
// loopctl resolves them against its working directory before sending.
type CreateRunRequest struct {
	Workspace  string   `json:"workspace"`
	Goal       string   `json:"goal,omitempty"`
	PromptFile string   `json:"prompt_file,omitempty"`
	SpecFile   string   `json:"spec_file,omitempty"`
	PlanFile   string   `json:"plan_file,omitempty"`
	Name       string   `json:"name,omitempty"`
	Set        []string `json:"set,omitempty"`
	StopFile   string   `json:"stop_file,omitempty"`
	// RepoURL and BaseCommit are where a fleet run comes from (loopctl
	// through LOOPD_URL: the clone's origin and its HEAD, which is on
	// origin). Both or neither.
	RepoURL    string `json:"repo_url,omitempty"`
	BaseCommit string `json:"base_commit,omitempty"`
	// CreatedBy is set by the daemon from the request's user token,
	// never from the body.
	CreatedBy string `json:"-"`
	// TasksFile, when set, makes the run a backlog run working through the
	// task list in that file (docs/backlogs.md).
	TasksFile string `json:"tasks_file,omitempty"`
	// BaseBranch is the clone's branch at BaseCommit (loopctl through
	// LOOPD_URL), for land; empty on a detached HEAD.
	BaseBranch string `json:"base_branch,omitempty"`
	// Snapshot, sent with RepoURL and BaseCommit by loopctl through
	// LOOPD_URL, holds the clone's files at BaseCommit: the API node
	// builds the run from them and never reads Workspace, which names the
	// clone on the user's machine.
	Snapshot *Snapshot `json:"snapshot,omitempty"`
}

// StopRequest asks for a run to stop: after the current step, or at once.
type StopRequest struct {
	Now bool `json:"now,omitempty"`
}

// ResumeRequest continues a run, optionally raising limits.
type ResumeRequest struct {
	Set []string `json:"set,omitempty"`
	// OntoBase merges the current base branch into an ended worktree
	// run's branch first (conflicts left in the files for the agent).
	OntoBase bool `json:"onto_base,omitempty"`
}

// AnswerRequest answers the question of a run WAITING with reason
// needs_answer, and resumes it.
type AnswerRequest struct {
	Text string `json:"text"`
}

// DaemonStopRequest asks the daemon to exit.
type DaemonStopRequest struct {
	KillSteps bool `json:"kill_steps,omitempty"`
}

// DaemonInfo describes the running daemon.
type DaemonInfo struct {
	PID           int    `json:"pid"`
	Version       string `json:"version"`
	Home          string `json:"home"`
	Socket        string `json:"socket"`
	StartedAt     Time   `json:"started_at"`
	ActiveRuns    int    `json:"active_runs"`
	MaxConcurrent int    `json:"max_concurrent_runs"`

	// HTTP is the address the TCP listener (dashboard and API) is bound
	// to, "" when the daemon has none; Dashboard is the dashboard's URL
	// there (`loopctl dashboard` prints a login link to it), "" when that
	// address serves no dashboard.
	HTTP      string `json:"http,omitempty"`
	Dashboard string `json:"dashboard,omitempty"`

	// Worktrees is the disk the run worktrees take.
	Worktrees *WorktreeDisk `json:"worktrees,omitempty"`

	// A fleet worker's (docs/fleet.md): its store's URL without the
	// password, its worker id ("" for an API-only node) and the runs it
	// holds leases on. Absent for the embedded daemon.
	Store  string   `json:"store,omitempty"`
	Worker string   `json:"worker,omitempty"`
	Leases []string `json:"leases,omitempty"`
}

// Postmortem is the report written when a run ends.
type Postmortem struct {
	RunID    string          `json:"run_id"`
	Markdown string          `json:"markdown"`
	Summary  json.RawMessage `json:"summary"`
}

// LandRequest asks the daemon to land a worktree run's branch into its
// base branch in the user's checkout (`loopctl land`).
type LandRequest struct {
	Squash   bool   `json:"squash,omitempty"`
	Message  string `json:"message,omitempty"`
	NoVerify bool   `json:"no_verify,omitempty"` // land without testing the combination when the base moved
	// Push pushes the run's branch to Remote instead of landing it in
	// the checkout (loopctl land --push [REMOTE]), then runs pr_command.
	Push bool `json:"push,omitempty"`
	// Remote is a remote's name, a URL or an absolute path; "" for the
	// base branch's upstream remote, else origin.
	Remote string `json:"remote,omitempty"`
}

// LandMessage is one line of the NDJSON stream a land answers with:
// progress lines, then exactly one of Result, Refusal or Error.
type LandMessage struct {
	Progress string       `json:"progress,omitempty"`
	Result   *LandResult  `json:"result,omitempty"`
	Refusal  *LandRefusal `json:"refusal,omitempty"`
	Error    *Error       `json:"error,omitempty"`
}

// LandResult is what a land did; its fields are also RUN_LANDED's payload.
type LandResult struct {
	RunID      string `json:"run_id"`
	Branch     string `json:"branch"`
	BaseBranch string `json:"base_branch"`
	Commit     string `json:"commit"` // the commit the base branch now points to
	Mode       string `json:"mode"`   // "fast-forward", "merge" or "squash"
	// Verified is true when what landed passed verify_command: the run's
	// own last verification (base unchanged) or a new one of the
	// combination (base moved).
	Verified     bool   `json:"verified"`
	TestedCommit string `json:"tested_commit"` // the commit verification ran on; "" when not verified
	Checkout     string `json:"checkout"`
	BaseMoved    bool   `json:"base_moved"`
	Note         string `json:"note,omitempty"` // why it was not verified
	// Warnings are things the user asked for that the land could not do
	// (a --message on a fast-forward).
	Warnings []string `json:"warnings,omitempty"`

	// Push is what a push (mode "push") did; nil for a land.
	Push *PushResult `json:"push,omitempty"`
	// PRURL is the first URL pr_command printed ("" when none, or no
	// pr_command ran).
	PRURL string `json:"pr_url,omitempty"`
	// PRCommand is how pr_command went; nil when none is configured.
	PRCommand *PRCommandResult `json:"pr_command,omitempty"`
}

// PushResult is a push of a run's branch (loopctl land --push).
type PushResult struct {
	Remote string `json:"remote"` // the remote's name; "" when a URL or path was given
	URL    string `json:"url"`    // where git pushed
	Branch string `json:"branch"` // the branch on the remote
	Commit string `json:"commit"` // what the remote branch now points to
	// Previous is where the remote branch was before ("" when the push
	// made it).
	Previous string `json:"previous"`
}

// PushedTo reads a RUN_LANDED event's payload: the commit it records as
// pushed to branch at url, and whether it records such a push. Both ways
// a push is made (the daemon's, and loopctl's in a clone of a fleet run)
// read the last one this way before pushing again.
func PushedTo(payload []byte, url, branch string) (string, bool) {
	var p struct {
		Push *PushResult `json:"push"`
	}
	if json.Unmarshal(payload, &p) != nil || p.Push == nil || p.Push.URL != url || p.Push.Branch != branch {
		return "", false
	}
	return p.Push.Commit, true
}

// PRCommandResult is how pr_command ran after a push.
type PRCommandResult struct {
	ExitCode int    `json:"exit_code"` // -1 when it did not exit on its own (timeout, interrupted)
	LogPath  string `json:"log_path"`  // its whole output
	Error    string `json:"error,omitempty"`
}

// LandRefusal is a land that changed nothing in the user's checkout.
type LandRefusal struct {
	RunID      string   `json:"run_id"`
	Kind       string   `json:"kind"` // active, not_worktree, wrong_branch, dirty, conflict, untested, verify_failed, …
	Message    string   `json:"message"`
	Branch     string   `json:"branch"`
	BaseBranch string   `json:"base_branch"`
	Files      []string `json:"files,omitempty"`
	Hand       []string `json:"hand,omitempty"`        // git commands to finish by hand
	OutputTail string   `json:"output_tail,omitempty"` // the failing verification's output, last lines
	LogPath    string   `json:"log_path,omitempty"`    // the whole verification output
}

// DiffStat is the size of a diff (`loopctl diff --json`).
type DiffStat struct {
	RunID        string     `json:"run_id"`
	Iteration    *int       `json:"iteration"` // nil: the whole run against its base
	From         string     `json:"from"`      // "" when nothing changed
	To           string     `json:"to"`
	FilesChanged int        `json:"files_changed"`
	Insertions   int        `json:"insertions"`
	Deletions    int        `json:"deletions"`
	Files        []FileStat `json:"files"`
}

// FileStat is one file's share of a diff; binary files count no lines.
type FileStat struct {
	Path       string `json:"path"`
	Insertions int    `json:"insertions"`
	Deletions  int    `json:"deletions"`
	Binary     bool   `json:"binary,omitempty"`
}

// CleanRequest asks the daemon to remove worktrees of ended runs
// (`loopctl clean RUN|--ended [--older-than D]`).
type CleanRequest struct {
	Run       string `json:"run,omitempty"` // a run reference, or "" with Ended
	Workspace string `json:"workspace,omitempty"`
	Ended     bool   `json:"ended,omitempty"`
	OlderThan string `json:"older_than,omitempty"` // e.g. "7d", "12h": ended at least this long ago
	// Branches also removes landed loop/* branches and refs/loop/<id>/*
	// snapshot refs of the ended runs visited (only those loopd made).
	Branches bool `json:"branches,omitempty"`
}

// CleanedBranch is one of a run's git refs a clean --branches visited: its
// loop/* branch (Branch), or its snapshot refs (Refs, a pattern).
type CleanedBranch struct {
	RunID    string `json:"run_id"`
	Branch   string `json:"branch,omitempty"`
	Refs     string `json:"refs,omitempty"`
	RefCount int    `json:"ref_count,omitempty"`
	Removed  bool   `json:"removed"`
	Reason   string `json:"reason,omitempty"` // why it stays
}

// CleanResult lists what a clean did, worktree by worktree.
type CleanResult struct {
	Removed []CleanedWorktree `json:"removed"`
	Skipped []CleanedWorktree `json:"skipped"`
	// Branches is what --branches did (absent without it).
	Branches []CleanedBranch `json:"branches,omitempty"`
}

// CleanedWorktree is one worktree a clean visited.
type CleanedWorktree struct {
	RunID    string `json:"run_id"`
	Worktree string `json:"worktree"`
	Branch   string `json:"branch"`         // stays
	Gone     bool   `json:"gone,omitempty"` // it had been removed by hand; only git's entry was left
	Reason   string `json:"reason,omitempty"`
	// Worker is, for a fleet run, the worker whose worktree it is: the
	// clean is recorded, and that worker removes it at its next sweep.
	Worker string `json:"worker,omitempty"`
}

// WorktreeDisk is how much disk the run worktrees take (`loopctl daemon
// status`).
type WorktreeDisk struct {
	Count int   `json:"count"` // present worktrees
	Bytes int64 `json:"bytes"`
	// Complete is false when the measure stopped at its time budget: Bytes
	// is then a lower bound.
	Complete   bool `json:"complete"`
	MeasuredAt Time `json:"measured_at"`
}

// DashboardLoginRequest asks the daemon for a dashboard login URL; Run (an
// id, a unique prefix or "last" in Workspace) makes it open that run.
type DashboardLoginRequest struct {
	Run       string `json:"run,omitempty"`
	Workspace string `json:"workspace,omitempty"`
}

// DashboardLogin is a one-time dashboard login URL (`loopctl dashboard`).
type DashboardLogin struct {
	URL       string `json:"url"`
	ExpiresAt Time   `json:"expires_at"`
	RunID     string `json:"run_id,omitempty"`
}
