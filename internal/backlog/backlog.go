package backlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/loopd/loopd/internal/termtext"
)

// Format is the form a task list is written in.
type Format string

const (
	// FormatTasks is loopd's own JSON: {"tasks":[{"id","title",…}]}.
	FormatTasks Format = "tasks"
	// FormatPRD is snarktank/ralph's prd.json: {"userStories":[…]}.
	FormatPRD Format = "prd"
	// FormatGitHub is the array `gh issue list --json number,title,body,labels` prints.
	FormatGitHub Format = "github"
	// FormatMarkdown is a Markdown checklist of "- [ ]" items.
	FormatMarkdown Format = "markdown"
)

// Limits on what a list may hold. They bound the memory a list costs and the
// work of validating it; real backlogs are tens of tasks, GitHub bodies are
// at most 65,536 characters and titles 256.
const (
	// MaxSize is the largest list read, in bytes.
	MaxSize = 4 << 20
	// MaxTasks is the most tasks a list may hold.
	MaxTasks = 1000
	// MaxIDLen is the longest task id, in bytes.
	MaxIDLen = 64
	// MaxTitleLen is the longest title, in bytes.
	MaxTitleLen = 1024
	// MaxDescriptionLen is the longest description, in bytes (after a
	// prd.json's acceptance criteria are added to it).
	MaxDescriptionLen = 256 << 10
	// MaxSettings is the most entries of one task's set.
	MaxSettings = 100
	// MaxSettingLen is the longest value of a set entry, in bytes.
	MaxSettingLen = 4096
)

// maxErrors bounds how many problems one parse reports: a list that is
// wrong everywhere (the wrong file) needs the first few, not thousands.
const maxErrors = 20

// Task is one task of a backlog.
type Task struct {
	// ID names the task: given in the list (loopd JSON, prd.json, a
	// Markdown {#id}), "#<number>" for a GitHub issue, else t<position>.
	ID string
	// Title is one line with no control characters.
	Title string
	// Description is the task's text for the agent; "" when none. CRLF line
	// endings are turned into LF.
	Description string
	// DependsOn lists the ids of the tasks that must be done (landed) before
	// this one starts, each once, in the order written.
	DependsOn []string
	// VerifyCommand is the task's own verify command (loopd JSON only);
	// a command, so a list that has one is under trust.
	VerifyCommand string
	// Set holds the task's own settings, config key to value (loopd JSON
	// only); nil when none. Under trust, like VerifyCommand.
	Set map[string]string
	// Priority orders ready tasks: 1 goes first; 0 means not given.
	Priority int
	// Done is true for a task the list says is already done (passes: true,
	// "- [x]", "done": true); it is never run.
	Done bool
}

// List is a validated task list: at least one task, ids unique and safe,
// every dependency in the list, no cycle.
type List struct {
	// Format is the form the list was read from.
	Format Format
	// Tasks are in list order.
	Tasks []Task
}

// Error is one problem with a task list. Error() is
// "<file>:<line>: <msg>" (Markdown, or JSON that does not parse),
// "<file>: <path>: <msg>" (a value in JSON) or "<file>: <msg>".
type Error struct {
	// File is the name the list was read under (a path, or "tasks_command").
	File string
	// Line is the 1-based line, or 0.
	Line int
	// Path is the JSON path of the value, e.g. tasks[3].depends_on[0], or "".
	Path string
	// Msg says what is wrong; values from the list in it are quoted.
	Msg string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(termtext.Quote(e.File))
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ReadFile reads and parses the list at path (see [Parse]; the path is the
// name errors show). It refuses anything but a regular file, so a FIFO or a
// device cannot block or feed it forever, and reads at most [MaxSize] bytes.
// The caller decides whether path may be read at all (inside the workspace,
// not a symlink out of it).
func ReadFile(path string) (*List, error) {
	// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	// writer, forever; the mode check below then refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("cannot read the task list: %v", errors.Unwrap(err))}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("cannot read the task list: %v", err)}
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{File: path, Msg: "the task list is not a regular file"}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("cannot read the task list: %v", err)}
	}
	return Parse(path, data)
}

// Parse reads the list in data, detecting its format (see [Detect]); name is
// the file name errors show and whose extension is a hint. The error, when
// not nil, joins one [*Error] per problem found.
func Parse(name string, data []byte) (*List, error) {
	if err := checkSize(name, data); err != nil {
		return nil, err
	}
	data = bytes.TrimPrefix(data, bom)
	f, err := Detect(name, data)
	if err != nil {
		return nil, err
	}
	return ParseAs(name, data, f)
}

// ParseAs reads data as the list format f; see [Parse].
func ParseAs(name string, data []byte, f Format) (*List, error) {
	if err := checkSize(name, data); err != nil {
		return nil, err
	}
	p := &parser{file: name}
	data = bytes.TrimPrefix(data, bom)
	switch f {
	case FormatTasks:
		p.tasksJSON(data)
	case FormatPRD:
		p.prdJSON(data)
	case FormatGitHub:
		p.githubJSON(data)
	case FormatMarkdown:
		p.markdown(data)
	default:
		return nil, &Error{File: name, Msg: fmt.Sprintf("unknown task list format %q", f)}
	}
	if len(p.errs) == 0 {
		p.validate()
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return &List{Format: f, Tasks: p.tasks}, nil
}

// bom is the UTF-8 byte order mark some Windows editors write first.
var bom = []byte("\xef\xbb\xbf")

func checkSize(name string, data []byte) error {
	if len(data) > MaxSize {
		return &Error{File: name, Msg: fmt.Sprintf("the task list is larger than %d MiB", MaxSize>>20)}
	}
	return nil
}

// Detect names the format of data: by content, with name's extension as a
// hint (the package documentation gives the rules).
func Detect(name string, data []byte) (Format, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".md", ".markdown", ".txt":
		return FormatMarkdown, nil
	}
	data = bytes.TrimPrefix(data, bom)
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		return FormatGitHub, nil
	case len(trimmed) > 0 && trimmed[0] == '{':
		return detectObject(name, data)
	case strings.EqualFold(filepath.Ext(name), ".json"):
		// Let the JSON reader say where the JSON goes wrong.
		return FormatTasks, nil
	}
	return FormatMarkdown, nil
}

// detectObject tells loopd's form from a prd.json by their list's key.
func detectObject(name string, data []byte) (Format, error) {
	p := &parser{file: name}
	raw, ok := p.top(data)
	if !ok {
		return "", p.err()
	}
	ms, ok := p.object(raw, "")
	if !ok {
		return "", p.err()
	}
	hasTasks, hasStories := false, false
	for _, m := range ms {
		hasTasks = hasTasks || m.key == "tasks"
		hasStories = hasStories || m.key == "userStories"
	}
	switch {
	case hasTasks:
		return FormatTasks, nil
	case hasStories:
		return FormatPRD, nil
	}
	return "", &Error{File: name, Msg: `a JSON task list is an object with "tasks" (loopd) or "userStories" (prd.json), or the array gh issue list --json prints`}
}

// NamesCommands reports whether the list names commands: a task's
// verify_command or settings (set can change any command the run uses).
// Such a list is a workspace file under trust, like .loop/config: it is run
// only after the user trusted it. prd.json, GitHub issues and Markdown
// cannot name commands, so an issue's author cannot make loopd run one.
func (l *List) NamesCommands() bool {
	for _, t := range l.Tasks {
		if t.VerifyCommand != "" || len(t.Set) > 0 {
			return true
		}
	}
	return false
}

// Task returns the task with the given id.
func (l *List) Task(id string) (Task, bool) {
	for _, t := range l.Tasks {
		if t.ID == id {
			return t, true
		}
	}
	return Task{}, false
}

// Ready returns the tasks that may start now: not done (neither Task.Done
// nor in done) and every dependency done (Task.Done or in done). done holds
// the ids of the tasks that landed. They come priority first (1 before 2;
// tasks with a priority before those without), then in list order. The
// caller drops the tasks already running, landing, blocked or skipped.
func (l *List) Ready(done map[string]bool) []Task {
	isDone := func(t *Task) bool { return t.Done || done[t.ID] }
	byID := make(map[string]*Task, len(l.Tasks))
	for i := range l.Tasks {
		byID[l.Tasks[i].ID] = &l.Tasks[i]
	}
	var ready []Task
	for i := range l.Tasks {
		t := &l.Tasks[i]
		if isDone(t) {
			continue
		}
		ok := true
		for _, d := range t.DependsOn {
			if dep := byID[d]; dep == nil || !isDone(dep) {
				ok = false
				break
			}
		}
		if ok {
			ready = append(ready, *t)
		}
	}
	slices.SortStableFunc(ready, byPriority)
	return ready
}

// Ordered returns every task in dependency order: each after its
// dependencies, and among the tasks whose dependencies are placed, priority
// first, then list order (the order a one-at-a-time backlog would run them).
// A List from Parse has no cycle, so every task is returned.
func (l *List) Ordered() []Task {
	index := make(map[string]int, len(l.Tasks))
	for i, t := range l.Tasks {
		index[t.ID] = i
	}
	// Kahn's algorithm: waiting[i] counts task i's dependencies not yet
	// placed; a dependency that is not in the list is never placed.
	waiting := make([]int, len(l.Tasks))
	dependents := make([][]int, len(l.Tasks))
	var placeable []int
	for i, t := range l.Tasks {
		waiting[i] = len(t.DependsOn)
		for _, d := range t.DependsOn {
			if j, ok := index[d]; ok {
				dependents[j] = append(dependents[j], i)
			}
		}
		if waiting[i] == 0 {
			placeable = append(placeable, i)
		}
	}
	out := make([]Task, 0, len(l.Tasks))
	for len(placeable) > 0 {
		best := 0
		for k, i := range placeable {
			if c := byPriority(l.Tasks[i], l.Tasks[placeable[best]]); c < 0 || c == 0 && i < placeable[best] {
				best = k
			}
		}
		i := placeable[best]
		placeable = slices.Delete(placeable, best, best+1)
		out = append(out, l.Tasks[i])
		for _, j := range dependents[i] {
			if waiting[j]--; waiting[j] == 0 {
				placeable = append(placeable, j)
			}
		}
	}
	return out
}

// byPriority sorts tasks with a priority first, lower first; a stable sort
// keeps list order among equals.
func byPriority(a, b Task) int {
	pa, pb := a.Priority, b.Priority
	if pa == 0 {
		pa = int(^uint(0) >> 1)
	}
	if pb == 0 {
		pb = int(^uint(0) >> 1)
	}
	switch {
	case pa < pb:
		return -1
	case pa > pb:
		return 1
	}
	return 0
}
