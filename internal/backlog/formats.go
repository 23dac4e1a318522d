package backlog

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/loopd/loopd/internal/editdist"
	"github.com/loopd/loopd/internal/jsonpath"
)

var (
	listFields = []string{"tasks"}
	taskFields = []string{"id", "title", "description", "depends_on", "verify_command", "set", "priority", "done"}
)

// tasksJSON reads loopd's own form, strictly: this is a file people write
// by hand, and a typo ("depends-on") silently ignored would start a task
// before its dependency.
func (p *parser) tasksJSON(data []byte) {
	items, ok := p.listField(data, "tasks", "an array of tasks", func(m member) {
		p.unknownField(m, "the task list", listFields)
	})
	if !ok {
		return
	}
	for i, item := range items {
		p.tasksJSONTask(item, jsonpath.Index("tasks", i))
	}
}

func (p *parser) tasksJSONTask(raw json.RawMessage, path string) {
	ms, ok := p.object(raw, path)
	if !ok {
		return
	}
	var t Task
	src := source{base: path, idField: "id", depsField: "depends_on"}
	var hasID, hasTitle bool
	var deps []string
	for _, m := range ms {
		switch m.key {
		case "id":
			t.ID, hasID = p.string(m.value, m.path)
		case "title":
			t.Title, hasTitle = p.string(m.value, m.path)
		case "description":
			t.Description, _ = p.optString(m.value, m.path)
		case "depends_on":
			deps, _ = p.strings(m.value, m.path)
		case "verify_command":
			t.VerifyCommand, _ = p.optString(m.value, m.path)
		case "set":
			t.Set = p.settings(m.value, m.path)
		case "priority":
			t.Priority, _ = p.priority(m.value, m.path)
		case "done":
			t.Done, _ = p.bool(m.value, m.path)
		default:
			p.unknownField(m, "a task", taskFields)
		}
	}
	p.required(hasID, path, "id")
	p.required(hasTitle, path, "title")
	t.DependsOn, src.depIdx = dedupe(deps)
	p.tasks = append(p.tasks, t)
	p.srcs = append(p.srcs, src)
}

// listField reads a backlog whose top level is an object holding its list
// of tasks in field, an array of what; other, when not nil, is called with
// every other member. ok is false when there is no such array, the problem
// reported.
func (p *parser) listField(data []byte, field, what string, other func(member)) (items []json.RawMessage, ok bool) {
	raw, ok := p.top(data)
	if !ok {
		return nil, false
	}
	ms, ok := p.object(raw, "")
	if !ok {
		return nil, false
	}
	var list json.RawMessage
	for _, m := range ms {
		if m.key == field {
			list = m.value
			continue
		}
		if other != nil {
			other(m)
		}
	}
	if list == nil {
		p.fail("", "missing field %q", field)
		return nil, false
	}
	p.list = field
	return p.array(list, field, what)
}

// required reports the object at path missing field, unless the field is
// there and its value was already reported (a wrong type says more).
func (p *parser) required(have bool, path, field string) {
	if !have && !p.has(path+"."+field) {
		p.fail(path, "missing field %q", field)
	}
}

// has reports whether a problem was already reported at path.
func (p *parser) has(path string) bool {
	for _, e := range p.errs {
		if e, ok := e.(*Error); ok && e.Path == path {
			return true
		}
	}
	return false
}

var settingKey = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// settings reads a task's set: config keys to string values. The keys are
// checked for shape only; which keys a task may set is the config's
// business, checked when the backlog starts.
func (p *parser) settings(raw json.RawMessage, path string) map[string]string {
	if jsonpath.Kind(raw) == "null" {
		return nil
	}
	ms, ok := p.object(raw, path)
	if !ok {
		return nil
	}
	if len(ms) > MaxSettings {
		p.fail(path, "more than %d settings", MaxSettings)
		return nil
	}
	set := make(map[string]string, len(ms))
	for _, m := range ms {
		if !settingKey.MatchString(m.key) {
			p.fail(m.path, "%s is not a config key (lowercase letters, digits, _ . -)", q(m.key))
			continue
		}
		v, ok := p.string(m.value, m.path)
		if !ok {
			continue
		}
		if len(v) > MaxSettingLen {
			p.fail(m.path, "value longer than %d bytes", MaxSettingLen)
			continue
		}
		set[m.key] = v
	}
	if len(set) == 0 {
		return nil
	}
	return set
}

// prdJSON reads snarktank/ralph's prd.json as ralph writes it: the fields
// loopd uses must have their types, the rest (project, branchName, notes
// and what other ralph variants add) is ralph's.
func (p *parser) prdJSON(data []byte) {
	items, ok := p.listField(data, "userStories", "an array of user stories", nil)
	if !ok {
		return
	}
	for i, item := range items {
		p.prdStory(item, jsonpath.Index("userStories", i))
	}
}

func (p *parser) prdStory(raw json.RawMessage, path string) {
	ms, ok := p.object(raw, path)
	if !ok {
		return
	}
	var t Task
	var hasID, hasTitle bool
	var criteria []string
	var notes string
	for _, m := range ms {
		switch m.key {
		case "id":
			t.ID, hasID = p.string(m.value, m.path)
		case "title":
			t.Title, hasTitle = p.string(m.value, m.path)
		case "description":
			t.Description, _ = p.optString(m.value, m.path)
		case "acceptanceCriteria":
			criteria, _ = p.strings(m.value, m.path)
		case "priority":
			t.Priority, _ = p.priority(m.value, m.path)
		case "passes":
			t.Done, _ = p.bool(m.value, m.path)
		case "notes":
			notes, _ = p.optString(m.value, m.path)
		}
	}
	p.required(hasID, path, "id")
	p.required(hasTitle, path, "title")
	var b strings.Builder
	b.WriteString(strings.TrimSpace(t.Description))
	if len(criteria) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("Acceptance criteria:")
		for _, c := range criteria {
			b.WriteString("\n- ")
			b.WriteString(strings.TrimSpace(c))
		}
	}
	if notes = strings.TrimSpace(notes); notes != "" {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("Notes: ")
		b.WriteString(notes)
	}
	t.Description = b.String()
	p.tasks = append(p.tasks, t)
	p.srcs = append(p.srcs, source{base: path, idField: "id"})
}

// githubJSON reads the array `gh issue list --json number,title,body,labels`
// prints. Fields gh prints for other --json names are ignored; labels are
// checked to be gh's label objects and not used otherwise.
func (p *parser) githubJSON(data []byte) {
	raw, ok := p.top(data)
	if !ok {
		return
	}
	items, ok := p.array(raw, "", "an array of issues")
	if !ok {
		return
	}
	for i, item := range items {
		p.githubIssue(item, jsonpath.Index("", i))
	}
}

func (p *parser) githubIssue(raw json.RawMessage, path string) {
	ms, ok := p.object(raw, path)
	if !ok {
		return
	}
	var t Task
	var hasNumber, hasTitle bool
	for _, m := range ms {
		switch m.key {
		case "number":
			n, ok := p.integer(m.value, m.path)
			if ok && n < 1 {
				p.fail(m.path, "an issue number is positive, got %d", n)
				ok = false
			}
			if ok {
				t.ID, hasNumber = "#"+strconv.FormatInt(n, 10), true
			}
		case "title":
			t.Title, hasTitle = p.string(m.value, m.path)
		case "body":
			t.Description, _ = p.optString(m.value, m.path)
		case "labels":
			p.labels(m.value, m.path)
		}
	}
	if !hasNumber && !p.has(path+".number") {
		p.fail(path, `missing field "number" (list the issues with gh issue list --json number,title,body,labels)`)
	}
	p.required(hasTitle, path, "title")
	p.tasks = append(p.tasks, t)
	p.srcs = append(p.srcs, source{base: path, idField: "number"})
}

func (p *parser) labels(raw json.RawMessage, path string) {
	if jsonpath.Kind(raw) == "null" {
		return
	}
	items, ok := p.array(raw, path, "an array of labels")
	if !ok {
		return
	}
	for i, item := range items {
		lp := jsonpath.Index(path, i)
		ms, ok := p.object(item, lp)
		if !ok {
			continue
		}
		for _, m := range ms {
			switch m.key {
			case "id", "name", "description", "color":
				p.optString(m.value, m.path)
			}
		}
	}
}

// dedupe drops repeated ids, returning where each kept one was written.
func dedupe(ids []string) ([]string, []int) {
	var out []string
	var idx []int
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
			idx = append(idx, i)
		}
	}
	return out, idx
}

// closest returns the candidate most likely meant by word, if one is near.
func closest(word string, candidates []string) (string, bool) {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("-", "_", " ", "_").Replace(s)) }
	// Two edits turn any short word into any other ("b" into "t1"): allow
	// one for short words.
	best, bestDist := "", 2
	if len(word) >= 6 {
		bestDist = 3
	}
	for _, c := range candidates {
		if norm(word) == norm(c) {
			return c, true
		}
		if d := editdist.Distance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best, best != ""
}
