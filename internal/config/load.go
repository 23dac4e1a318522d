package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// WorkspaceConfig is the path of the workspace config file, relative to the
// workspace.
const WorkspaceConfig = ".loop/config"

// LoadOptions says where [Load] finds the configuration layers.
type LoadOptions struct {
	// Workspace is the run's workspace, an absolute path. Relative paths in
	// every layer resolve against it, and it holds the workspace config file
	// (.loop/config) and the workspace defaults (PROMPT.md, .loop/stop.json,
	// .env).
	Workspace string
	// UserConfig is the path of the user config file; "" means
	// [UserConfigPath] (and no user layer when there is no home directory).
	// A missing file is fine.
	UserConfig string
	// Sets are the --set key=value arguments, in order, the last layer.
	Sets []string
	// WorkspaceConfigGiven says the caller already read the workspace
	// config file: WorkspaceConfigData is its content (nil: there is
	// none), used instead of reading the file again, so that the bytes the
	// caller hashed for trust are the bytes the run is built from.
	WorkspaceConfigGiven bool
	WorkspaceConfigData  []byte
}

// UserConfigPath returns the user config file's path:
// $XDG_CONFIG_HOME/loop/config when XDG_CONFIG_HOME is set to an absolute
// path (as the XDG spec requires), else ~/.config/loop/config, on every
// platform.
func UserConfigPath() (string, error) {
	if dir := os.Getenv("XDG_CONFIG_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "loop", "config"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locate user config: %w", err)
	}
	return filepath.Join(home, ".config", "loop", "config"), nil
}

// Load resolves the configuration of a new run: the built-in defaults, the
// user config file, the workspace config file and the --set arguments, in
// that order of precedence (see the package documentation); then the
// workspace defaults (PROMPT.md, .loop/stop.json, .env when present and
// their key was not set); then [Config.Validate].
//
// It reports every problem at once, from every layer: the error is
// errors.Join of *ConfigError, each located at the file and line, the --set
// position, or DefaultsFile. Missing config files are fine. On error the
// Config is the zero value. Load reads files and changes nothing.
func Load(opts LoadOptions) (Config, error) {
	if err := checkWorkspace(opts.Workspace); err != nil {
		return Config{}, err
	}
	ws := filepath.Clean(opts.Workspace)
	c := Default()
	p := provenance{entries: make(map[string]Entry), fallback: DefaultsFile}
	var errs []error

	userConfig := opts.UserConfig
	if userConfig == "" {
		userConfig, _ = UserConfigPath() // no home directory: no user layer
	}
	wsConfig := filepath.Join(ws, WorkspaceConfig)
	for _, path := range []string{userConfig, wsConfig} {
		if path == "" {
			continue
		}
		var entries []Entry
		var err error
		switch {
		case path == wsConfig && opts.WorkspaceConfigGiven && opts.WorkspaceConfigData == nil:
			continue
		case path == wsConfig && opts.WorkspaceConfigGiven:
			entries, err = Parse(bytes.NewReader(opts.WorkspaceConfigData), path)
		default:
			entries, err = ParseFile(path)
		}
		if entries == nil && errors.Is(err, fs.ErrNotExist) {
			continue // a layer the user does not use
		}
		errs = append(errs, flatten(err)...)
		errs = append(errs, applyLayer(&c, entries, ws, p)...)
	}
	entries, err := ParseSets(opts.Sets)
	errs = append(errs, flatten(err)...)
	errs = append(errs, applyLayer(&c, entries, ws, p)...)

	errs = append(errs, applyWorkspaceDefaults(&c, ws, p)...)
	errs = append(errs, validate(c, ws, p)...)
	errs = append(errs, confineWorkspaceFiles(c, ws, wsConfig, userConfig, p)...)
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// With returns a copy of the frozen config c with more --set arguments
// applied as a new top layer, re-validated for workspace (as by `loopctl
// resume --set max_iterations=100`). Workspace defaults are not re-applied:
// the config stays frozen apart from the keys set. On error, every problem is
// reported as by [Load] (values from c are located at RunConfigFile) and the
// result is the zero value; c itself is never changed.
func (c Config) With(workspace string, sets []string) (Config, error) {
	if err := checkWorkspace(workspace); err != nil {
		return Config{}, err
	}
	ws := filepath.Clean(workspace)
	n := c.clone()
	p := provenance{entries: make(map[string]Entry), fallback: RunConfigFile}
	entries, err := ParseSets(sets)
	errs := flatten(err)
	errs = append(errs, applyLayer(&n, entries, ws, p)...)
	errs = append(errs, validate(n, ws, p)...)
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return n, nil
}

// applyLayer applies the entries of one layer to c, in order, recording in p
// the entry that set each key. It returns a problem for each entry that could
// not be applied; such an entry changes nothing. Layer semantics:
//
//   - a key set again overrides its earlier value;
//   - verify_command entries of this layer replace the list of earlier layers
//     and append to each other; an empty value clears the list;
//   - prompt and prompt_file are one setting: a layer that sets one clears the
//     other from earlier layers, and one layer may not set both;
//   - price.<model> overrides one model; an empty value removes the override.
func applyLayer(c *Config, entries []Entry, ws string, p provenance) []error {
	var (
		errs                []error
		verifySeen          bool
		prompt, promptFile  Entry // last entries of this layer that set them
		setPrompt, setPFile bool
	)
	for _, e := range entries {
		if model, ok := strings.CutPrefix(e.Key, pricePrefix); ok {
			if msg := setPrice(c, model, e.Value); msg != "" {
				errs = append(errs, &ConfigError{File: e.File, Line: e.Line, Key: e.Key, Msg: msg})
				continue
			}
			p.entries[e.Key] = e
			continue
		}
		k, ok := lookupKey(e.Key)
		if !ok {
			msg := "unknown key"
			if s := suggestKey(e.Key); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			errs = append(errs, &ConfigError{File: e.File, Line: e.Line, Key: e.Key, Msg: msg})
			continue
		}
		if k.repeatable {
			if !verifySeen {
				c.VerifyCommands, verifySeen = nil, true
			}
			if e.Value == "" {
				c.VerifyCommands = nil
			} else {
				c.VerifyCommands = append(c.VerifyCommands, e.Value)
			}
			p.entries[k.name] = e
			continue
		}
		if msg := k.set(c, e.Value, ws); msg != "" {
			errs = append(errs, &ConfigError{File: e.File, Line: e.Line, Key: e.Key, Msg: msg})
			continue
		}
		p.entries[k.name] = e
		switch k.name {
		case "prompt":
			prompt, setPrompt = e, true
		case "prompt_file":
			promptFile, setPFile = e, true
		}
	}

	switch {
	case setPrompt && setPFile && c.Prompt != "" && c.PromptFile != "":
		earlier, later := prompt, promptFile
		if later.Line < earlier.Line {
			earlier, later = later, earlier
		}
		errs = append(errs, &ConfigError{
			File: later.File, Line: later.Line, Key: later.Key,
			Msg: fmt.Sprintf("conflicts with %s at %s: set only one of prompt and prompt_file", earlier.Key, where(earlier)),
		})
		c.Prompt = "" // reported once, here, not again by validate
	case setPrompt && c.Prompt != "":
		c.PromptFile = ""
	case setPFile && c.PromptFile != "":
		c.Prompt = ""
	}
	return errs
}

// where names an entry's position within its layer, for messages.
func where(e Entry) string {
	if e.File == SetFile {
		return SetFile + " " + strconv.Itoa(e.Line)
	}
	return "line " + strconv.Itoa(e.Line)
}

// applyWorkspaceDefaults fills in the defaults that depend on the
// workspace's files, for keys that no layer set (an explicitly empty value
// counts as set, so "env_file=" turns off loading .env).
//
// A default PROMPT.md must be one of the workspace's own files (see
// workspaceFileProblem): it needs no trust, and a repository's PROMPT.md
// that is a symlink to ~/.ssh/id_rsa, to .git/config (a clone's remote URL
// holds its token) or to .env would otherwise send that file to the model
// and store it as the run's goal. (.loop/stop.json and .env are trusted
// by content, wherever they lead.)
func applyWorkspaceDefaults(c *Config, ws string, p provenance) []error {
	unset := func(key string) bool { _, set := p.entries[key]; return !set }
	if c.Agent == AgentCommand && unset("model") {
		// The built-in model names a Claude model a command agent may not
		// run: priced at its rates, a command agent reporting $0.02 a call
		// would be charged a made-up price and max_cost would enforce it.
		// Without a model, the agent's reported cost counts.
		c.Model = ""
	}
	if path := filepath.Join(ws, ".loop", "stop.json"); unset("stop_file") && isRegularFile(path) {
		c.StopFile = path
	}
	if path := filepath.Join(ws, ".env"); unset("env_file") && isRegularFile(path) {
		c.EnvFile = path
	}
	if c.Prompt == "" && c.PromptFile == "" && unset("prompt_file") {
		if path := filepath.Join(ws, "PROMPT.md"); isRegularFile(path) {
			if problem := workspaceFileProblem(ws, path, c.EnvFile); problem != "" {
				return []error{&ConfigError{File: DefaultsFile, Key: "prompt_file", Msg: problem +
					"; a workspace's own PROMPT.md must be a file of its own: " +
					"give the goal yourself (loopctl start \"…\" or --prompt-file)"}}
			}
			c.PromptFile = path
		}
	}
	return nil
}

// workspaceFileKeys are the keys that name a file loopd reads into the
// run (the goal, the plan's tasks) or points the agent at (the spec), with
// the loopctl start flag that names one by hand.
var workspaceFileKeys = []struct {
	key, flag string
	field     func(*Config) *string
}{
	{"prompt_file", "--prompt-file", func(c *Config) *string { return &c.PromptFile }},
	{"spec_file", "--spec", func(c *Config) *string { return &c.SpecFile }},
	{"plan_file", "--plan", func(c *Config) *string { return &c.PlanFile }},
}

// confineWorkspaceFiles requires prompt_file, spec_file and plan_file to be
// regular files inside the workspace when whoever wrote the workspace chose
// them: set by its .loop/config (wsConfig), or a relative path in the user
// config (it names a file of every workspace, as the PROMPT.md default
// does). Trusting .loop/config shows "prompt_file=GOAL.md", not that
// GOAL.md is a symlink to /proc/self/environ or ~/.ssh/id_rsa, whose
// content would become the run's goal, stored and sent to the model. Paths
// the user types (--set, the flags) are theirs and may lead anywhere. A
// file that is missing or not regular is reported by validate; a key whose
// file the run will not read (a goal given as text replaces prompt_file) is
// not checked.
func confineWorkspaceFiles(c Config, ws, wsConfig, userConfig string, p provenance) []error {
	var errs []error
	for _, k := range workspaceFileKeys {
		path := *k.field(&c)
		e, set := p.entries[k.key]
		if path == "" || !set {
			continue
		}
		if e.File != wsConfig && (e.File != userConfig || filepath.IsAbs(e.Value)) {
			continue
		}
		if msg, _ := fileProblem(path, mustExist); msg != "" {
			continue
		}
		if problem := workspaceFileProblem(ws, path, c.EnvFile); problem != "" {
			errs = append(errs, &ConfigError{File: e.File, Line: e.Line, Key: k.key, Msg: problem +
				"; a file the workspace chooses must be a regular file of its own: " +
				"to use that file, name it yourself (loopctl start " + k.flag + " FILE)"})
		}
	}
	return errs
}

// workspaceFileProblem says why the existing file path, chosen by the
// workspace, must not be read into a run (its goal, its plan), or "" when
// it may: it leads outside the workspace ws; into the git directory (a
// clone's .git/config holds its remote's token in the URL); to an env file
// (.env*, or envFile, the run's env_file) whose secrets would be sent to
// the model, and redaction matches their values, not the file's text; or
// it has other hard links, so it may be a file outside under a second
// name (git cannot make one, but an archive or another tool can).
func workspaceFileProblem(ws, path, envFile string) string {
	real, ok := insideWorkspace(ws, path)
	if !ok {
		return fmt.Sprintf("%s leads outside the workspace (to %s)", path, real)
	}
	if dir := gitDirOf(ws); dir != "" {
		if rel, err := filepath.Rel(dir, real); err == nil && filepath.IsLocal(rel) {
			return fmt.Sprintf("%s leads into the git directory (to %s)", path, real)
		}
	}
	root, _ := filepath.EvalSymlinks(ws)
	rel, _ := filepath.Rel(root, real)
	for part := range strings.SplitSeq(filepath.ToSlash(rel), "/") {
		if part == ".git" {
			return fmt.Sprintf("%s leads into the git directory (to %s)", path, real)
		}
	}
	if envFile != "" {
		if env, err := filepath.EvalSymlinks(envFile); err == nil && env == real {
			return fmt.Sprintf("%s is the env file (env_file %s)", path, envFile)
		}
	}
	if strings.HasPrefix(filepath.Base(real), ".env") {
		return fmt.Sprintf("%s is an env file (%s)", path, real)
	}
	if info, err := os.Stat(real); err == nil {
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			return fmt.Sprintf("%s has %d hard links: it may be a file outside the workspace under another name", path, st.Nlink)
		}
	}
	return ""
}

// gitDirOf is the resolved git directory of a linked worktree or a
// submodule at ws (its .git is a file, "gitdir: DIR"), or "". An ordinary
// repository's .git directory is found by name.
func gitDirOf(ws string) string {
	b, err := os.ReadFile(filepath.Join(ws, ".git"))
	if err != nil || len(b) > 4<<10 {
		return ""
	}
	dir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return ""
	}
	dir = strings.TrimSpace(dir)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(ws, dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	return real
}

// insideWorkspace resolves path's symlinks and reports whether it stays
// in the workspace ws (itself resolved), with the resolved path.
func insideWorkspace(ws, path string) (string, bool) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return path, false
	}
	root, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return real, false
	}
	rel, err := filepath.Rel(root, real)
	return real, err == nil && filepath.IsLocal(rel)
}

// flatten returns the errors joined in err (nil for nil), so that the final
// errors.Join holds a flat list of *ConfigError.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
