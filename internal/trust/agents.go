package trust

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/loopd/loopd/internal/agent"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/shquote"
)

// KindAgent is a file or directory an agent CLI (Claude Code, Gemini CLI,
// Codex) reads from the workspace on its own and that can make it run a
// command: hooks, MCP servers, helper commands, environment, custom
// commands, subagents and skills. A cloned repository wrote them, and the
// CLI obeys them before the model says a word (a SessionStart hook runs
// at startup), so they are trusted like .loop/config.
const KindAgent Kind = "agent"

// agentPath is one workspace-relative path an agent CLI reads.
type agentPath struct {
	rel   string
	agent string
	dir   bool // a directory: its files are hashed as a set
	// describe reads a file's commands and settings; nil: JSON settings.
	describe func(path string, data []byte) (File, error)
}

// agentPaths are what the agent CLIs read from a workspace and obey
// without the model choosing to, as internal/agent lists them per agent
// (each agent's file says what its CLI does with them), read by their
// syntax.
//
// CLAUDE.md, GEMINI.md, AGENTS.md and the rest of the repository are
// instructions the model reads: with the permissions a loop runs the
// agent with, the repository's text can always steer the model, and
// trusting files cannot change that. They are not gated.
var agentPaths = func() []agentPath {
	var out []agentPath
	for _, f := range agent.ProjectFiles() {
		p := agentPath{rel: f.Path, agent: f.Agent, dir: f.Dir}
		switch f.Syntax {
		case agent.SyntaxEnv:
			p.describe = DescribeEnv
		case agent.SyntaxTOML:
			p.describe = describeTOML
		}
		out = append(out, p)
	}
	return out
}()

// AgentPaths returns the workspace-relative paths of the agents' own
// project files that need trust, in the order Inspect lists them
// (directories end in a slash).
func AgentPaths() []string {
	out := make([]string, len(agentPaths))
	for i, p := range agentPaths {
		out[i] = p.rel
		if p.dir {
			out[i] += "/"
		}
	}
	return out
}

// Bounds of a directory that is hashed as a set.
const (
	maxDirFiles = 1000
	maxDirBytes = 16 << 20
)

// agentSource reads the agents' files: from the workspace's directory, or
// from a commit (a worktree run gets the committed files, not the
// checkout's).
type agentSource interface {
	// read returns a file's bytes, fs.ErrNotExist when there is none.
	read(rel string) ([]byte, error)
	// list returns a directory's files (relative to it, sorted) with
	// their bytes; fs.ErrNotExist when there is none.
	list(rel string) ([]dirEntry, error)
}

type dirEntry struct {
	name string
	data []byte
}

// inspectAgents describes the agents' files found in src, in agentPaths
// order; ws is the workspace, to name them by absolute path.
// envFile, the run's env file, is left out: it is loopd's, gated as such.
func inspectAgents(ws string, src agentSource, commit, envFile string) ([]File, error) {
	var out []File
	for _, p := range agentPaths {
		path := filepath.Join(ws, p.rel)
		if path == envFile {
			continue
		}
		var f File
		if p.dir {
			entries, err := src.list(p.rel)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			f = describeDir(path, entries)
		} else {
			data, err := src.read(p.rel)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			describe := p.describe
			if describe == nil {
				describe = DescribeAgentJSON
			}
			if f, err = describe(path, data); err != nil {
				return nil, err
			}
		}
		f.Kind, f.Agent, f.Commit = KindAgent, p.agent, commit
		if f.Empty() {
			// A JSON file that sets nothing ({}), an empty env file.
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// describeDir describes a directory's files as one set: its hash covers
// every file's name and bytes, so adding, removing or editing one is a
// change.
func describeDir(path string, entries []dirEntry) File {
	h := sha256.New()
	f := File{Path: path}
	for _, e := range entries {
		sum := sha256.Sum256(e.data)
		fmt.Fprintf(h, "%s\x00%x\n", e.name, sum)
		f.Files = append(f.Files, e.name)
	}
	f.SHA256 = hex.EncodeToString(h.Sum(nil))
	return f
}

// DescribeAgentJSON describes an agent's JSON settings file (Claude Code's
// settings and .mcp.json, Gemini CLI's settings): every command it names
// wherever it is nested (hooks, MCP servers with their arguments,
// apiKeyHelper and other helpers), the names of the environment variables
// it sets (and the values of those that steer), MCP servers reached by
// URL, and its other top-level keys. Comments (Gemini CLI allows them) are
// stripped first; a file that is still not JSON is described as such and
// gated all the same (its hash).
func DescribeAgentJSON(path string, data []byte) (File, error) {
	f := File{Path: path, SHA256: Sum(data)}
	var doc map[string]any
	if err := json.Unmarshal(stripJSONComments(data), &doc); err != nil {
		f.Settings = []string{"(not JSON: review the file)"}
		return f, nil
	}
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		switch k {
		case "$schema":
			continue
		case "env":
			if env, ok := doc[k].(map[string]any); ok {
				for _, name := range slices.Sorted(maps.Keys(env)) {
					f.Env = append(f.Env, name)
					if Steering(name) {
						f.EnvShown = append(f.EnvShown, Setting{Key: name, Value: redactURL(fmt.Sprint(env[name]))})
					}
				}
				continue
			}
		}
		f.Settings = append(f.Settings, k)
	}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if c, ok := v["command"].(string); ok {
				f.Commands = append(f.Commands, Command{Key: at, Command: withArgs(c, v["args"])})
			}
			for _, k := range []string{"url", "httpUrl"} {
				if u, ok := v[k].(string); ok && strings.Contains(at, "mcpServers") {
					f.Values = append(f.Values, Setting{Key: at + "." + k, Value: redactURL(u)})
				}
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				key := at + "." + k
				if at == "" {
					key = k
				}
				if s, ok := v[k].(string); ok && helperKey(k) {
					f.Commands = append(f.Commands, Command{Key: key, Command: s})
					continue
				}
				walk(v[k], key)
			}
		case []any:
			for i, e := range v {
				walk(e, at+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	walk(doc, "")
	return f, nil
}

// helperKey reports whether a settings key's string value is a command
// the CLI runs by itself: Claude Code's apiKeyHelper, awsAuthRefresh,
// awsCredentialExport, otelHeadersHelper; Gemini CLI's
// tools.discoveryCommand and tools.callCommand.
func helperKey(k string) bool {
	return strings.HasSuffix(k, "Helper") || strings.HasSuffix(k, "Command") ||
		k == "awsAuthRefresh" || k == "awsCredentialExport"
}

// withArgs renders an MCP server's command with its arguments.
func withArgs(cmd string, args any) string {
	list, ok := args.([]any)
	if !ok {
		return cmd
	}
	parts := []string{cmd}
	for _, a := range list {
		parts = append(parts, shquote.Quote(fmt.Sprint(a)))
	}
	return strings.Join(parts, " ")
}

// stripJSONComments removes // and /* */ comments outside strings.
func stripJSONComments(data []byte) []byte {
	var out bytes.Buffer
	inStr, esc := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inStr:
			out.WriteByte(c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
			out.WriteByte(c)
		case c == '/' && i+1 < len(data) && data[i+1] == '/':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			out.WriteByte('\n')
		case c == '/' && i+1 < len(data) && data[i+1] == '*':
			end := bytes.Index(data[i+2:], []byte("*/"))
			if end < 0 {
				return out.Bytes()
			}
			i += end + 3
		default:
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}

// describeTOML describes Codex's config.toml without a TOML parser: its
// tables are its settings, and every key named command (an MCP server's,
// a hook's) with the table it is in is a command, as written.
func describeTOML(path string, data []byte) (File, error) {
	f := File{Path: path, SHA256: Sum(data)}
	table := ""
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			table = strings.Trim(line, "[] ")
			if !slices.Contains(f.Settings, table) {
				f.Settings = append(f.Settings, table)
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			k = strings.TrimSpace(k)
			key := k
			if table != "" {
				key = table + "." + k
			}
			if k == "command" || k == "args" || strings.HasSuffix(k, "_command") || strings.HasSuffix(k, "command") {
				f.Commands = append(f.Commands, Command{Key: key, Command: strings.TrimSpace(v)})
			} else if table == "" && !slices.Contains(f.Settings, k) {
				f.Settings = append(f.Settings, k)
			}
		}
	}
	if f.Empty() && len(bytes.TrimSpace(data)) > 0 {
		f.Settings = []string{"(review the file)"}
	}
	return f, nil
}

// dirSource reads the agents' files from the workspace directory.
type dirSource string

func (d dirSource) read(rel string) ([]byte, error) {
	return ReadFile(filepath.Join(string(d), rel))
}

func (d dirSource) list(rel string) ([]dirEntry, error) {
	root := filepath.Join(string(d), rel)
	fi, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		data, err := ReadFile(root)
		if err != nil {
			return nil, err
		}
		return []dirEntry{{name: ".", data: data}}, nil
	}
	var out []dirEntry
	total := 0
	err = filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			return nil
		}
		name, _ := filepath.Rel(root, p)
		var data []byte
		if de.Type()&fs.ModeSymlink != 0 {
			// The CLI follows the link: hash what it would read, or the
			// link itself when it leads to no regular file.
			target, _ := os.Readlink(p)
			if data, err = ReadFile(p); err != nil {
				data = []byte("symlink -> " + target)
			}
		} else if data, err = ReadFile(p); err != nil {
			return err
		}
		if total += len(data); len(out) >= maxDirFiles || total > maxDirBytes {
			return fmt.Errorf("%s: more than %d files or %d bytes: too large to review", root, maxDirFiles, maxDirBytes)
		}
		out = append(out, dirEntry{name: filepath.ToSlash(name), data: data})
		return nil
	})
	return out, err
}

// gitSource reads the agents' files as committed in a commit: what git
// checks out into a run's new worktree.
type gitSource struct {
	ctx    context.Context
	dir    string // the workspace (paths are relative to it)
	commit string
}

// tree lists the blobs under rel in the commit: path (relative to the
// workspace), mode and object id.
func (g gitSource) tree(rel string) ([][3]string, error) {
	out, err := git.Cmd{Dir: g.dir}.Run(g.ctx, "ls-tree", "-r", "-z", g.commit, "--", rel)
	if err != nil {
		return nil, err
	}
	var entries [][3]string
	for rec := range bytes.SplitSeq(out, []byte{0}) {
		meta, path, ok := bytes.Cut(rec, []byte{'\t'})
		if !ok {
			continue
		}
		f := strings.Fields(string(meta)) // mode type object
		if len(f) != 3 {
			continue
		}
		if f[1] != "blob" {
			return nil, fmt.Errorf("%s: a %s in commit %s, not a file", path, f[1], short12(g.commit))
		}
		entries = append(entries, [3]string{string(path), f[0], f[2]})
	}
	return entries, nil
}

func (g gitSource) blob(rel, mode, obj string) ([]byte, error) {
	if mode == "120000" {
		// The worktree gets a link whose target loopd cannot vouch for.
		return nil, fmt.Errorf("%s: a symbolic link in commit %s; an agent's settings must be a regular file there", filepath.Join(g.dir, rel), short12(g.commit))
	}
	data, err := git.Cmd{Dir: g.dir}.Run(g.ctx, "cat-file", "blob", obj)
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", filepath.Join(g.dir, rel), maxFileBytes)
	}
	return data, nil
}

func (g gitSource) read(rel string) ([]byte, error) {
	entries, err := g.tree(rel)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e[0] == rel {
			return g.blob(rel, e[1], e[2])
		}
	}
	return nil, fs.ErrNotExist
}

func (g gitSource) list(rel string) ([]dirEntry, error) {
	entries, err := g.tree(rel + "/")
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fs.ErrNotExist
	}
	if len(entries) > maxDirFiles {
		return nil, fmt.Errorf("%s: more than %d files: too large to review", filepath.Join(g.dir, rel), maxDirFiles)
	}
	var out []dirEntry
	total := 0
	for _, e := range entries {
		data, err := g.blob(e[0], e[1], e[2])
		if err != nil {
			return nil, err
		}
		if total += len(data); total > maxDirBytes {
			return nil, fmt.Errorf("%s: more than %d bytes: too large to review", filepath.Join(g.dir, rel), maxDirBytes)
		}
		out = append(out, dirEntry{name: strings.TrimPrefix(e[0], rel+"/"), data: data})
	}
	slices.SortFunc(out, func(a, b dirEntry) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

func short12(c string) string { return c[:min(len(c), 12)] }
