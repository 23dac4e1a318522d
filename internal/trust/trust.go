// Package trust decides which of a workspace's files name commands or
// environment that loopd would run, describes what they set, and compares
// them with what the user trusted (loopctl trust), like direnv's allow.
//
// A cloned repository's .loop/config, stop file and env file are written
// by whoever wrote the repository. loopd runs what they name only after
// the user has trusted their exact content (a SHA-256 of the bytes).
// What the user types (--set, flags) and the user's own config file need
// no trust; neither do files the user named there.
//
// The functions that read bytes (DescribeConfig, DescribeStop,
// DescribeEnv), decide (Chooser, Check) and compare (Changes) are pure;
// Inspect reads the files.
package trust

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/joho/godotenv"

	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/shquote"
)

// Kind is what a trusted file is to loopd.
type Kind string

const (
	// KindConfig is the workspace config file, .loop/config: every key it
	// sets steers a run (commands, files fed to the agent, webhooks).
	KindConfig Kind = "config"
	// KindStop is the stop file the workspace picked (default
	// .loop/stop.json) when it names at least one custom_script.
	KindStop Kind = "stop"
	// KindEnv is the env file the workspace picked (default .env) when it
	// sets at least one variable: PATH, LD_PRELOAD, BASH_ENV… of every
	// step.
	KindEnv Kind = "env"
	// KindAgent: see agents.go.
)

// Command is one command a file names.
type Command struct {
	// Key is the config key (agent_command…), or the JSON path of a
	// custom_script condition in a stop file (conditions[0]).
	Key string `json:"key"`
	// Command is the command as loopd runs it (for a custom_script, the
	// script and its arguments).
	Command string `json:"command"`
}

// File is one workspace file that needs trust, and what it sets.
type File struct {
	Path   string `json:"path"` // absolute
	Kind   Kind   `json:"kind"`
	SHA256 string `json:"sha256"` // of the exact bytes described
	// Commands are the commands it names, in file order.
	Commands []Command `json:"commands,omitempty"`
	// Env are the names of the variables an env file sets, sorted (never
	// their values: they may be secrets).
	Env []string `json:"env,omitempty"`
	// Settings are the config keys that are not commands, in file order.
	Settings []string `json:"settings,omitempty"`
	// Values are the settings' entries with their values, in file order:
	// a prompt_file outside the workspace or a
	// notify_webhook to a stranger's server is plain to see before it is
	// trusted. Config values are shown.
	Values []Setting `json:"values,omitempty"`
	// EnvShown are the env file's variables that steer which program runs
	// or where it connects (PATH, LD_PRELOAD, BASH_ENV, NODE_OPTIONS,
	// ANTHROPIC_BASE_URL, HTTPS_PROXY…), with their values, sorted: their
	// danger is in the value, which is not a secret. Other values are
	// never shown (they may be secrets).
	EnvShown []Setting `json:"env_shown,omitempty"`
	// Agent is the CLI that reads an agent file (claude, gemini, codex).
	Agent string `json:"agent,omitempty"`
	// Files are the files of an agent directory (.claude/skills…),
	// relative to it, sorted: the hash covers each one's name and bytes.
	Files []string `json:"files,omitempty"`
	// Parent says an agent file is read from a parent directory of the
	// workspace (the CLIs walk up to /), not from the workspace.
	Parent bool `json:"parent,omitempty"`
	// Commit, when set, says the file was read as committed there (what a
	// worktree run's new worktree gets), not from the checkout.
	Commit string `json:"commit,omitempty"`
}

// Setting is one config entry that is not a command, with its value.
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Empty reports whether f sets nothing, so it needs no trust.
func (f File) Empty() bool {
	return len(f.Commands) == 0 && len(f.Env) == 0 && len(f.Settings) == 0 && len(f.Files) == 0 && len(f.Values) == 0
}

// Sum is the hex SHA-256 of data, the content hash trust records.
func Sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// IsCommandKey reports whether a config key's value is a shell command
// loopd runs: every key named *_command (agent_command, review_command,
// verify_command, setup_command, notify_command, postmortem_command…).
func IsCommandKey(key string) bool { return strings.HasSuffix(key, "_command") }

// DescribeConfig describes a workspace config file's content. Syntax
// errors are returned as config reports them; unknown keys are the
// loader's business (it reports them before trust is checked).
func DescribeConfig(path string, data []byte) (File, error) {
	entries, err := config.Parse(bytes.NewReader(data), path)
	if err != nil {
		return File{}, err
	}
	f := File{Path: path, Kind: KindConfig, SHA256: Sum(data)}
	for _, e := range entries {
		if IsCommandKey(e.Key) {
			if e.Value != "" {
				f.Commands = append(f.Commands, Command{Key: e.Key, Command: e.Value})
			} else if !slices.Contains(f.Settings, e.Key) {
				f.Settings = append(f.Settings, e.Key) // clears a command: still a setting
			}
			continue
		}
		if !slices.Contains(f.Settings, e.Key) {
			f.Settings = append(f.Settings, e.Key)
		}
		f.Values = append(f.Values, Setting{Key: e.Key, Value: e.Value})
	}
	return f, nil
}

// DescribeStop describes a stop file's content: its custom_script
// conditions, wherever they are nested (all, any, not).
func DescribeStop(path string, data []byte) (File, error) {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	f := File{Path: path, Kind: KindStop, SHA256: Sum(data)}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "custom_script" {
				f.Commands = append(f.Commands, Command{Key: strings.TrimPrefix(at, "."), Command: scriptCommand(v)})
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(v[k], at+"."+k)
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

// scriptCommand renders a custom_script condition as the command it runs.
func scriptCommand(c map[string]any) string {
	parts := []string{fmt.Sprint(c["script"])}
	if args, ok := c["args"].([]any); ok {
		for _, a := range args {
			parts = append(parts, shquote.Quote(fmt.Sprint(a)))
		}
	}
	return strings.Join(parts, " ")
}

// DescribeEnv describes an env file's content: the names of the variables
// it sets, never their values.
func DescribeEnv(path string, data []byte) (File, error) {
	// What is shown must be what every reader of the file sees.
	if err := config.CheckEnvLineBreaks(path, data); err != nil {
		return File{}, err
	}
	vars, err := godotenv.UnmarshalBytes(data)
	if err != nil {
		// godotenv quotes the file's content in its messages: not here.
		return File{}, fmt.Errorf("%s: invalid env file", path)
	}
	f := File{Path: path, Kind: KindEnv, SHA256: Sum(data), Env: slices.Sorted(maps.Keys(vars))}
	for _, name := range f.Env {
		if Steering(name) {
			f.EnvShown = append(f.EnvShown, Setting{Key: name, Value: redactURL(vars[name])})
		}
	}
	return f, nil
}

// steering are environment variables that choose the program a command
// runs, code loaded into it, or its configuration.
var steering = []string{"PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES",
	"DYLD_LIBRARY_PATH", "BASH_ENV", "ENV", "SHELL", "SHELLOPTS", "PS4", "PROMPT_COMMAND", "IFS", "HOME",
	"XDG_CONFIG_HOME", "NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME",
	"PERL5OPT", "PERL5LIB", "RUBYOPT", "RUBYLIB", "GOFLAGS", "CODEX_HOME", "CLAUDE_CONFIG_DIR",
	"EDITOR", "VISUAL", "PAGER", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "GIT_DIR", "GIT_WORK_TREE",
	"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_PARAMETERS", "GIT_ASKPASS", "SSH_ASKPASS"}

// Steering reports whether an environment variable steers which program
// runs or where it connects, so that loopctl trust shows its value: the
// names in steering, GIT_CONFIG_*, and names ending in _BASE_URL,
// _API_BASE or _PROXY (any case), which send the agent's requests, and the
// API key in them, elsewhere.
func Steering(name string) bool {
	up := strings.ToUpper(name)
	return slices.Contains(steering, up) || strings.HasPrefix(up, "GIT_CONFIG_") ||
		strings.HasSuffix(up, "_BASE_URL") || strings.HasSuffix(up, "_API_BASE") || strings.HasSuffix(up, "_PROXY")
}

// Origin says who picked a file loopd reads.
type Origin int

const (
	// OriginNone: no file is used for the key.
	OriginNone Origin = iota
	// OriginUser: the user named it for this run (--set or a flag); it
	// needs no trust.
	OriginUser
	// OriginUserConfig: the user config file names it. A path there that
	// resolves inside the workspace (env_file=.env) still names the
	// repository's file, so Inspect trusts it only outside the workspace.
	OriginUserConfig
	// OriginWorkspace: the workspace picked it (its .loop/config, or the
	// default such as .env); it needs trust.
	OriginWorkspace
)

// Chooser tells who picked the file of a path key (stop_file, env_file),
// from the keys each layer sets.
type Chooser struct {
	User, Workspace, Sets []config.Entry
}

// Origin applies the layers' precedence (user config < .loop/config <
// --set) to key; used says whether the resolved config uses a file for it
// (a default such as .env counts as the workspace's choice).
func (c Chooser) Origin(key string, used bool) Origin {
	if !used {
		return OriginNone
	}
	sets := func(es []config.Entry) bool {
		return slices.ContainsFunc(es, func(e config.Entry) bool { return e.Key == key })
	}
	switch {
	case sets(c.Sets):
		return OriginUser
	case sets(c.Workspace):
		return OriginWorkspace
	case sets(c.User):
		return OriginUserConfig
	}
	return OriginWorkspace
}

// Record is what the trust store holds for one file.
type Record struct {
	SHA256    string
	TrustedAt time.Time
	// Was is the file as it was described when trusted (without Path).
	Was File
}

// Status is a file's trust state.
type Status string

const (
	StatusTrusted Status = "trusted" // trusted with this exact content
	StatusNew     Status = "new"     // never trusted (or revoked)
	StatusChanged Status = "changed" // trusted once, changed since
)

// Verdict is one file's trust state against the store.
type Verdict struct {
	File      File
	Status    Status
	TrustedAt time.Time // when it was trusted (trusted, changed); zero for new
	Changes   []string  // what changed since (changed), see Changes
}

// Check compares files with the records, keyed by path.
func Check(files []File, records map[string]Record) []Verdict {
	out := make([]Verdict, 0, len(files))
	for _, f := range files {
		rec, ok := records[f.Path]
		switch {
		case !ok:
			out = append(out, Verdict{File: f, Status: StatusNew})
		case rec.SHA256 == f.SHA256:
			out = append(out, Verdict{File: f, Status: StatusTrusted, TrustedAt: rec.TrustedAt})
		default:
			out = append(out, Verdict{File: f, Status: StatusChanged, TrustedAt: rec.TrustedAt, Changes: Changes(rec.Was, f)})
		}
	}
	return out
}

// Untrusted returns the verdicts that are not StatusTrusted.
func Untrusted(vs []Verdict) []Verdict {
	return slices.DeleteFunc(slices.Clone(vs), func(v Verdict) bool { return v.Status == StatusTrusted })
}

// Problem words an untrusted verdict for a refusal: the file and what
// changed.
func (v Verdict) Problem() string {
	name := v.File.Path
	if v.File.Commit != "" {
		// loopctl trust reads the checkout: the committed file must be
		// the same bytes (commit it, or check it out) to be trusted.
		name += " as committed in " + short12(v.File.Commit) + " (the run's worktree gets this one)"
	}
	where := ""
	if v.File.Parent {
		where = "; read from a parent directory of the workspace"
	}
	switch v.Status {
	case StatusNew:
		return fmt.Sprintf("%s: not trusted (%s%s)", name, v.File.Summary(), where)
	case StatusChanged:
		msg := fmt.Sprintf("%s: changed since trusted at %s%s", name, v.TrustedAt.UTC().Format(time.RFC3339), where)
		if len(v.Changes) > 0 {
			msg += " (" + strings.Join(v.Changes, "; ") + ")"
		}
		return msg
	}
	return v.File.Path + ": trusted"
}

// Summary counts what a file sets, for one line.
func (f File) Summary() string {
	var parts []string
	plural := func(n int, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return strconv.Itoa(n) + " " + one + "s"
	}
	if n := len(f.Commands); n > 0 {
		parts = append(parts, plural(n, "command"))
	}
	if n := len(f.Env); n > 0 {
		parts = append(parts, plural(n, "environment variable"))
	}
	if n := len(f.Settings); n > 0 {
		parts = append(parts, plural(n, "setting"))
	}
	if n := len(f.Files); n > 0 {
		parts = append(parts, plural(n, "file"))
	}
	if len(parts) == 0 {
		return "sets nothing"
	}
	return "sets " + strings.Join(parts, ", ")
}

// Changes lists what differs between a file as trusted (was) and as it is
// (now): commands added, changed or removed by key, environment variables
// and settings added or removed. Its content may differ in ways that show
// here as nothing (a comment, a value of a setting, of a variable).
func Changes(was, now File) []string {
	var out []string
	cmds := func(f File) map[string]string {
		m := map[string]string{}
		for _, c := range f.Commands {
			if prev, ok := m[c.Key]; ok {
				m[c.Key] = prev + "\n" + c.Command // verify_command repeats
			} else {
				m[c.Key] = c.Command
			}
		}
		return m
	}
	w, n := cmds(was), cmds(now)
	for _, k := range slices.Sorted(maps.Keys(n)) {
		if old, ok := w[k]; !ok {
			out = append(out, "command "+k+" added")
		} else if old != n[k] {
			out = append(out, "command "+k+" changed")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(w)) {
		if _, ok := n[k]; !ok {
			out = append(out, "command "+k+" removed")
		}
	}
	out = append(out, setDiff("environment variable", was.Env, now.Env)...)
	out = append(out, setDiff("setting", was.Settings, now.Settings)...)
	out = append(out, setDiff("file", was.Files, now.Files)...)
	if len(was.Values) > 0 { // records from before values were kept have none
		vals := func(f File) map[string]string {
			m := map[string]string{}
			for _, s := range f.Values {
				m[s.Key] += s.Value + "\n"
			}
			return m
		}
		w, n := vals(was), vals(now)
		for _, k := range slices.Sorted(maps.Keys(n)) {
			if old, ok := w[k]; ok && old != n[k] {
				out = append(out, "setting "+k+" changed")
			}
		}
	}
	return out
}

func setDiff(what string, was, now []string) []string {
	var out []string
	for _, k := range now {
		if !slices.Contains(was, k) {
			out = append(out, what+" "+k+" added")
		}
	}
	for _, k := range was {
		if !slices.Contains(now, k) {
			out = append(out, what+" "+k+" removed")
		}
	}
	return out
}

// redactURL hides the password of a URL value (a proxy's user:password@).
func redactURL(v string) string {
	if u, err := url.Parse(v); err == nil && u.Scheme != "" && u.User != nil {
		return u.Redacted()
	}
	return v
}
