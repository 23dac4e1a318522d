package backlog

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loopd/loopd/internal/termtext"
)

// The fuzz targets feed each reader arbitrary bytes and check what every
// result must satisfy: an error quotes every control character it shows,
// and a list it accepts is what the planner relies on (ids safe and unique,
// dependencies present, no cycle). Seeds are the fixtures and the refusals.

func FuzzParseTasksJSON(f *testing.F) { fuzzFormat(f, FormatTasks, "testdata/tasks.json") }

func FuzzParsePRD(f *testing.F) { fuzzFormat(f, FormatPRD, "testdata/prd.json") }

func FuzzParseGitHub(f *testing.F) { fuzzFormat(f, FormatGitHub, "testdata/gh_issues.json") }

func FuzzParseMarkdown(f *testing.F) { fuzzFormat(f, FormatMarkdown, "testdata/plan.md") }

// FuzzParse goes through detection, as start will.
func FuzzParse(f *testing.F) {
	seed(f, "testdata/tasks.json", "testdata/prd.json", "testdata/gh_issues.json", "testdata/plan.md")
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse("tasks_command", data)
		checkResult(t, l, err)
	})
}

func fuzzFormat(f *testing.F, format Format, fixture string) {
	seed(f, fixture)
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseAs("list", data, format)
		checkResult(t, l, err)
	})
}

func seed(f *testing.F, fixtures ...string) {
	for _, p := range fixtures {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, r := range refusals {
		if len(r.input) <= 4096 {
			f.Add([]byte(r.input))
		}
	}
}

func checkResult(t *testing.T, l *List, err error) {
	if err != nil {
		if l != nil {
			t.Fatalf("a list with an error: %v", err)
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !utf8.ValidString(line) || strings.ContainsFunc(line, termtext.Unsafe) {
				t.Fatalf("error shows an unquoted control character: %q", line)
			}
		}
		return
	}
	if len(l.Tasks) == 0 || len(l.Tasks) > MaxTasks {
		t.Fatalf("accepted %d tasks", len(l.Tasks))
	}
	seen := map[string]bool{}
	for _, task := range l.Tasks {
		if !ValidID(task.ID) || seen[strings.ToLower(task.ID)] {
			t.Fatalf("accepted id %q (valid %v, seen %v)", task.ID, ValidID(task.ID), seen[strings.ToLower(task.ID)])
		}
		seen[strings.ToLower(task.ID)] = true
		if task.Title == "" || strings.ContainsFunc(task.Title, termtext.Unsafe) || !utf8.ValidString(task.Title) {
			t.Fatalf("accepted title %q", task.Title)
		}
	}
	for _, task := range l.Tasks {
		for _, d := range task.DependsOn {
			if _, ok := l.Task(d); !ok {
				t.Fatalf("accepted a dependency on %q, not in the list", d)
			}
		}
	}
	if n := len(l.Ordered()); n != len(l.Tasks) {
		t.Fatalf("Ordered placed %d of %d tasks: a cycle was accepted", n, len(l.Tasks))
	}
	for _, r := range l.Ready(nil) {
		if r.Done {
			t.Fatalf("Ready returned done task %q", r.ID)
		}
	}
}
