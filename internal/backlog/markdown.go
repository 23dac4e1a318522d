package backlog

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

var (
	// mdItem is a top-level checklist item: "- [ ] title", "- [x] title".
	mdItem = regexp.MustCompile(`^[-*+][ \t]+\[([ xX])\](?:[ \t]+(.*))?$`)
	// mdID is "{#id}" at the end of a title.
	mdID = regexp.MustCompile(`\{#([^{}]*)\}[ \t]*$`)
	// mdAfter is "(after #a, #b)" anywhere in a title.
	mdAfter = regexp.MustCompile(`(?i)\(after\b([^()]*)\)`)
	// mdFence opens or closes a fenced code block.
	mdFence = regexp.MustCompile("^ {0,3}(```|~~~)")
)

type mdTask struct {
	line  int
	text  string
	done  bool
	lines []string
}

// markdown reads a checklist: each top-level "- [ ]" item is a task, its
// indented lines the description. Nested items and items in a fenced code
// block at the top level are not tasks (a plan often shows examples).
func (p *parser) markdown(data []byte) {
	var items []mdTask
	var cur *mdTask
	fence := ""
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		indented := strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")
		switch {
		case fence != "":
			if m := mdFence.FindStringSubmatch(line); m != nil && m[1] == fence {
				fence = ""
			}
		case strings.TrimSpace(line) == "":
			if cur != nil {
				cur.lines = append(cur.lines, "")
			}
		case indented && cur != nil:
			cur.lines = append(cur.lines, line)
		case indented:
			// Text under something that is not a task.
		default:
			cur = nil
			if m := mdFence.FindStringSubmatch(line); m != nil {
				fence = m[1]
			} else if m := mdItem.FindStringSubmatch(line); m != nil {
				items = append(items, mdTask{line: n + 1, text: m[2], done: m[1] != " "})
				cur = &items[len(items)-1]
			}
		}
		if len(items) > MaxTasks {
			break // validate says so; reading on costs memory for nothing
		}
	}
	if len(items) == 0 {
		p.fail("", `the list has no tasks (a task is a top-level "- [ ] title" line)`)
		return
	}
	for i, it := range items {
		p.markdownTask(i, it)
	}
}

func (p *parser) markdownTask(i int, it mdTask) {
	title := strings.TrimSpace(it.text)
	t := Task{ID: "t" + strconv.Itoa(i+1), Done: it.done, Description: dedent(it.lines)}
	afters := mdAfter.FindAllStringSubmatchIndex(title, -1)
	if len(afters) > 1 {
		p.add(it.line, "", "more than one (after …) in the title; list every dependency in one")
	}
	if len(afters) == 1 {
		m := afters[0]
		deps := strings.FieldsFunc(title[m[2]:m[3]], func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
		if len(deps) == 0 {
			p.add(it.line, "", "(after) names no task; write (after #id, …)")
		}
		seen := make(map[string]bool, len(deps))
		for _, f := range deps {
			if len(f) < 2 || f[0] != '#' {
				p.add(it.line, "", "(after …) lists %s: write each dependency as #id", q(f))
				continue
			}
			if !seen[f[1:]] {
				seen[f[1:]] = true
				t.DependsOn = append(t.DependsOn, f[1:])
			}
		}
		title = strings.TrimSpace(strings.TrimSpace(title[:m[0]]) + " " + strings.TrimSpace(title[m[1]:]))
	}
	// After (after …) is gone, so that "{#id} (after #a)" names the task too.
	if m := mdID.FindStringSubmatchIndex(title); m != nil {
		t.ID = title[m[2]:m[3]]
		title = strings.TrimSpace(title[:m[0]])
	}
	t.Title = title
	p.tasks = append(p.tasks, t)
	p.srcs = append(p.srcs, source{line: it.line})
}

// dedent joins an item's description lines without their common
// indentation and without the blank lines around them.
func dedent(lines []string) string {
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return ""
	}
	indent := -1
	for _, l := range lines {
		if l == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	var b bytes.Buffer
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		if len(l) >= indent {
			b.WriteString(strings.TrimRight(l[indent:], " \t"))
		}
	}
	return b.String()
}
