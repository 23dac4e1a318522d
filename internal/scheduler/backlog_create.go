package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/loopd/loopd/internal/backlog"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/trust"
)

// tasksCommandTimeout bounds tasks_command: a list is printed in seconds
// (gh issue list), and a command that hangs must not hold `loopctl start`.
const tasksCommandTimeout = 2 * time.Minute

// tasksCommandName is what errors about tasks_command's output call it.
const tasksCommandName = "tasks_command"

// newBacklog is a backlog run being created: its list, read once.
type newBacklog struct {
	file string // tasks_file, or "" for tasks_command
	data []byte // tasks_file's content, as read (hashed by trust)
	list *backlog.List
}

// prepareBacklog decides whether a run being created is a backlog run and,
// for a tasks_file, reads and parses the list (a tasks_command runs after
// the trust check, in read). A backlog run always has its own worktree
// (its integration branch), so it needs a git repository with a commit.
// nil, nil: not a backlog run.
func (s *Scheduler) prepareBacklog(ctx context.Context, ws string, cfg *config.Config) (*newBacklog, error) {
	if cfg.TasksFile == "" && cfg.TasksCommand == "" {
		return nil, nil
	}
	if cfg.TasksFile != "" && cfg.TasksCommand != "" {
		return nil, &InputError{Msg: "a backlog reads one task list; nothing was created",
			Problems: []string{fmt.Sprintf("both tasks_file (%s) and tasks_command are set: unset one (--set tasks_command= or --set tasks_file=)", cfg.TasksFile)}}
	}
	repo, err := git.Inspect(ctx, ws)
	switch {
	case errors.Is(err, git.ErrNotRepository):
		return nil, &InputError{Msg: "a backlog run needs a git repository; nothing was created",
			Problems: []string{fmt.Sprintf("%s is not inside a git working tree: every task lands into an integration branch; run `git init` and commit once", ws)}}
	case err != nil:
		return nil, fmt.Errorf("inspect the workspace's repository: %w", err)
	case repo.Head == "":
		return nil, &InputError{Msg: "a backlog run needs a git repository with a commit; nothing was created",
			Problems: []string{fmt.Sprintf("the repository at %s has no commit yet: commit once (git commit)", repo.TopLevel)}}
	}
	cfg.Isolation = config.IsolationWorktree
	bl := &newBacklog{file: cfg.TasksFile}
	if bl.file == "" {
		return bl, nil
	}
	data, err := trust.ReadFile(bl.file)
	if err != nil {
		return nil, &InputError{Msg: "cannot read the task list; nothing was created",
			Problems: []string{fmt.Sprintf("%s: %v", bl.file, errors.Unwrap(err))}}
	}
	bl.data = data
	if bl.list, err = parseTasks(bl.file, data, ws, *cfg); err != nil {
		return nil, err
	}
	return bl, nil
}

// parseTasks parses a list and checks each task's set as a config layer
// over cfg: a bad key is refused at start, named by its JSON path.
func parseTasks(name string, data []byte, ws string, cfg config.Config) (*backlog.List, error) {
	list, err := backlog.Parse(name, data)
	if err != nil {
		return nil, &InputError{Msg: "invalid task list; nothing was created", Problems: problems(err)}
	}
	var bad []string
	for i, t := range list.Tasks {
		if _, err := cfg.With(ws, taskSets(t.Set)); err != nil {
			for _, p := range problems(err) {
				bad = append(bad, fmt.Sprintf("%s: tasks[%d].set: %s", name, i, p))
			}
		}
	}
	if len(bad) > 0 {
		return nil, &InputError{Msg: "invalid task list; nothing was created", Problems: bad}
	}
	return list, nil
}

// taskSets turns a task's set into --set layers, in key order.
func taskSets(set map[string]string) []string {
	out := make([]string, 0, len(set))
	for _, k := range slices.Sorted(maps.Keys(set)) {
		out = append(out, k+"="+config.QuoteValue(set[k]))
	}
	return out
}

// read runs tasks_command (when the list comes from one) and parses what
// it printed.
func (bl *newBacklog) read(ctx context.Context, ws string, cfg config.Config) error {
	if bl.list != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, tasksCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", cfg.TasksCommand)
	cmd.Dir = ws
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out, errb limitedBuffer
	out.max, errb.max = backlog.MaxSize+1, 4<<10
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		why := err.Error()
		if ctx.Err() != nil {
			why = "it did not finish within " + tasksCommandTimeout.String()
		}
		msg := fmt.Sprintf("tasks_command %s failed (%s)", strconv.Quote(cfg.TasksCommand), why)
		if tail := bytes.TrimSpace(errb.Bytes()); len(tail) > 0 {
			msg += ": " + string(tail)
		}
		return &InputError{Msg: "cannot read the task list; nothing was created", Problems: []string{msg}}
	}
	list, err := parseTasks(tasksCommandName, out.Bytes(), ws, cfg)
	if err != nil {
		return err
	}
	bl.list = list
	return nil
}

// limitedBuffer keeps the first max bytes written and drops the rest (the
// size check of the list then refuses it).
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

var _ io.Writer = (*limitedBuffer)(nil)

// backlogGoal is a backlog's goal when the user gave none.
const backlogGoal = "Work through the task list, one task at a time."

// defaultGoal is a backlog's goal when the user gave none.
func (bl *newBacklog) defaultGoal() string { return backlogGoal }

// insert writes the list's tasks in the backlog run's creating
// transaction. A task the list says is done is stored done and never runs.
func (bl *newBacklog) insert(tx *storage.Tx, runID string) error {
	for i, t := range bl.list.Tasks {
		deps, err := json.Marshal(t.DependsOn)
		if err != nil {
			return err
		}
		if t.DependsOn == nil {
			deps = []byte("[]")
		}
		set := []byte("{}")
		if len(t.Set) > 0 {
			if set, err = json.Marshal(t.Set); err != nil {
				return err
			}
		}
		row := storage.Task{Backlog: runID, ID: t.ID, Position: i + 1, Title: t.Title, Description: t.Description,
			DependsOn: string(deps), VerifyCommand: t.VerifyCommand, Settings: string(set), Priority: t.Priority,
			State: storage.TaskPending}
		if t.Done {
			row.State, row.Why = storage.TaskDone, "done in the list"
		}
		if err := tx.InsertTask(row); err != nil {
			return err
		}
	}
	return nil
}
