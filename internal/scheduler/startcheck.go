package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/loopd/loopd/internal/agent"
	"github.com/loopd/loopd/internal/config"
)

// stepPath is the PATH an agent step will be started with: the daemon's,
// or the one the env file sets (later entries win, as for the step's
// process). env is the daemon's environment plus the env file's
// variables.
func stepPath(env []string) string {
	return lookupEnv(env, "PATH")
}

// onPath reports whether bin is an executable file: bin itself when it
// names a path, else in a directory of path. Relative directories of path
// are taken in dir, the step's working directory, as its shell would.
func onPath(bin, path, dir string) bool {
	if strings.Contains(bin, "/") {
		return executable(bin)
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if executable(filepath.Join(d, bin)) {
			return true
		}
	}
	return false
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// checkAgentAtStart refuses, before anything is created, a run whose agent
// preset's program is not on the PATH its steps will have (not a run that
// aborts fatal:agent_not_found a moment later). What cannot be known yet
// is let through, and each agent step checks again: an env file that does
// not exist or cannot be read now may be there by the first step.
func checkAgentAtStart(cfg config.Config, ws string) error {
	bin := cfg.AgentBinary()
	if bin == "" {
		return nil
	}
	env, from := os.Environ(), "the daemon's PATH"
	if cfg.EnvFile != "" {
		vars, err := config.LoadEnvFile(cfg.EnvFile)
		if err != nil {
			return nil
		}
		if lookupEnv(vars, "PATH") != "" {
			from = "the PATH set by the env file " + cfg.EnvFile
		}
		env = append(env, vars...)
	}
	path := stepPath(env)
	if onPath(bin, path, ws) {
		return nil
	}
	problems := []string{fmt.Sprintf("%q is not on %s (%s)", bin, from, path)}
	if hint := agent.InstallHint(bin); hint != "" {
		problems = append(problems, hint)
	}
	problems = append(problems,
		"a daemon started by loopctl has the PATH of the shell that started it: after installing, restart it with loopctl daemon stop (running steps are not affected)",
		"or set agent=command with your own agent_command")
	return &InputError{Msg: fmt.Sprintf("agent=%s needs the program %q, which is not installed where loopd looks; nothing was created", cfg.Agent, bin),
		Problems: problems}
}
