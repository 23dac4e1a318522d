package config

import (
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
)

// DefaultsFile is the File of a problem with a value that no file and no
// --set gave: a built-in default, or a workspace default such as PROMPT.md.
const DefaultsFile = "defaults"

// RunConfigFile is the File of a problem found in an already resolved
// config (a frozen run config, or one built in code) with a value whose
// origin is no longer known.
const RunConfigFile = "run config"

// ConfigError is one problem with the configuration, located so that the
// user knows what to fix: the file and line (or the --set position, or
// DefaultsFile, or RunConfigFile) and the key. Its Error form is
//
//	/ws/.loop/config:3: max_iterations: must be a whole number ≥ 0, got "abc"
//	--set 2: modle: unknown key (did you mean "model"?)
//	defaults: prompt: no goal: set prompt or prompt_file, or add PROMPT.md to the workspace
//
// A problem that involves several keys is reported on the key to change,
// located at the entry that set that key last.
type ConfigError struct {
	// File is a config file's path, SetFile, DefaultsFile or RunConfigFile.
	File string
	// Line is the 1-based line in File (the position for SetFile), or 0 when
	// the problem is not tied to one line.
	Line int
	// Key is the config key, or "" for a line that has none.
	Key string
	// Msg says what is wrong and, where it helps, what is expected.
	Msg string
	// Err is the underlying error, if any (for errors.Is, such as
	// fs.ErrNotExist); Msg already describes it.
	Err error
}

// Error returns "<where>: <key>: <msg>" as documented on ConfigError.
func (e *ConfigError) Error() string {
	var b strings.Builder
	switch {
	case e.File == SetFile && e.Line > 0:
		b.WriteString(SetFile + " " + strconv.Itoa(e.Line))
	case e.Line > 0:
		b.WriteString(e.File + ":" + strconv.Itoa(e.Line))
	default:
		b.WriteString(e.File)
	}
	if e.Key != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(e.Key)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *ConfigError) Unwrap() error { return e.Err }

// provenance remembers which entry set each key last, to locate problems
// found after all layers were applied.
type provenance struct {
	entries  map[string]Entry // by key; price keys in full ("price.gpt-4o")
	fallback string           // File for keys that no entry set
}

// errorFor returns a ConfigError for key, located at the entry that set it.
func (p provenance) errorFor(key, msg string, cause error) *ConfigError {
	if e, ok := p.entries[key]; ok {
		return &ConfigError{File: e.File, Line: e.Line, Key: key, Msg: msg, Err: cause}
	}
	return &ConfigError{File: p.fallback, Key: key, Msg: msg, Err: cause}
}

// Validate checks c for the run in workspace (an absolute path against which
// relative paths resolve) and reports every problem at once: errors.Join of
// *ConfigError, nil when c is valid. Besides each key's own rules it checks
// that the goal is set (prompt or prompt_file), that files which must exist
// do and that env_file parses, and the rules across keys: agent "command"
// needs agent_command, the codex preset cannot run a Claude model, and the
// plan gate needs plan_file. Problems are located with RunConfigFile, since c
// does not know where its values came from; [Load] and [Config.With] locate
// them at the file line or --set that set the key.
func (c Config) Validate(workspace string) error {
	if err := checkWorkspace(workspace); err != nil {
		return err
	}
	return errors.Join(validate(c, workspace, provenance{fallback: RunConfigFile})...)
}

// checkWorkspace rejects a workspace that cannot anchor relative paths.
func checkWorkspace(ws string) error {
	if !filepath.IsAbs(ws) {
		return fmt.Errorf("config: workspace %q is not an absolute path", ws)
	}
	return nil
}

// validate returns every problem with c, located by p.
func validate(c Config, ws string, p provenance) []error {
	var errs []error
	for _, k := range keys {
		if k.check != nil {
			if msg := k.check(&c); msg != "" {
				errs = append(errs, p.errorFor(k.name, msg, nil))
				continue
			}
		}
		if k.file == noFile {
			continue
		}
		path := resolve(ws, *k.path(&c))
		if path == "" {
			continue
		}
		if msg, err := fileProblem(path, k.file); msg != "" {
			errs = append(errs, p.errorFor(k.name, msg, err))
			continue
		}
		if k.name == "env_file" {
			if _, err := LoadEnvFile(path); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, model := range slices.Sorted(maps.Keys(c.Prices)) {
		if msg := priceProblem(model, c.Prices[model]); msg != "" {
			errs = append(errs, p.errorFor(pricePrefix+model, msg, nil))
		}
	}

	// Rules across keys, each reported on the key to change.
	preset, _ := agent.Lookup(string(c.Agent))
	if preset != nil && preset.Command == nil && strings.TrimSpace(c.AgentCommand) == "" {
		errs = append(errs, p.errorFor("agent", fmt.Sprintf("agent %q needs agent_command, the shell command to run", c.Agent), nil))
	}
	if why := cannotRun(preset, c.Model); why != "" && c.AgentCommand == "" {
		// The default model is a Claude model: a user who sets agent=codex
		// (or gemini) and forgets model would otherwise fail on every
		// iteration.
		err := p.errorFor("model", fmt.Sprintf("%q is %s, which agent %q cannot run; set model to a model %s runs", c.Model, why, c.Agent, preset.Title), nil)
		if _, set := p.entries["model"]; !set {
			if e, ok := p.entries["agent"]; ok {
				err.File, err.Line = e.File, e.Line
			}
		}
		errs = append(errs, err)
	}
	if c.HasGate(GatePlan) && c.PlanFile == "" {
		errs = append(errs, p.errorFor("completion", `gate "plan" needs plan_file to be set`, nil))
	}
	// verify and review hold vacuously when their phase is not configured;
	// a gate list in which every gate would hold vacuously would complete
	// the run after its first attempt, which nobody means.
	if len(c.Completion) > 0 && !c.HasGate(GatePromise) && !c.HasGate(GatePlan) &&
		!(c.HasGate(GateVerify) && len(c.VerifyCommands) > 0) && !(c.HasGate(GateReview) && c.ReviewCommand != "") {
		errs = append(errs, p.errorFor("completion", "none of these gates checks anything: verify needs a verify_command, "+
			"review needs a review_command; add one of them, or the promise or plan gate, or the run would complete after its first attempt", nil))
	}
	switch {
	case c.Prompt == "" && c.PromptFile == "":
		k := "prompt"
		if _, set := p.entries["prompt_file"]; set {
			k = "prompt_file"
		}
		errs = append(errs, p.errorFor(k, "no goal: set prompt or prompt_file, or add PROMPT.md to the workspace", nil))
	case c.Prompt != "" && c.PromptFile != "":
		errs = append(errs, p.errorFor("prompt_file", "set only one of prompt and prompt_file", nil))
	}
	return errs
}

// fileProblem checks the file at an absolute path against rule and returns
// what is wrong with it, with the cause, or "".
func fileProblem(path string, rule fileRule) (string, error) {
	info, err := os.Stat(path)
	switch {
	case rule == notADir:
		if err == nil && info.IsDir() {
			return fmt.Sprintf("%s is a directory, not a file", path), nil
		}
		return "", nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s does not exist", path), err
	case err != nil:
		return fmt.Sprintf("cannot read %s: %s", path, reason(err)), err
	case info.IsDir():
		return fmt.Sprintf("%s is a directory, not a file", path), nil
	case !info.Mode().IsRegular():
		// Opening a FIFO would block: do not.
		return fmt.Sprintf("%s is not a regular file", path), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("cannot read %s: %s", path, reason(err)), err
	}
	f.Close()
	return "", nil
}

// reason returns the cause of a file error without the path it repeats.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// isRegularFile reports whether path is a regular file (following symlinks).
func isRegularFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

// cannotRun is why the preset a cannot run model, "" when it can (or when
// a is not a preset).
func cannotRun(a *agent.Agent, model string) string {
	if a == nil || a.CannotRun == nil {
		return ""
	}
	return a.CannotRun(model)
}
