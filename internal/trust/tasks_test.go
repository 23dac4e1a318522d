package trust

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loopd/loopd/internal/config"
)

// A task list inside the workspace that names commands is a file to trust,
// with each command keyed by its JSON path; one without commands, or one
// outside the workspace, is not.
func TestInspectTaskList(t *testing.T) {
	ws := t.TempDir()
	none := filepath.Join(t.TempDir(), "no-user-config")
	cfg, err := config.Load(config.LoadOptions{Workspace: ws, UserConfig: none, Sets: []string{"prompt=g"}})
	if err != nil {
		t.Fatal(err)
	}
	inspect := func(path string, data []byte) []File {
		t.Helper()
		files, err := Inspect(Inputs{Workspace: ws, Config: cfg, Sets: []string{"prompt=g"}, UserConfig: none, TasksFile: path, TasksData: data})
		if err != nil {
			t.Fatal(err)
		}
		var out []File
		for _, f := range files {
			if f.Kind == KindTasks {
				out = append(out, f)
			}
		}
		return out
	}
	list := []byte(`{"tasks":[{"id":"a","title":"A"},{"id":"b","title":"B","verify_command":"make check","set":{"max_iterations":"3","agent_command":"./evil"}}]}`)
	path := filepath.Join(ws, "tasks.json")
	got := inspect(path, list)
	if len(got) != 1 || got[0].Path != path || got[0].SHA256 != Sum(list) {
		t.Fatalf("task list files = %+v", got)
	}
	want := []Command{{Key: "tasks[1].verify_command", Command: "make check"}, {Key: "tasks[1].set.agent_command", Command: "agent_command=./evil"},
		{Key: "tasks[1].set.max_iterations", Command: "max_iterations=3"}}
	if !slices.Equal(got[0].Commands, want) {
		t.Errorf("commands = %+v, want %+v", got[0].Commands, want)
	}
	if got := inspect(path, []byte("- [ ] plain\n")); len(got) != 0 {
		t.Errorf("a list without commands needs trust: %+v", got)
	}
	outside := filepath.Join(t.TempDir(), "tasks.json")
	if err := os.WriteFile(outside, list, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := inspect(outside, nil); len(got) != 0 {
		t.Errorf("a list outside the workspace needs trust: %+v", got)
	}
	// Outside the workspace, but picked by the workspace's config: trusted.
	if err := os.MkdirAll(filepath.Join(ws, ".loop"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".loop", "config"), []byte("tasks_file="+outside+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wcfg, err := config.Load(config.LoadOptions{Workspace: ws, UserConfig: none, Sets: []string{"prompt=g"}})
	if err != nil {
		t.Fatal(err)
	}
	files, err := Inspect(Inputs{Workspace: ws, Config: wcfg, Sets: []string{"prompt=g"}, UserConfig: none})
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(files, func(f File) bool { return f.Kind == KindTasks }); i < 0 || files[i].Path != outside {
		t.Errorf("a list outside the workspace that its config picked needs no trust: %+v", files)
	}
	if err := os.Remove(filepath.Join(ws, ".loop", "config")); err != nil {
		t.Fatal(err)
	}
	// Read from the file when not given: the config's tasks_file.
	if err := os.WriteFile(path, list, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := inspect(path, nil); len(got) != 1 || len(got[0].Commands) != 3 {
		t.Errorf("the list read from its file: %+v", got)
	}
}
