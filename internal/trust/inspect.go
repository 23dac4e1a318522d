package trust

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/loopd/loopd/internal/config"
)

// maxFileBytes bounds a file read to be described and hashed.
const maxFileBytes = 4 << 20

// Inputs are what Inspect needs to know which files a run would use.
type Inputs struct {
	// Workspace is the canonical workspace directory.
	Workspace string
	// Config is the resolved, valid configuration (config.Load with Sets).
	Config config.Config
	// Sets are the --set arguments (flags included) the config was
	// resolved with; none for loopctl trust.
	Sets []string
	// UserConfig is the user config file; "" means config.UserConfigPath.
	UserConfig string
	// ConfigGiven says ConfigData is .loop/config's content as the caller
	// read it (nil: no such file), and StopData, when not nil, is the stop
	// file's: what Config was built from is what is described and hashed,
	// with no second read a process could slip another content into.
	ConfigGiven bool
	ConfigData  []byte
	StopData    []byte
	// AgentCommit, when set, is the commit a worktree run starts from: the
	// agents' own files are read as committed there, which is what the
	// agent finds in the new worktree, not from the checkout.
	AgentCommit string
	// Context bounds the git commands that read AgentCommit.
	Context context.Context
	// TasksFile is a backlog's task list (loopctl start --tasks; else the
	// config's tasks_file) and TasksData, when not nil, its content as the
	// caller read it. A list inside the workspace that names commands
	// needs trust, whoever named it: its content is the repository's.
	TasksFile string
	TasksData []byte
	// NoParents leaves out the agents' files of the workspace's parent
	// directories: a fleet run's workspace is staged from a snapshot on
	// the API node, whose parents are nobody's run (the worker checks its
	// worktree's before every step).
	NoParents bool
}

// Inspect reads the workspace's files that need trust and describes them,
// in a fixed order: .loop/config, the stop file, the env file, then the
// agents' own project files (AgentPaths), whichever agent runs: a custom
// agent_command may run any of the CLIs, and a run can be resumed with
// another agent. A file
// that sets nothing (a config of comments, a stop file without
// custom_script, an empty env file) needs no trust and is left out.
func Inspect(in Inputs) ([]File, error) {
	files, _, err := InspectRun(in)
	return files, err
}

// InspectRun is [Inspect] for a new run. It also returns the env file the
// workspace picked ("" when none), whether or not it sets anything now:
// the run reads it again before every step, and a file that set nothing
// when the run was created (an empty .env the agent writes into later)
// must be trusted before it is loaded, like one that changed.
func InspectRun(in Inputs) ([]File, string, error) {
	var files []File
	var ch Chooser
	cfgPath := filepath.Join(in.Workspace, config.WorkspaceConfig)
	data, err := in.ConfigData, error(nil)
	switch {
	case !in.ConfigGiven:
		data, err = ReadFile(cfgPath)
	case data == nil:
		err = fs.ErrNotExist
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, "", err
	default:
		f, err := DescribeConfig(cfgPath, data)
		if err != nil {
			return nil, "", err
		}
		if !f.Empty() {
			files = append(files, f)
		}
		ch.Workspace, _ = config.Parse(bytes.NewReader(data), cfgPath)
	}
	user := in.UserConfig
	if user == "" {
		user, _ = config.UserConfigPath()
	}
	if user != "" {
		ch.User, _ = config.ParseFile(user) // validated by config.Load already
	}
	ch.Sets, _ = config.ParseSets(in.Sets)

	if needsTrust(ch.Origin("stop_file", in.Config.StopFile != ""), in.Workspace, in.Config.StopFile) {
		var f File
		var err error
		if in.StopData != nil {
			f, err = DescribeStop(in.Config.StopFile, in.StopData)
		} else {
			f, err = describeFile(in.Config.StopFile, DescribeStop)
		}
		if err != nil {
			return nil, "", err
		}
		if len(f.Commands) > 0 {
			files = append(files, f)
		}
	}
	// A task list inside the workspace is the repository's, whoever named
	// it; one the workspace's config picked is, wherever it is.
	if tasks := cmp.Or(in.TasksFile, in.Config.TasksFile); tasks != "" &&
		(inWorkspace(in.Workspace, tasks) || needsTrust(ch.Origin("tasks_file", in.Config.TasksFile != ""), in.Workspace, tasks)) {
		var f File
		var err error
		if in.TasksData != nil {
			f, err = DescribeTasks(tasks, in.TasksData)
		} else {
			f, err = describeFile(tasks, DescribeTasks)
		}
		if err != nil {
			return nil, "", err
		}
		if len(f.Commands) > 0 {
			files = append(files, f)
		}
	}
	var env string
	if needsTrust(ch.Origin("env_file", in.Config.EnvFile != ""), in.Workspace, in.Config.EnvFile) {
		env = in.Config.EnvFile
		f, err := describeFile(in.Config.EnvFile, DescribeEnv)
		if err != nil {
			return nil, "", err
		}
		if !f.Empty() {
			files = append(files, f)
		}
	}
	var src agentSource = dirSource(in.Workspace)
	envFile := in.Config.EnvFile
	if in.AgentCommit != "" {
		// The worktree's committed .env is what Gemini CLI would read
		// there; the run's env file is the checkout's.
		envFile = ""
		ctx := in.Context
		if ctx == nil {
			ctx = context.Background()
		}
		src = gitSource{ctx: ctx, dir: in.Workspace, commit: in.AgentCommit}
	}
	agents, err := inspectAgents(in.Workspace, src, in.AgentCommit, envFile)
	if err != nil {
		return nil, "", err
	}
	// The parents as they are on disk: a worktree run's agent finds the
	// repository's part of them as committed, which the check before
	// every step compares (InspectAgentsIn).
	if in.NoParents {
		return append(files, agents...), env, nil
	}
	parents, err := inspectParents(in.Workspace, func(d string) string { return d })
	if err != nil {
		return nil, "", err
	}
	return append(append(files, agents...), parents...), env, nil
}

// needsTrust decides for a file of origin o at path: the workspace's
// choice always needs trust; the user config's only when it is a file of
// the workspace (its content is the repository's, whoever named it).
func needsTrust(o Origin, ws, path string) bool {
	switch o {
	case OriginWorkspace:
		return true
	case OriginUserConfig:
		rel, err := filepath.Rel(ws, path)
		return err == nil && filepath.IsLocal(rel)
	}
	return false
}

// inWorkspace reports whether path is inside the workspace ws.
func inWorkspace(ws, path string) bool {
	rel, err := filepath.Rel(ws, path)
	return err == nil && filepath.IsLocal(rel)
}

// EnvFile returns the path of the env file among files ("" when none): a
// run loads it at every step, so it must still be trusted then.
func EnvFile(files []File) string {
	for _, f := range files {
		if f.Kind == KindEnv {
			return f.Path
		}
	}
	return ""
}

func describeFile(path string, describe func(string, []byte) (File, error)) (File, error) {
	data, err := ReadFile(path)
	if err != nil {
		return File{}, err
	}
	return describe(path, data)
}

// ReadFile reads a whole regular file of at most 4 MiB: the bytes that
// are described, hashed and, for an env file, loaded.
//
// It opens with O_NONBLOCK and checks the open file (fstat) before
// reading: a plain open of a FIFO blocks until a writer comes, so a
// repository (or an agent) that puts a FIFO where a settings file belongs
// would hang `loopctl trust` and the daemon's runner. A stat before the
// open would leave a window to swap the file.
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxFileBytes)
	}
	return data, nil
}

// InspectAgentsIn describes the agents' own project files found in dir,
// named as the workspace ws's (dir is ws, or the matching directory of a
// run's worktree); envFile, the run's env file, is left out.
//
// The files the CLIs read from dir's parent directories are included: a
// parent of a run's worktree inside the worktree is named as the
// workspace's matching parent (the worktree's root as the repository's).
func InspectAgentsIn(ws, dir, envFile string) ([]File, error) {
	if dir != ws {
		envFile = "" // the worktree's .env is not the run's env file
	}
	files, err := inspectAgents(ws, dirSource(dir), "", envFile)
	if err != nil {
		return nil, err
	}
	parents, err := inspectParents(dir, worktreeNames(ws, dir))
	if err != nil {
		return nil, err
	}
	return append(files, parents...), nil
}

// worktreeNames maps a parent directory of dir to the directory of ws it
// stands for. dir is ws, or ws's matching directory in a run's worktree
// (LOOPD_HOME/worktrees/<run>/app for /src/repo/app): the levels dir and
// ws share by name (app), then the worktree's root (<run>, for repo),
// map to ws's; the worktree's own parents (LOOPD_HOME…) are themselves.
func worktreeNames(ws, dir string) func(string) string {
	if dir == ws {
		return func(d string) string { return d }
	}
	m := map[string]string{}
	d, w := dir, ws
	for filepath.Base(d) == filepath.Base(w) && d != filepath.Dir(d) && w != filepath.Dir(w) {
		d, w = filepath.Dir(d), filepath.Dir(w)
		m[d] = w
	}
	return func(p string) string {
		if n, ok := m[p]; ok {
			return n
		}
		return p
	}
}
