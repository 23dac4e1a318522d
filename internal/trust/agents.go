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
	"syscall"

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

// parentPaths are what the CLIs also read from every parent directory of
// their working directory, up to / (agent.EveryParent), and
// firstEnvPaths the files of which only the first found walking up is
// read (agent.FirstFound: Gemini CLI's env file), in their order.
var parentPaths, firstEnvPaths = func() (every, first []agentPath) {
	for i, f := range agent.ProjectFiles() {
		switch f.Parents {
		case agent.EveryParent:
			every = append(every, agentPaths[i])
		case agent.FirstFound:
			first = append(first, agentPaths[i])
		}
	}
	return every, first
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
		f, ok, err := describeAgentPath(src, p, path)
		if err != nil {
			return nil, err
		}
		if ok {
			f.Commit = commit
			out = append(out, f)
		}
	}
	return out, nil
}

// describeAgentPath describes p read from src, named path; ok is false
// when there is none, or it sets nothing (a JSON file of {}, an empty env
// file).
func describeAgentPath(src agentSource, p agentPath, path string) (File, bool, error) {
	var f File
	if p.dir {
		entries, err := src.list(p.rel)
		if errors.Is(err, fs.ErrNotExist) {
			return File{}, false, nil
		}
		if err != nil {
			return File{}, false, err
		}
		f = describeDir(path, entries)
	} else {
		data, err := src.read(p.rel)
		if errors.Is(err, fs.ErrNotExist) {
			return File{}, false, nil
		}
		if err != nil {
			return File{}, false, err
		}
		describe := p.describe
		if describe == nil {
			describe = DescribeAgentJSON
		}
		if f, err = describe(path, data); err != nil {
			return File{}, false, err
		}
	}
	f.Kind, f.Agent = KindAgent, p.agent
	return f, !f.Empty(), nil
}

// inspectParents describes the agents' files the CLIs read from the
// parent directories of dir (parentPaths, and Gemini CLI's first env file
// when dir has none), up to /. name maps a parent directory to the one it
// stands for (a run's worktree's parents inside the worktree stand for the
// workspace's); the user's home directory is passed over: its
// .claude/commands and the like are the user's own, as ~/.config/loop is.
//
// A file there that another user owns is refused outright, trusted or
// not: whoever can write a parent directory (/tmp, a shared checkout)
// could otherwise make the agent run commands as this user.
func inspectParents(dir string, name func(string) string) ([]File, error) {
	home, _ := os.UserHomeDir()
	envFound := false
	for _, p := range firstEnvPaths {
		if _, err := os.Lstat(filepath.Join(dir, p.rel)); err == nil {
			envFound = true
		}
	}
	var out []File
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		paths := parentPaths
		if !envFound {
			for _, p := range firstEnvPaths {
				if _, err := os.Lstat(filepath.Join(d, p.rel)); err == nil {
					envFound = true
					paths = append(slices.Clip(paths), p)
					break
				}
			}
		}
		if d != home {
			for _, p := range paths {
				path := filepath.Join(d, p.rel)
				if _, err := os.Lstat(path); err != nil {
					continue
				}
				// The directories between (d/.claude) too: their owner
				// could swap what is below them.
				for sub := filepath.Dir(path); sub != d; sub = filepath.Dir(sub) {
					if fi, err := os.Lstat(sub); err == nil {
						if err := ownedByMe(sub, fi); err != nil {
							return nil, err
						}
					}
				}
				if err := checkOwner(path); err != nil {
					return nil, err
				}
				f, ok, err := describeAgentPath(dirSource(d), p, filepath.Join(name(d), p.rel))
				if err != nil {
					return nil, err
				}
				if ok {
					f.Parent = true
					out = append(out, f)
				}
			}
		}
		if d == filepath.Dir(d) {
			return out, nil
		}
	}
}

// ownedByMe refuses p (described by fi) when a user other than this
// process's or root owns it.
func ownedByMe(p string, fi fs.FileInfo) error {
	me := os.Geteuid()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == me || st.Uid == 0 {
		return nil
	}
	return fmt.Errorf("%s: owned by uid %d, not by you (uid %d) or root; the agent CLI would read it from this parent directory of the workspace and run what it names as you: remove it, or move the workspace", p, st.Uid, me)
}

// checkOwner refuses a file (or a directory and everything in it) owned
// by a user other than this process's or root, whether a link or what it
// leads to.
func checkOwner(root string) error {
	check := ownedByMe
	fi, err := os.Stat(root)
	if err != nil {
		return err
	}
	if err := check(root, fi); err != nil {
		return err
	}
	return filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := de.Info() // lstat: the link itself
		if err != nil {
			return err
		}
		return check(p, fi)
	})
}

// describeDir describes a directory's files as one set: its hash covers
// every file's name and bytes, so adding, removing or editing one is a
// change. Lines that run something are shown as commands: !` (a Claude
// Code command or skill body's shell line, run when it expands the file),
// !{ (Gemini CLI's), and command: (a hook or MCP server declared in front
// matter).
func describeDir(path string, entries []dirEntry) File {
	h := sha256.New()
	f := File{Path: path}
	for _, e := range entries {
		sum := sha256.Sum256(e.data)
		fmt.Fprintf(h, "%s\x00%x\n", e.name, sum)
		f.Files = append(f.Files, e.name)
		n := 0
		for line := range strings.Lines(string(e.data)) {
			n++
			if t := strings.TrimLeft(line, " \t-"); strings.Contains(line, "!`") || strings.Contains(line, "!{") ||
				strings.HasPrefix(t, "command:") || strings.HasPrefix(t, `"command":`) {
				f.Commands = append(f.Commands, Command{Key: e.name + ":" + strconv.Itoa(n), Command: strings.TrimSpace(line)})
			}
		}
	}
	f.SHA256 = hex.EncodeToString(h.Sum(nil))
	return f
}

// utf8BOM is skipped by the CLIs' JSON readers, so by the describer too.
var utf8BOM = []byte("\xef\xbb\xbf")

// DescribeAgentJSON describes an agent's JSON settings file (Claude Code's
// settings and .mcp.json, Gemini CLI's settings): every command it names
// wherever it is nested (hooks, MCP servers with their arguments,
// apiKeyHelper and other helpers), the names of the environment variables
// it sets (and the values of those that steer), its top-level keys, and
// the value of every other setting with its JSON path: an MCP server's
// env and cwd, a pager, a sandbox helper's path all decide what runs, and
// a list of names to look for would always miss one. Comments (Gemini
// CLI allows them) and a UTF-8 BOM are skipped first; a file that is still
// not JSON is described as such and gated all the same (its hash).
func DescribeAgentJSON(path string, data []byte) (File, error) {
	f := File{Path: path, SHA256: Sum(data)}
	var doc map[string]any
	if err := json.Unmarshal(stripJSONComments(bytes.TrimPrefix(data, utf8BOM)), &doc); err != nil {
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
		m, ok := v.(map[string]any)
		if !ok {
			if list, ok := v.([]any); ok {
				for i, e := range list {
					walk(e, at+"["+strconv.Itoa(i)+"]")
				}
			}
			return
		}
		c, isCmd := m["command"].(string)
		if isCmd {
			f.Commands = append(f.Commands, Command{Key: at, Command: withArgs(c, m["args"])})
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			key := at + "." + k
			if at == "" {
				key = k
			}
			switch {
			case at == "" && (k == "env" || k == "$schema"):
				if _, ok := m[k].(map[string]any); ok || k == "$schema" {
					continue // described above
				}
			case isCmd && (k == "command" || k == "args"):
				continue // shown with the command
			}
			if s, ok := m[k].(string); ok && helperKey(k) {
				f.Commands = append(f.Commands, Command{Key: key, Command: s})
				continue
			}
			if val, ok := scalarJSON(m[k]); ok {
				f.Values = append(f.Values, Setting{Key: key, Value: val})
				continue
			}
			walk(m[k], key)
		}
	}
	walk(doc, "")
	return f, nil
}

// scalarJSON renders a JSON scalar, or an array of scalars, as a value to
// show; ok is false for objects and arrays holding them.
func scalarJSON(v any) (string, bool) {
	switch v := v.(type) {
	case map[string]any:
		return "", false
	case []any:
		for _, e := range v {
			if _, ok := scalarJSON(e); !ok {
				return "", false
			}
		}
		b, _ := json.Marshal(v)
		return string(b), true
	case string:
		return redactURL(v), true
	case nil:
		return "null", true
	}
	return fmt.Sprint(v), true
}

// helperKey reports whether a settings key's string value is a command
// the CLI runs by itself: Claude Code's apiKeyHelper, awsAuthRefresh,
// awsCredentialExport, gcpAuthRefresh, otelHeadersHelper,
// processWrapper; Gemini CLI's tools.discoveryCommand and
// tools.callCommand. Other settings are shown with their values.
func helperKey(k string) bool {
	return strings.HasSuffix(k, "Helper") || strings.HasSuffix(k, "Command") ||
		k == "awsAuthRefresh" || k == "awsCredentialExport" || k == "gcpAuthRefresh" || k == "processWrapper"
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
// tables are its settings; every key named command or notify (an MCP
// server's, a hook's, Codex's notify program), and every inline table
// that holds a command, is a command, as written; every other key is
// shown with its value as written. A value that spans lines (an array)
// is read to its closing bracket.
func describeTOML(path string, data []byte) (File, error) {
	f := File{Path: path, SHA256: Sum(data)}
	table := ""
	lines := slices.Collect(strings.Lines(string(bytes.TrimPrefix(data, utf8BOM))))
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
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
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			for depth := bracketDepth(v); depth > 0 && i+1 < len(lines); depth = bracketDepth(v) {
				i++
				v += " " + strings.TrimSpace(lines[i])
			}
			key := k
			if table != "" {
				key = table + "." + k
			}
			switch {
			case k == "command" || k == "args" || k == "notify" || strings.HasSuffix(k, "command"),
				strings.HasPrefix(v, "{") && strings.Contains(v, "command"):
				f.Commands = append(f.Commands, Command{Key: key, Command: v})
			default:
				if table == "" && !slices.Contains(f.Settings, k) {
					f.Settings = append(f.Settings, k)
				}
				f.Values = append(f.Values, Setting{Key: key, Value: v})
			}
		}
	}
	if f.Empty() && len(bytes.TrimSpace(data)) > 0 {
		f.Settings = []string{"(review the file)"}
	}
	return f, nil
}

// bracketDepth is how many [ and { in a TOML value are still open,
// outside strings.
func bracketDepth(v string) int {
	depth := 0
	var quote rune
	esc := false
	for _, c := range v {
		switch {
		case esc:
			esc = false
		case quote != 0:
			if c == '\\' && quote == '"' {
				esc = true
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#':
			return depth
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		}
	}
	return depth
}

// dirSource reads the agents' files from the workspace directory.
type dirSource string

func (d dirSource) read(rel string) ([]byte, error) {
	return ReadFile(filepath.Join(string(d), rel))
}

func (d dirSource) list(rel string) ([]dirEntry, error) {
	root := filepath.Join(string(d), rel)
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, errSymlink(root)
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
			return errSymlink(p)
		}
		if data, err = ReadFile(p); err != nil {
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

// errSymlink refuses a symbolic link in (or as) an agent directory: the
// CLI reads what it leads to, a directory trust would have to follow and
// pin whole, and which can change (or lead outside the workspace) with
// the link itself unchanged.
func errSymlink(p string) error {
	return fmt.Errorf("%s: a symbolic link in an agent's directory; loopd refuses links there (the agent would read what it leads to, which trust cannot pin): replace it with the files themselves", p)
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

func (g gitSource) blob(rel, mode, _ string) ([]byte, error) {
	if mode == "120000" {
		// The worktree gets a link whose target loopd cannot vouch for.
		return nil, fmt.Errorf("%s: a symbolic link in commit %s; an agent's settings must be a regular file there", filepath.Join(g.dir, rel), short12(g.commit))
	}
	// --filters: the bytes checkout writes into the worktree (a
	// .gitattributes eol=crlf, a smudge filter), which are what the
	// agent reads and what loopctl trust hashed in the checkout.
	data, err := git.Cmd{Dir: g.dir}.Run(g.ctx, "cat-file", "--filters", g.commit+":./"+rel)
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
	all, err := g.tree(rel)
	if err != nil {
		return nil, err
	}
	var entries [][3]string
	for _, e := range all {
		switch {
		case e[0] == rel && e[1] == "120000":
			// `.claude/skills -> ../tools/skills`: the worktree gets the
			// link, the agent what it leads to.
			return nil, errSymlink(filepath.Join(g.dir, rel) + " (in commit " + short12(g.commit) + ")")
		case strings.HasPrefix(e[0], rel+"/"):
			entries = append(entries, e)
		}
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
