package trust

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/loopd/loopd/internal/config"
)

// benchWorkspace is a workspace with all three files that need trust.
func benchWorkspace(b *testing.B) (string, string) {
	ws := b.TempDir()
	files := map[string]string{
		".loop/config":    "agent=command\nagent_command=./agent.sh\nverify_command=go test ./...\nmax_iterations=10\n",
		".loop/stop.json": `{"success_conditions":[{"type":"custom_script","script":".loop/check.sh"}]}`,
		".loop/check.sh":  "#!/bin/sh\nexit 1\n",
		".env":            "API_TOKEN=abcdefghijklmnop\nPATH=/usr/bin:/bin\n",
	}
	for name, content := range files {
		p := filepath.Join(ws, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return ws, filepath.Join(b.TempDir(), "none")
}

// BenchmarkConfigLoad is the baseline: what run creation already does
// before the trust check.
func BenchmarkConfigLoad(b *testing.B) {
	ws, user := benchWorkspace(b)
	for b.Loop() {
		if _, err := config.Load(config.LoadOptions{Workspace: ws, UserConfig: user, Sets: []string{"prompt=g"}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInspectAndCheck is the trust check's own work at run creation
// (reading, describing and hashing the files, comparing with records).
func BenchmarkInspectAndCheck(b *testing.B) {
	ws, user := benchWorkspace(b)
	cfg, err := config.Load(config.LoadOptions{Workspace: ws, UserConfig: user, Sets: []string{"prompt=g"}})
	if err != nil {
		b.Fatal(err)
	}
	in := Inputs{Workspace: ws, Config: cfg, Sets: []string{"prompt=g"}, UserConfig: user}
	files, err := Inspect(in)
	if err != nil || len(files) != 3 {
		b.Fatalf("%v %v", files, err)
	}
	recs := map[string]Record{}
	for _, f := range files {
		recs[f.Path] = Record{SHA256: f.SHA256, Was: f}
	}
	for b.Loop() {
		files, _ := Inspect(in)
		if len(Untrusted(Check(files, recs))) != 0 {
			b.Fatal("untrusted")
		}
	}
}

// BenchmarkAgentFilesNone is what the agents' own files add to run
// creation and to every agent step in a workspace that has none: a stat
// of each path they could be at.
func BenchmarkAgentFilesNone(b *testing.B) {
	ws, _ := benchWorkspace(b)
	for b.Loop() {
		if files, err := InspectAgentsIn(ws, ws, filepath.Join(ws, ".env")); err != nil || len(files) != 0 {
			b.Fatalf("%v %v", files, err)
		}
	}
}

// BenchmarkAgentFilesSome: a workspace with Claude Code settings, an
// .mcp.json and a skills directory of five files, all read, described
// and hashed.
func BenchmarkAgentFilesSome(b *testing.B) {
	ws, _ := benchWorkspace(b)
	files := map[string]string{
		".claude/settings.json": `{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "./setup.sh"}]}]}, "permissions": {"allow": ["Bash"]}}`,
		".mcp.json":             `{"mcpServers": {"db": {"command": "npx", "args": ["-y", "db-mcp"]}}}`,
	}
	for i := range 5 {
		files[filepath.Join(".claude/skills", "s"+string(rune('a'+i)), "SKILL.md")] = "---\nname: s\n---\nDo the thing.\n"
	}
	for name, content := range files {
		p := filepath.Join(ws, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if files, err := InspectAgentsIn(ws, ws, filepath.Join(ws, ".env")); err != nil || len(files) != 3 {
			b.Fatalf("%v %v", files, err)
		}
	}
}
