package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

// Strings is a []string stored as a JSON array.
type Strings []string

// Value implements driver.Valuer.
func (s Strings) Value() (driver.Value, error) {
	if s == nil {
		return "[]", nil
	}
	b, err := json.Marshal([]string(s))
	return string(b), err
}

// Scan implements sql.Scanner.
func (s *Strings) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	case nil:
		*s = nil
		return nil
	default:
		return fmt.Errorf("scan Strings from %T", src)
	}
	return json.Unmarshal(b, (*[]string)(s))
}

// Step is a row of the steps table.
type Step struct {
	ID        int64          `db:"id"`
	RunID     string         `db:"run_id"`
	Seq       int            `db:"seq"`
	Phase     api.Phase      `db:"phase"`
	Iteration int            `db:"iteration"`
	Status    api.StepStatus `db:"status"`
	ExitCode  *int           `db:"exit_code"`
	Error     string         `db:"error"`
	StartedAt int64          `db:"started_at"`
	EndedAt   *int64         `db:"ended_at"`
	LogPath   string         `db:"log_path"`

	Pid       *int   `db:"pid"`
	Pgid      *int   `db:"pgid"`
	ProcStart *int64 `db:"proc_start"`
	BootID    string `db:"boot_id"`
	// CancelCause is why the daemon stopped the step ("" when it did
	// not), recorded before the step was signalled.
	CancelCause CancelCause `db:"cancel_cause"`

	Outcome
}

// Outcome is everything learned about a step when it ends.
type Outcome struct {
	Model            string `db:"model"`
	InputTokens      int64  `db:"input_tokens"`
	OutputTokens     int64  `db:"output_tokens"`
	CacheReadTokens  int64  `db:"cache_read_tokens"`
	CacheWriteTokens int64  `db:"cache_write_tokens"`
	// ReasoningTokens are the part of OutputTokens the agent reported as
	// reasoning; 0 when it reported none.
	ReasoningTokens int64    `db:"reasoning_tokens"`
	UsageFound      bool     `db:"usage_found"`
	ReportedCostUSD *float64 `db:"reported_cost_usd"`
	PricedCostUSD   *float64 `db:"priced_cost_usd"`

	Promise          bool   `db:"promise"`
	FinalMessage     string `db:"final_message"`
	RateLimitedUntil *int64 `db:"rate_limited_until"`
	// APIUnavailable marks a step ended by the model API's trouble: with
	// RateLimitedUntil it makes the run WAIT (reason api_unavailable);
	// without, the trouble outlasted max_api_wait.
	APIUnavailable bool `db:"api_unavailable"`
	// Question is what the agent asked at the end of its final message
	// (redacted); the run WAITs (needs_answer) until Answer is set.
	Question string `db:"question"`
	// Answer is the user's answer to Question (loopctl answer), redacted.
	Answer string `db:"answer"`
	// Credential is the fingerprint of an agent step's preset and
	// credentials (SHA-256, never the key itself); "" when unknown.
	Credential string `db:"credential"`

	TestsFormat      string  `db:"tests_format"`
	TestsPassed      *int    `db:"tests_passed"`
	TestsFailed      *int    `db:"tests_failed"`
	TestsSkipped     *int    `db:"tests_skipped"`
	TestsFailedNames Strings `db:"tests_failed_names"`
	TestsPassedNames Strings `db:"tests_passed_names"`
	// TestsIgnoredNames are the failing tests of a verification step that
	// were already failing in the run's baseline step (verify_baseline):
	// pre-existing, so the verify gate does not hold them against the run.
	TestsIgnoredNames Strings `db:"tests_ignored_names"`

	Fingerprint string `db:"fingerprint"`
	PlanTask    string `db:"plan_task"`
	PlanChecked *int   `db:"plan_checked"`

	// The change ledger: the commit recording what the step changed ("" when
	// nothing changed); the counts are nil when nothing is known.
	ChangeCommit string  `db:"change_commit"`
	FilesChanged *int    `db:"files_changed"`
	Insertions   *int    `db:"insertions"`
	Deletions    *int    `db:"deletions"`
	BinaryFiles  *int    `db:"binary_files"`
	ChangeFiles  Strings `db:"change_files"`
}

// CancelCause is why the daemon stopped a step.
type CancelCause string

const (
	CancelNone        CancelCause = ""             // the step ended by itself
	CancelUser        CancelCause = "user"         // loopctl stop --now
	CancelDaemonStop  CancelCause = "daemon_stop"  // loopctl daemon stop --kill-steps
	CancelMaxDuration CancelCause = "max_duration" // the run's time budget ran out during the step
	CancelStepTimeout CancelCause = "step_timeout" // the step ran longer than step_timeout
	CancelIdle        CancelCause = "idle_timeout" // the step printed nothing for idle_timeout
)

// stepLight are the columns every derivation needs; stepColumns adds the
// bulky ones (final message, test names) needed only for a step's detail.
const stepLight = `id, run_id, seq, phase, iteration, status, exit_code, error, started_at, ended_at, log_path,
	pid, pgid, proc_start, boot_id, cancel_cause, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
	usage_found, reported_cost_usd, priced_cost_usd, promise, rate_limited_until, api_unavailable, reasoning_tokens,
	question, answer, credential, tests_format, tests_passed, tests_failed, tests_skipped, fingerprint, plan_task, plan_checked,
	change_commit, files_changed, insertions, deletions, binary_files`

const stepColumns = stepLight + `, final_message, tests_failed_names, tests_passed_names, tests_ignored_names, change_files`

// InsertStep records a step as RUNNING, with its STEP_STARTED event, before
// its process is launched: a crash between the two leaves a RUNNING step
// that recovery finds and resolves. It sets s.ID and s.StartedAt.
func (t *Tx) InsertStep(s *Step, payload any) error {
	s.StartedAt = t.now
	s.Status = api.StepRunning
	if t.pg {
		// pgx has no LastInsertId: the id comes back with RETURNING.
		q, args, err := sqlx.Named(qInsertStep+` RETURNING id`, s)
		if err == nil {
			err = t.get(&s.ID, q, args...)
		}
		if err != nil {
			return fmt.Errorf("insert step: %w", err)
		}
	} else {
		res, err := t.namedExec(qInsertStep, s)
		if err != nil {
			return fmt.Errorf("insert step: %w", err)
		}
		if s.ID, err = res.LastInsertId(); err != nil {
			return err
		}
	}
	_, err := t.Event(s.RunID, &s.ID, events.StepStarted, payload)
	return err
}

// SetStepProcess records the process of a RUNNING step. The scheduler
// records a step's process with its finish (FinishStep), and calls this
// only when it adopts a step whose process was not recorded yet.
func (t *Tx) SetStepProcess(stepID int64, pid, pgid int, procStart int64, bootID string) error {
	_, err := t.exec(qSetStepProcess, pid, pgid, procStart, bootID, stepID)
	if err != nil {
		return fmt.Errorf("record step process: %w", err)
	}
	return nil
}

// FinishStep moves a RUNNING step to its final status (compare-and-set:
// ErrConflict when it already ended) with everything learned, and appends
// typ (STEP_FINISHED or STEP_INTERRUPTED). EndedAt defaults to now; a step
// whose end was learned after the fact (from its status file) sets it.
func (t *Tx) FinishStep(s *Step, typ events.Type, payload any) error {
	if s.EndedAt == nil {
		s.EndedAt = &t.now
	}
	res, err := t.namedExec(qFinishStep, s)
	if err != nil {
		return fmt.Errorf("finish step %d: %w", s.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("finish step %d: %w", s.ID, ErrConflict)
	}
	_, err = t.Event(s.RunID, &s.ID, typ, payload)
	return err
}

// Steps lists a run's steps by seq, with every column.
func (s *Store) Steps(ctx context.Context, runID string) ([]Step, error) {
	var steps []Step
	err := s.sel(ctx, &steps, `SELECT `+stepColumns+` FROM steps WHERE run_id = ? ORDER BY seq`, runID)
	return steps, err
}

// StepsLight lists a run's steps by seq without their final messages and
// test names: what counters, usage and status need, at a fraction of the
// bytes.
func (s *Store) StepsLight(ctx context.Context, runID string) ([]Step, error) {
	var steps []Step
	err := s.sel(ctx, &steps, `SELECT `+stepLight+` FROM steps WHERE run_id = ? ORDER BY seq`, runID)
	return steps, err
}

// SetCancelCause records why the daemon is about to stop a RUNNING step.
func (t *Tx) SetCancelCause(stepID int64, cause CancelCause) error {
	_, err := t.exec(qSetCancelCause, cause, stepID)
	if err != nil {
		return fmt.Errorf("record cancel cause: %w", err)
	}
	return nil
}

// Step reads one step of a run by its seq.
func (s *Store) Step(ctx context.Context, runID string, seq int) (Step, error) {
	var st Step
	err := s.get(ctx, &st, `SELECT `+stepColumns+` FROM steps WHERE run_id = ? AND seq = ?`, runID, seq)
	if errors.Is(err, sql.ErrNoRows) {
		return st, fmt.Errorf("step %d of run %s: %w", seq, runID, ErrNotFound)
	}
	return st, err
}

// Statements of the step path, prepared when the store opens (hotWrites).
const qInsertStep = `INSERT INTO steps (run_id, seq, phase, iteration, status, started_at,
		log_path, plan_task, plan_checked, credential) VALUES (:run_id, :seq, :phase, :iteration, :status, :started_at,
		:log_path, :plan_task, :plan_checked, :credential)`
const qSetStepProcess = `UPDATE steps SET pid = ?, pgid = ?, proc_start = ?, boot_id = ?
		WHERE id = ? AND status = 'RUNNING'`

const qFinishStep = `UPDATE steps SET status = :status, exit_code = :exit_code, error = :error,
		ended_at = :ended_at, model = :model, input_tokens = :input_tokens, output_tokens = :output_tokens,
		cache_read_tokens = :cache_read_tokens, cache_write_tokens = :cache_write_tokens, usage_found = :usage_found,
		reported_cost_usd = :reported_cost_usd, priced_cost_usd = :priced_cost_usd, promise = :promise,
		final_message = :final_message, rate_limited_until = :rate_limited_until, tests_format = :tests_format,
		api_unavailable = :api_unavailable, reasoning_tokens = :reasoning_tokens, question = :question,
		tests_passed = :tests_passed, tests_failed = :tests_failed, tests_skipped = :tests_skipped,
		tests_failed_names = :tests_failed_names, tests_passed_names = :tests_passed_names,
		tests_ignored_names = :tests_ignored_names, fingerprint = :fingerprint, plan_checked = :plan_checked,
		change_commit = :change_commit, files_changed = :files_changed, insertions = :insertions,
		deletions = :deletions, binary_files = :binary_files, change_files = :change_files,
		pid = :pid, pgid = :pgid, proc_start = :proc_start, boot_id = :boot_id
		WHERE id = :id AND status = 'RUNNING'`

// SetAnswer stores the answer to the question the newest step of run
// runID asked, and returns that step's seq (compare-and-set: ErrConflict
// when the newest step asked none or was answered already).
func (t *Tx) SetAnswer(runID, answer string) (int, error) {
	var seq int
	err := t.get(&seq, `UPDATE steps SET answer = ?
		WHERE id = (SELECT id FROM steps WHERE run_id = ? ORDER BY seq DESC LIMIT 1) AND question <> '' AND answer = ''
		RETURNING seq`, answer, runID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("record answer of run %s: %w", runID, ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("record answer: %w", err)
	}
	return seq, nil
}

// SharedLimit is a usage limit another run hit with the same agent
// credentials.
type SharedLimit struct {
	RunID string `db:"run_id"`
	Until int64  `db:"rate_limited_until"`
}

// SharedLimit returns the latest-resetting usage limit, still in effect at
// now (Unix ms), that a run other than runID hit with credential; ErrNotFound
// when there is none. It reads the partial index steps_credential_limit:
// only limited steps are in it.
func (s *Store) SharedLimit(ctx context.Context, credential, runID string, now int64) (SharedLimit, error) {
	var l SharedLimit
	err := s.get(ctx, &l, `SELECT run_id, rate_limited_until FROM steps
		WHERE credential = ? AND credential <> '' AND rate_limited_until IS NOT NULL AND api_unavailable = 0
		AND rate_limited_until > ? AND run_id <> ?
		ORDER BY rate_limited_until DESC LIMIT 1`, credential, now, runID)
	if errors.Is(err, sql.ErrNoRows) {
		return l, ErrNotFound
	}
	return l, err
}

const qSetCancelCause = `UPDATE steps SET cancel_cause = ? WHERE id = ? AND status = 'RUNNING'`

// LastEnded returns a run's newest step of phase that ran to an outcome
// (SUCCEEDED or FAILED), with every column; ErrNotFound when there is none.
// Status reads verify_baseline's record with it: the baseline step's
// failing tests and what the newest verification ignored of them.
func (s *Store) LastEnded(ctx context.Context, runID string, phase api.Phase) (Step, error) {
	var st Step
	err := s.get(ctx, &st, `SELECT `+stepColumns+` FROM steps WHERE run_id = ? AND phase = ?
		AND status IN ('SUCCEEDED', 'FAILED') ORDER BY seq DESC LIMIT 1`, runID, phase)
	if errors.Is(err, sql.ErrNoRows) {
		return st, ErrNotFound
	}
	return st, err
}
