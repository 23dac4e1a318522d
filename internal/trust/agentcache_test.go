package trust

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// cachedWorkspace is a workspace with a Claude Code settings file and a
// custom command directory, inside a parent directory of its own, with
// the racy margin taken out (the files were written a moment ago; the
// margin is tested on its own). reads counts full inspections.
func cachedWorkspace(t *testing.T) (parent, ws string, reads *int) {
	t.Helper()
	old, oldCoarse := agentRacyMargin, agentRacyCoarse
	agentRacyMargin, agentRacyCoarse = -time.Hour, -time.Hour // nothing is recent
	n := 0
	inspectAgentsIn = func(ws, dir, envFile string) ([]File, error) {
		n++
		return InspectAgentsIn(ws, dir, envFile)
	}
	t.Cleanup(func() {
		agentRacyMargin, agentRacyCoarse = old, oldCoarse
		inspectAgentsIn = InspectAgentsIn
	})
	parent = t.TempDir()
	ws = filepath.Join(parent, "ws")
	writeFile(t, ws, ".claude/settings.json", `{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"./a.sh"}]}]}}`)
	writeFile(t, ws, ".claude/commands/sub/deep.md", "run !`./b.sh`\n")
	writeFile(t, ws, "README", "hello\n")
	return parent, ws, &n
}

func writeFile(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestAgentCacheAnswersAnUnchangedTreeWithoutReading(t *testing.T) {
	_, ws, reads := cachedWorkspace(t)
	var c AgentCache
	want, err := InspectAgentsIn(ws, ws, "")
	if err != nil || len(want) != 2 {
		t.Fatalf("inspect: %v, %v", want, err)
	}
	for i := range 3 {
		got, err := c.InspectAgentsIn(ws, ws, "")
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d: %v, %v; want %v", i, got, err, want)
		}
	}
	if *reads != 1 {
		t.Errorf("%d full inspections of an unchanged tree, want 1", *reads)
	}
	// Another directory is another question.
	if _, err := c.InspectAgentsIn(ws, filepath.Join(ws, ".claude"), ""); err != nil || *reads != 2 {
		t.Errorf("another directory: %v, %d full inspections, want 2", err, *reads)
	}
}

func TestAgentCacheSeesEveryKindOfChange(t *testing.T) {
	// Each change, made after the cache kept an answer, must be in the
	// next answer: the cache may never hide one.
	restoreTimes := func(t *testing.T, p string, fn func()) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		fn()
		if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	settings := `{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"./X.sh"}]}]}}` // same size
	changes := map[string]func(t *testing.T, parent, ws string){
		"content, same size, mtime restored": func(t *testing.T, _, ws string) {
			p := filepath.Join(ws, ".claude/settings.json")
			restoreTimes(t, p, func() { writeFile(t, ws, ".claude/settings.json", settings) })
		},
		"replaced by a rename, mtime restored": func(t *testing.T, _, ws string) {
			p := filepath.Join(ws, ".claude/settings.json")
			writeFile(t, ws, "new.json", settings)
			fi, _ := os.Stat(p)
			os.Chtimes(filepath.Join(ws, "new.json"), fi.ModTime(), fi.ModTime())
			restoreTimes(t, filepath.Join(ws, ".claude"), func() {
				if err := os.Rename(filepath.Join(ws, "new.json"), p); err != nil {
					t.Fatal(err)
				}
			})
		},
		"new file in the workspace": func(t *testing.T, _, ws string) {
			writeFile(t, ws, ".mcp.json", `{"mcpServers":{"x":{"command":"./mcp.sh"}}}`)
		},
		"new agent directory": func(t *testing.T, _, ws string) {
			writeFile(t, ws, ".gemini/commands/g.toml", "prompt = \"!{./g.sh}\"\n")
		},
		"new file deep in an agent directory": func(t *testing.T, _, ws string) {
			writeFile(t, ws, ".claude/commands/sub/other.md", "x\n")
		},
		"edited file deep in an agent directory, mtime restored": func(t *testing.T, _, ws string) {
			p := filepath.Join(ws, ".claude/commands/sub/deep.md")
			restoreTimes(t, p, func() { writeFile(t, ws, ".claude/commands/sub/deep.md", "run !`./c.sh`\n") })
		},
		"removed file": func(t *testing.T, _, ws string) {
			os.Remove(filepath.Join(ws, ".claude/settings.json"))
		},
		"new file in a parent directory": func(t *testing.T, parent, _ string) {
			writeFile(t, parent, ".claude/commands/p.md", "p !`./p.sh`\n")
		},
		"a link's target edited": func(t *testing.T, parent, ws string) {
			// .claude becomes a link to another directory, then what it
			// leads to changes while the link stays as it was.
			other := filepath.Join(parent, "other")
			writeFile(t, other, "settings.json", `{"env":{"A":"1"}}`)
			os.RemoveAll(filepath.Join(ws, ".claude"))
			if err := os.Symlink(other, filepath.Join(ws, ".claude")); err != nil {
				t.Fatal(err)
			}
			var c AgentCache
			if _, err := c.InspectAgentsIn(ws, ws, ""); err != nil || c.sum == nil {
				t.Fatalf("through the link: %v (kept: %v)", err, c.sum != nil)
			}
			restoreTimes(t, filepath.Join(other, "settings.json"), func() { writeFile(t, other, "settings.json", `{"env":{"B":"2"}}`) })
			got, err := c.InspectAgentsIn(ws, ws, "")
			want, _ := InspectAgentsIn(ws, ws, "")
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("after the target changed: %v, %v; want %v", got, err, want)
			}
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			parent, ws, _ := cachedWorkspace(t)
			var c AgentCache
			before, err := c.InspectAgentsIn(ws, ws, "")
			if err != nil || c.sum == nil {
				t.Fatalf("first answer: %v (kept: %v)", err, c.sum != nil)
			}
			change(t, parent, ws)
			got, err := c.InspectAgentsIn(ws, ws, "")
			want, werr := InspectAgentsIn(ws, ws, "")
			if err != nil || werr != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("after the change: %v, %v; want %v, %v", got, err, want, werr)
			}
			if reflect.DeepEqual(got, before) {
				t.Fatalf("the change made no difference to the inspection itself; the case tests nothing: %v", got)
			}
		})
	}
}

func TestAgentCacheKeepsNoAnswerFromARacyStamp(t *testing.T) {
	_, ws, reads := cachedWorkspace(t)
	agentRacyMargin = time.Hour // everything is recent
	var c AgentCache
	for range 2 {
		if _, err := c.InspectAgentsIn(ws, ws, ""); err != nil {
			t.Fatal(err)
		}
	}
	if c.sum != nil || *reads != 2 {
		t.Errorf("a stamp of files changed just now was kept (%d full inspections, want 2)", *reads)
	}
}
