package backlog

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestReadFileFixtures(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		format Format
		tasks  []Task
	}{
		{
			name:   "snarktank prd.json example",
			file:   "testdata/prd.json",
			format: FormatPRD,
			tasks: []Task{
				{ID: "US-001", Title: "Add priority field to database", Priority: 1, Description: "As a developer, I need to store task priority so it persists across sessions.\n\n" +
					"Acceptance criteria:\n- Add priority column to tasks table: 'high' | 'medium' | 'low' (default 'medium')\n- Generate and run migration successfully\n- Typecheck passes"},
				{ID: "US-002", Title: "Display priority indicator on task cards", Priority: 2, Description: "As a user, I want to see task priority at a glance.\n\n" +
					"Acceptance criteria:\n- Each task card shows colored priority badge (red=high, yellow=medium, gray=low)\n- Priority visible without hovering or clicking\n- Typecheck passes\n- Verify in browser using dev-browser skill"},
				{ID: "US-003", Title: "Add priority selector to task edit", Priority: 3, Description: "As a user, I want to change a task's priority when editing it.\n\n" +
					"Acceptance criteria:\n- Priority dropdown in task edit modal\n- Shows current priority as selected\n- Saves immediately on selection change\n- Typecheck passes\n- Verify in browser using dev-browser skill"},
				{ID: "US-004", Title: "Filter tasks by priority", Priority: 4, Description: "As a user, I want to filter the task list to see only high-priority items.\n\n" +
					"Acceptance criteria:\n- Filter dropdown with options: All | High | Medium | Low\n- Filter persists in URL params\n- Empty state message when no tasks match filter\n- Typecheck passes\n- Verify in browser using dev-browser skill"},
			},
		},
		{
			name:   "gh issue list --json number,title,body,labels",
			file:   "testdata/gh_issues.json",
			format: FormatGitHub,
			tasks: []Task{
				{ID: "#14529", Title: "gh issue artifact: attach files to issues", Description: "Let users attach log files and screenshots to an issue from the terminal.\n\n" +
					"### Proposed solution\n\n`gh issue artifact upload <number> <file>...`\n\n- [ ] upload\n- [ ] list"},
				{ID: "#14530", Title: "Document the <issue> & <pr> arguments"},
			},
		},
		{
			name:   "loopd tasks.json",
			file:   "testdata/tasks.json",
			format: FormatTasks,
			tasks: []Task{
				{ID: "schema", Title: "Add the priority column", Description: "A migration adding tasks.priority, default 'medium'.",
					VerifyCommand: "go test ./internal/storage/", Set: map[string]string{"max_task_iterations": "5"}},
				{ID: "api", Title: "Serve priority in the API", DependsOn: []string{"schema"}},
				{ID: "ui", Title: "Show a priority badge", Description: "Red for high, yellow for medium, grey for low.", DependsOn: []string{"api", "schema"}, Priority: 1},
				{ID: "docs", Title: "Document priorities", Done: true},
			},
		},
		{
			name:   "markdown plan",
			file:   "testdata/plan.md",
			format: FormatMarkdown,
			tasks: []Task{
				{ID: "schema", Title: "Add the priority column", Description: "A migration adding `tasks.priority`, default `medium`.\n\nKeep the migration forward-only."},
				{ID: "t2", Title: "Write the design note", Done: true},
				{ID: "api", Title: "Serve priority in the API", DependsOn: []string{"schema"}, Description: "- [ ] a nested item is part of the description, not a task"},
				{ID: "t4", Title: "Show a priority badge", DependsOn: []string{"api", "schema"}},
				{ID: "t5", Title: "Document priorities", DependsOn: []string{"t2"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ReadFile(tt.file)
			if err != nil {
				t.Fatalf("ReadFile: %v", err)
			}
			if l.Format != tt.format {
				t.Errorf("format = %s, want %s", l.Format, tt.format)
			}
			checkTasks(t, l.Tasks, tt.tasks)
		})
	}
}

func checkTasks(t *testing.T, got, want []Task) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d tasks, want %d:\n%s", len(got), len(want), dump(got))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("task %d:\n got  %#v\n want %#v", i, got[i], want[i])
		}
	}
}

func dump(ts []Task) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "  %#v\n", t)
	}
	return b.String()
}

func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		input  string
		format Format
		tasks  []Task
	}{
		{
			name:   "markdown: ids by position count every item",
			file:   "plan.md",
			input:  "- [ ] one\n- [ ] two {#b}\n- [x] three\n",
			format: FormatMarkdown,
			tasks:  []Task{{ID: "t1", Title: "one"}, {ID: "b", Title: "two"}, {ID: "t3", Title: "three", Done: true}},
		},
		{
			name:   "markdown: CRLF, tab indentation, blank lines inside and around a description",
			file:   "plan.md",
			input:  "- [ ] one\r\n\r\n\tfirst\r\n\r\n\t  second\r\n\r\nprose ends it\r\n\tnot a description\r\n- [X] two\r\n",
			format: FormatMarkdown,
			tasks:  []Task{{ID: "t1", Title: "one", Description: "first\n\n  second"}, {ID: "t2", Title: "two", Done: true}},
		},
		{
			name:   "markdown: (after …) in the middle, spaces or commas, repeated and case-insensitive",
			file:   "plan.md",
			input:  "- [ ] a {#a}\n- [ ] b {#b}\n- [ ] build (AFTER #a #b, #a) now {#c}\n",
			format: FormatMarkdown,
			tasks:  []Task{{ID: "a", Title: "a"}, {ID: "b", Title: "b"}, {ID: "c", Title: "build now", DependsOn: []string{"a", "b"}}},
		},
		{
			name:   "markdown: {#id} before (after …) names the task too",
			file:   "plan.md",
			input:  "- [ ] a {#a}\n- [ ] build {#b} (after #a)\n",
			format: FormatMarkdown,
			tasks:  []Task{{ID: "a", Title: "a"}, {ID: "b", Title: "build", DependsOn: []string{"a"}}},
		},
		{
			name:   "markdown: ~~~ fences, and a fence inside a description is text",
			file:   "notes",
			input:  "~~~\n- [ ] no\n~~~\n- [ ] yes\n  ```\n  - [ ] code\n  ```\n",
			format: FormatMarkdown,
			tasks:  []Task{{ID: "t1", Title: "yes", Description: "```\n- [ ] code\n```"}},
		},
		{
			name:   "markdown: a .md name wins over content that looks like JSON",
			file:   "PLAN.MD",
			input:  "{\"tasks\":[]}\n- [ ] real\n",
			format: FormatMarkdown,
			tasks:  []Task{{ID: "t1", Title: "real"}},
		},
		{
			name:   "tasks.json: a BOM, nulls for optional fields, repeated dependencies once",
			file:   "tasks_command",
			input:  "\xef\xbb\xbf" + `{"tasks":[{"id":"a","title":"A","description":null,"verify_command":null,"set":null,"priority":null,"done":null,"depends_on":null},` + `{"id":"b","title":" B ","depends_on":["a","a"],"set":{}}]}`,
			format: FormatTasks,
			tasks:  []Task{{ID: "a", Title: "A"}, {ID: "b", Title: "B", DependsOn: []string{"a"}}},
		},
		{
			name:   "prd.json: notes and no description, passes true is done, extra fields ignored",
			file:   "prd.json",
			input:  `{"userStories":[{"id":"US-1","title":"T","passes":true,"notes":"use sqlx","dependencies":["x"],"category":"functional"}]}`,
			format: FormatPRD,
			tasks:  []Task{{ID: "US-1", Title: "T", Done: true, Description: "Notes: use sqlx"}},
		},
		{
			name:   "github: extra fields from a wider --json, null body and labels",
			file:   "tasks_command",
			input:  `[{"body":null,"labels":null,"number":7,"state":"OPEN","title":"Fix it","url":"https://github.com/o/r/issues/7"}]`,
			format: FormatGitHub,
			tasks:  []Task{{ID: "#7", Title: "Fix it"}},
		},
		{
			name:   "detect: prose with no extension is markdown",
			file:   "tasks_command",
			input:  "Plan\n\n- [ ] only task\n",
			format: FormatMarkdown,
			tasks:  []Task{{ID: "t1", Title: "only task"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Parse(tt.file, []byte(tt.input))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if l.Format != tt.format {
				t.Errorf("format = %s, want %s", l.Format, tt.format)
			}
			checkTasks(t, l.Tasks, tt.tasks)
		})
	}
}
