package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFile writes content to path, creating directories.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testWorkspace is a workspace in a temporary directory with a user config
// location of its own, isolated from the real home directory.
type testWorkspace struct {
	dir        string // the workspace
	userConfig string // the user config file's path (may not exist)
}

// newWorkspace returns a workspace with the given files (path relative to the
// workspace → content). HOME and XDG_CONFIG_HOME point into the temporary
// directory, so Load's default user config location is isolated too.
func newWorkspace(t *testing.T, files map[string]string) testWorkspace {
	t.Helper()
	root := t.TempDir()
	home := filepath.Join(root, "home")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	w := testWorkspace{
		dir:        filepath.Join(root, "ws"),
		userConfig: filepath.Join(home, ".config", "loop", "config"),
	}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		writeFile(t, filepath.Join(w.dir, name), content)
	}
	return w
}

// config returns the workspace config file's path.
func (w testWorkspace) config() string { return filepath.Join(w.dir, ".loop", "config") }

// path returns the absolute path of a workspace file.
func (w testWorkspace) path(name string) string { return filepath.Join(w.dir, name) }

// expand replaces {ws}, {cfg} and {user} in s with the workspace, the
// workspace config file and the user config file.
func (w testWorkspace) expand(s string) string {
	return strings.NewReplacer("{ws}", w.dir, "{cfg}", w.config(), "{user}", w.userConfig).Replace(s)
}

// load runs Load with the default user config location and the given sets.
func (w testWorkspace) load(sets ...string) (Config, error) {
	return Load(LoadOptions{Workspace: w.dir, Sets: sets})
}
