package scheduler

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/storage"
)

// A task's prompt: the backlog's goal, the task (id, title, description)
// and the titles of what is already done, in that order.
func TestTaskPrompt(t *testing.T) {
	p := taskPrompt("  build the tool\n", storage.Task{ID: "wire", Title: "Wire them", Description: "Connect parser and printer.\n"},
		[]string{"Add the parser", "Add the printer"})
	want := []string{"build the tool\n\n## Your task (wire): Wire them\n", "\nConnect parser and printer.\n",
		"## Already done (landed; build on it, do not redo it)\n\n- Add the parser\n- Add the printer\n", "Work on this task only"}
	last := -1
	for _, w := range want {
		i := strings.Index(p, w)
		if i <= last {
			t.Fatalf("prompt lacks %q after what precedes it:\n%s", w, p)
		}
		last = i
	}
	if p := taskPrompt("g", storage.Task{ID: "a", Title: "A"}, nil); strings.Contains(p, "Already done") {
		t.Errorf("a first task's prompt lists done tasks:\n%s", p)
	}
}

// A task's set is checked as config keys at start, each problem named by
// the file and the task's JSON path; a good one becomes --set layers in
// key order, quoted where config syntax needs it.
func TestParseTasksChecksSettings(t *testing.T) {
	ws := t.TempDir()
	cfg := config.Default()
	cfg.Prompt = "g"
	_, err := parseTasks("tasks.json", []byte(`{"tasks":[{"id":"a","title":"A","set":{"max_iterations":"lots"}},{"id":"b","title":"B","set":{"no_such_key":"1"}}]}`), ws, cfg)
	var ie *InputError
	if !errors.As(err, &ie) || len(ie.Problems) != 2 ||
		!strings.Contains(ie.Problems[0], "tasks.json: tasks[0].set: ") || !strings.Contains(ie.Problems[0], "max_iterations") ||
		!strings.Contains(ie.Problems[1], "tasks.json: tasks[1].set: ") || !strings.Contains(ie.Problems[1], "no_such_key") {
		t.Fatalf("err = %v", err)
	}
	list, err := parseTasks("tasks.json", []byte(`{"tasks":[{"id":"a","title":"A","set":{"max_iterations":"7","agent_command":" spaced "}}]}`), ws, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sets := taskSets(list.Tasks[0].Set)
	if !slices.Equal(sets, []string{"agent_command=" + config.QuoteValue(" spaced "), "max_iterations=7"}) {
		t.Errorf("sets = %q", sets)
	}
	next, err := cfg.With(ws, sets)
	if err != nil || next.MaxIterations != 7 || next.AgentCommand != " spaced " {
		t.Errorf("the sets applied: max_iterations %d, agent_command %q, %v", next.MaxIterations, next.AgentCommand, err)
	}
}
