package backlog

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/loopd/loopd/internal/termtext"
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9#][A-Za-z0-9._#-]*$`)

// ValidID reports whether id is a safe task id: 1 to 64 bytes of ASCII
// letters, digits and . _ # -, starting with a letter, a digit or #, with no
// "..", not ending in "." or ".lock". Such an id can be a file name, a
// directory name and a git branch name component as it is (git refuses
// "..", a leading "." and the ".lock" suffix in a ref), and shows the same
// on every terminal.
func ValidID(id string) bool {
	return len(id) <= MaxIDLen && idPattern.MatchString(id) && !strings.Contains(id, "..") &&
		!strings.HasSuffix(id, ".") && !strings.HasSuffix(id, ".lock")
}

// validate checks the whole list once every task was read without a
// problem of its own: titles, ids, duplicates, dependencies, cycles.
func (p *parser) validate() {
	if len(p.tasks) == 0 {
		p.fail(p.list, "the list has no tasks")
		return
	}
	if len(p.tasks) > MaxTasks {
		p.fail(p.list, "the list has %d tasks, more than %d", len(p.tasks), MaxTasks)
		return
	}
	firstByID := make(map[string]int, len(p.tasks)) // lowercased id → task index
	for i := range p.tasks {
		t, src := &p.tasks[i], p.srcs[i]
		p.checkTitle(t, src)
		if len(t.Description) > MaxDescriptionLen {
			line, path := src.at("description")
			p.add(line, path, "description longer than %d KiB", MaxDescriptionLen>>10)
		}
		t.Description = strings.Trim(strings.ReplaceAll(t.Description, "\r\n", "\n"), "\n")
		line, path := src.at(src.idField)
		if !ValidID(t.ID) {
			p.add(line, path, "task id %s is not safe: use 1 to %d letters, digits and . _ # - (starting with a letter, digit or #; no \"..\"; not ending in \".\" or \".lock\")", q(t.ID), MaxIDLen)
			continue
		}
		key := strings.ToLower(t.ID)
		if j, dup := firstByID[key]; dup {
			fl, fp := p.srcs[j].at(p.srcs[j].idField)
			p.add(line, path, "duplicate task id %s (first at %s)", q(t.ID), where(fl, fp))
			continue
		}
		firstByID[key] = i
	}
	if len(p.errs) > 0 {
		return // dependencies are checked against a list of known, unique ids
	}
	ids := make([]string, len(p.tasks))
	for i, t := range p.tasks {
		ids[i] = t.ID
	}
	index := make(map[string]int, len(p.tasks))
	for i, t := range p.tasks {
		index[t.ID] = i
	}
	for i, t := range p.tasks {
		for j, d := range t.DependsOn {
			if _, ok := index[d]; ok {
				continue
			}
			if len(p.errs) > maxErrors {
				return // a suggestion costs a scan of every id: not for problems nobody sees
			}
			line, path := p.srcs[i].dep(j)
			msg := fmt.Sprintf("task %s depends on %s, which is not in the list", q(t.ID), q(d))
			if s, ok := closest(d, ids); ok {
				msg += fmt.Sprintf(" (did you mean %s?)", q(s))
			}
			p.add(line, path, "%s", msg)
		}
	}
	if len(p.errs) == 0 {
		p.checkCycles(index)
	}
}

// where says where an earlier task is, for "first at …": its line, or its
// JSON path.
func where(line int, path string) string {
	if path != "" {
		return path
	}
	return fmt.Sprintf("line %d", line)
}

func (p *parser) checkTitle(t *Task, src source) {
	line, path := src.at("title")
	t.Title = strings.TrimSpace(t.Title)
	switch {
	case t.Title == "":
		p.add(line, path, "task %s has no title", q(t.ID))
	case len(t.Title) > MaxTitleLen:
		p.add(line, path, "title longer than %d bytes", MaxTitleLen)
	case !utf8.ValidString(t.Title):
		p.add(line, path, "title is not valid UTF-8: %s", q(t.Title))
	case strings.ContainsFunc(t.Title, termtext.Unsafe):
		p.add(line, path, "title holds a control character: %s", q(t.Title))
	}
}

// checkCycles reports a dependency cycle, naming it from the task listed
// first in it: a -> b -> a. One is enough: the user breaks it and sees the
// next.
func (p *parser) checkCycles(index map[string]int) {
	const (
		unvisited = iota
		onPath
		finished
	)
	state := make([]int, len(p.tasks))
	var stack []int
	var cycle []int
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = onPath
		stack = append(stack, i)
		for _, d := range p.tasks[i].DependsOn {
			j := index[d]
			switch state[j] {
			case onPath:
				for k := len(stack) - 1; k >= 0; k-- {
					if stack[k] == j {
						cycle = append([]int(nil), stack[k:]...)
						break
					}
				}
				return true
			case unvisited:
				if visit(j) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = finished
		return false
	}
	for i := range p.tasks {
		if state[i] == unvisited && visit(i) {
			break
		}
	}
	if cycle == nil {
		return
	}
	// Start the cycle at its task listed first, so the message does not
	// depend on where the search entered it.
	first := 0
	for k, i := range cycle {
		if i < cycle[first] {
			first = k
		}
	}
	cycle = append(cycle[first:], cycle[:first]...)
	names := make([]string, 0, len(cycle)+1)
	for _, i := range cycle {
		names = append(names, p.tasks[i].ID)
	}
	names = append(names, p.tasks[cycle[0]].ID)
	start := cycle[0]
	next := p.tasks[cycle[1%len(cycle)]].ID
	depAt := 0
	for j, d := range p.tasks[start].DependsOn {
		if d == next {
			depAt = j
		}
	}
	line, path := p.srcs[start].dep(depAt)
	p.add(line, path, "dependency cycle: %s (each depends on the next)", strings.Join(names, " -> "))
}
