package scheduler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/trust"
	loopdir "github.com/loopd/loopd/internal/workspace"
)

// UntrustedError refuses a new run whose workspace files name commands or
// environment the user has not trusted, or changed since: nothing was
// created.
type UntrustedError struct {
	Workspace string
	Verdicts  []trust.Verdict // the untrusted ones, in trust.Inspect's order
}

func (e *UntrustedError) Error() string {
	return e.Message() + ":\n  " + strings.Join(e.Problems(), "\n  ")
}

// Message is the refusal's first line.
func (e *UntrustedError) Message() string {
	return fmt.Sprintf("workspace %s has files that name commands or environment you have not trusted; nothing was created", e.Workspace)
}

// Problems is one line per file: its path and what changed.
func (e *UntrustedError) Problems() []string {
	out := make([]string, len(e.Verdicts))
	for i, v := range e.Verdicts {
		out[i] = v.Problem()
	}
	return out
}

// records reads a workspace's trust records, keyed by path.
func (s *Scheduler) records(ctx context.Context, ws string) (map[string]trust.Record, error) {
	rows, err := s.store.TrustedFiles(ctx, ws)
	if err != nil {
		return nil, err
	}
	out := make(map[string]trust.Record, len(rows))
	for _, r := range rows {
		var was trust.File
		_ = json.Unmarshal([]byte(r.Summary), &was) // a summary is only used to say what changed
		out[r.Path] = trust.Record{SHA256: r.SHA256, TrustedAt: time.UnixMilli(r.TrustedAt), Was: was}
	}
	return out, nil
}

// checkTrust is CreateRun's trust check, on a valid config: it returns the
// env file the workspace picked, which the run must find trusted at every
// step it sets something ("" when none), or an *UntrustedError. An env
// file that sets nothing now needs no trust to start, but is guarded all
// the same: whatever writes into it later (the agent) is not loaded
// untrusted.
//
// With st (a staged snapshot), the files are named and looked up as the
// clone's: its path is what trust records are keyed by.
func (s *Scheduler) checkTrust(ctx context.Context, in trust.Inputs, st *staged) (string, error) {
	files, env, err := trust.InspectRun(in)
	if err != nil {
		return "", &InputError{Msg: "cannot read the workspace's files; nothing was created", Problems: []string{err.Error()}}
	}
	if len(files) == 0 {
		return env, nil
	}
	st.nameFiles(files)
	ws := st.named(in.Workspace)
	recs, err := s.records(ctx, ws)
	if err != nil {
		return "", err
	}
	if bad := trust.Untrusted(trust.Check(files, recs)); len(bad) > 0 {
		return "", &UntrustedError{Workspace: ws, Verdicts: bad}
	}
	return env, nil
}

// TrustResult is what Trust found and recorded.
type TrustResult struct {
	Workspace string
	// Verdicts are the files now trusted, with their state before (new,
	// changed with what changed, or trusted already).
	Verdicts  []trust.Verdict
	TrustedAt time.Time
	// Recorded is false for ShowTrust: nothing was trusted.
	Recorded bool
	// Agents are the agent command lines a run in the workspace would
	// run, the workspace's own agent first, then each other preset's.
	Agents []AgentLine
}

// AgentLine is the command line loopd runs for an agent in a workspace.
type AgentLine struct {
	Agent   string
	Command string
	// Default says it is the workspace's agent (start with no --set agent).
	Default bool
}

// Trust validates a workspace's files as a new run there would (config,
// stop file, env file: errors come first and nothing is trusted), then
// records the content hashes of those that need trust, replacing what was
// trusted in the workspace before.
func (s *Scheduler) Trust(ctx context.Context, workspace string) (TrustResult, error) {
	return s.trust(ctx, workspace, true, "")
}

// TrustSnapshot is Trust (record) or ShowTrust of a clone this node
// cannot see, judged on its files as committed (loopctl trust through
// LOOPD_URL): they are staged, judged as a workspace's, and recorded
// under the clone's path, which is all that is kept of them.
func (s *Scheduler) TrustSnapshot(ctx context.Context, workspace string, snap *api.Snapshot, record bool) (TrustResult, error) {
	st, err := s.stage(workspace, snap)
	if err != nil {
		return TrustResult{}, err
	}
	defer st.remove()
	res, err := s.trustIn(ctx, st.dir, record, "", st)
	return res, st.namedErr(err)
}

// TrustTasks is Trust (record) or ShowTrust with a backlog's task list
// given on the command line (loopctl trust --tasks FILE) judged too.
func (s *Scheduler) TrustTasks(ctx context.Context, workspace, tasksFile string, record bool) (TrustResult, error) {
	return s.trust(ctx, workspace, record, tasksFile)
}

// ShowTrust is Trust that records nothing (loopctl trust --show), with
// the agents' command lines.
func (s *Scheduler) ShowTrust(ctx context.Context, workspace string) (TrustResult, error) {
	return s.trust(ctx, workspace, false, "")
}

func (s *Scheduler) trust(ctx context.Context, workspace string, record bool, tasksFile string) (TrustResult, error) {
	return s.trustIn(ctx, workspace, record, tasksFile, nil)
}

func (s *Scheduler) trustIn(ctx context.Context, workspace string, record bool, tasksFile string, st *staged) (TrustResult, error) {
	ws, err := resolveWorkspace(workspace)
	if err != nil {
		return TrustResult{}, err
	}
	// Another user's .loop in the workspace is never read, so never
	// trusted either.
	if _, err := loopdir.LoopDir(ws); err != nil {
		return TrustResult{}, &InputError{Msg: "refusing the workspace; nothing was trusted", Problems: []string{err.Error()}}
	}
	userConfig := ""
	if st != nil {
		userConfig = st.userConfig
	}
	cfg, err := loadForTrust(ws, userConfig)
	if err != nil {
		return TrustResult{}, &InputError{Msg: "invalid configuration; nothing was trusted", Problems: problems(err)}
	}
	file, err := loadStopFile(cfg)
	if err != nil {
		return TrustResult{}, err
	}
	if err := file.Validate(ws); err != nil {
		return TrustResult{}, &InputError{Msg: "invalid stop conditions in " + cfg.StopFile + "; nothing was trusted", Problems: problems(err)}
	}
	files, err := trust.Inspect(trust.Inputs{Workspace: ws, Config: cfg, TasksFile: tasksFile, UserConfig: userConfig, NoParents: st != nil})
	if err != nil {
		return TrustResult{}, &InputError{Msg: "cannot read the workspace's files; nothing was trusted", Problems: []string{err.Error()}}
	}
	st.nameFiles(files)
	ws = st.named(ws)
	recs, err := s.records(ctx, ws)
	if err != nil {
		return TrustResult{}, err
	}
	res := TrustResult{Workspace: ws, Verdicts: trust.Check(files, recs), Recorded: record}
	if !record {
		res.Agents = agentLines(cfg)
		for i := range res.Agents {
			res.Agents[i].Command = st.named(res.Agents[i].Command)
		}
		return res, nil
	}
	rows := make([]storage.TrustedFile, len(files))
	for i, f := range files {
		was := f
		was.Path = ""
		was.EnvShown = nil // env values are never stored
		b, err := json.Marshal(was)
		if err != nil {
			return TrustResult{}, fmt.Errorf("encode trust summary: %w", err)
		}
		rows[i] = storage.TrustedFile{Path: f.Path, Kind: string(f.Kind), SHA256: f.SHA256, Summary: string(b)}
	}
	err = s.store.Write(ctx, func(tx *storage.Tx) error {
		res.TrustedAt = time.UnixMilli(tx.Now())
		return tx.TrustFiles(ws, rows)
	})
	if err != nil {
		return TrustResult{}, err
	}
	s.log.Info("workspace trusted", zap.String("workspace", ws), zap.Int("files", len(files)))
	return res, nil
}

// loadForTrust resolves a workspace's config as `loopctl start` would
// there with no --set, judging the files on their own: what start can
// supply is not their error. A workspace whose own goal is missing or
// refused (a PROMPT.md leading outside it) is loaded as if the goal came
// from the command line (start "GOAL"), and one whose agent needs an
// agent_command or a model given at start (agent=command, agent=codex
// without a model) as if they were given: none of this changes the files
// that need trust. Other errors are reported as start reports them.
//
// userConfig is the user config file ("": the daemon's user's).
func loadForTrust(ws, userConfig string) (config.Config, error) {
	cfg, err := config.Load(config.LoadOptions{Workspace: ws, UserConfig: userConfig})
	if err == nil {
		return cfg, nil
	}
	goal := "prompt=loopctl trust"
	for _, sets := range [][]string{{goal}, {goal, "agent_command=" + atStart}, {goal, "model=" + atStart},
		{goal, "agent_command=" + atStart, "model=" + atStart}} {
		if cfg, err2 := config.Load(config.LoadOptions{Workspace: ws, Sets: sets, UserConfig: userConfig}); err2 == nil {
			return cfg, nil
		}
	}
	return cfg, err
}

// atStart stands for a value `loopctl start` supplies (--set).
const atStart = "GIVEN-AT-START"

// agentLines are the command lines of the workspace's agent and of each
// preset, as a run there would run them.
func agentLines(cfg config.Config) []AgentLine {
	own := cfg.AgentCommandLine()
	if cfg.AgentCommand == atStart {
		own = "(the agent_command given at start: --set agent_command=…)"
	}
	out := []AgentLine{{Agent: string(cfg.Agent), Command: own, Default: true}}
	for _, a := range []config.Agent{config.AgentClaude, config.AgentCodex, config.AgentGemini} {
		if a == cfg.Agent && cfg.AgentCommand == "" {
			continue
		}
		c := cfg
		c.Agent, c.AgentCommand = a, ""
		out = append(out, AgentLine{Agent: string(a), Command: c.AgentCommandLine()})
	}
	return out
}

// Revoke forgets every trusted file of a workspace and returns their
// paths (none when nothing was trusted).
//
// A clean absolute path this node cannot see is taken as it is: a clone
// trusted through LOOPD_URL is on the sender's machine, and forgetting
// its records reads nothing.
func (s *Scheduler) Revoke(ctx context.Context, workspace string) (string, []string, error) {
	ws, err := resolveWorkspace(workspace)
	if err != nil {
		if !filepath.IsAbs(workspace) || filepath.Clean(workspace) != workspace {
			return "", nil, err
		}
		if _, serr := os.Lstat(workspace); !errors.Is(serr, fs.ErrNotExist) {
			return "", nil, err
		}
		ws = workspace
	}
	var paths []string
	err = s.store.Write(ctx, func(tx *storage.Tx) error {
		var err error
		paths, err = tx.RevokeTrust(ws)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	s.log.Info("workspace trust revoked", zap.String("workspace", ws), zap.Int("files", len(paths)))
	return ws, paths, nil
}

// untrustedEnvError is an env file that changed (or was revoked) since the
// run was created: it is not loaded, and the run stops.
type untrustedEnvError struct {
	path      string
	trustedAt time.Time // zero: no longer trusted at all
}

func (e *untrustedEnvError) Error() string {
	if e.trustedAt.IsZero() {
		return fmt.Sprintf("env file %s sets variables but is not trusted (it set nothing when the run was created, or its trust was revoked); it was not loaded", e.path)
	}
	return fmt.Sprintf("env file %s changed since it was trusted at %s; it was not loaded", e.path, e.trustedAt.UTC().Format(time.RFC3339))
}

// loadEnvFile reads the run's env file for a step. When the workspace
// picked it, its bytes must still be the trusted ones whenever they set
// anything: they are read once, hashed and checked, so what is checked is
// what is loaded. A file that sets nothing loads nothing and needs no
// trust (an empty .env at the run's start); once something writes a
// variable into it, it is refused until trusted. An env file the user
// named since (resume --set env_file=…) is the user's choice.
//
// A fleet run's env file inside its workspace is read from the run's
// worktree, as committed at its base commit: the workspace is the
// sender's clone, on another machine. It is named, and its trust looked
// up, as the workspace's, like the agents' files.
func (r *runner) loadEnvFile() ([]string, error) {
	read := r.cfg.EnvFile
	if r.fromGit() {
		dir := cmp.Or(r.workdir, r.run.Worktree) // a land's verification: its worktree
		if rel, err := filepath.Rel(r.run.Workspace, read); err == nil && filepath.IsLocal(rel) {
			read = filepath.Join(dir, rel)
		}
	}
	if r.envTrust == "" || r.envTrust != r.cfg.EnvFile {
		return config.LoadEnvFile(read)
	}
	data, err := trust.ReadFile(read)
	if err != nil {
		return nil, err
	}
	if vars, err := config.ParseEnvFile(r.envTrust, data); err == nil && len(vars) == 0 {
		return nil, nil // sets nothing: nothing to trust
	}
	rec, err := r.s.store.TrustedFile(r.runContext(), r.run.Workspace, r.envTrust)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil, &untrustedEnvError{path: r.envTrust}
	case err != nil:
		return nil, err
	case rec.SHA256 != trust.Sum(data):
		return nil, &untrustedEnvError{path: r.envTrust, trustedAt: time.UnixMilli(rec.TrustedAt)}
	}
	return config.ParseEnvFile(r.envTrust, data)
}

// envFileDecision ends the run when a step's env file cannot be loaded.
func (r *runner) envFileDecision(err error) *decision {
	var ue *untrustedEnvError
	if errors.As(err, &ue) {
		return &decision{status: api.RunAborted, reason: "fatal:untrusted_env_file", event: events.RunAborted,
			description: ue.Error() + "; review it, run `loopctl trust -C " + r.run.Workspace + "`, then `loopctl resume " + r.id + "`"}
	}
	return &decision{status: api.RunAborted, reason: "fatal:env_file", event: events.RunAborted,
		description: err.Error() + "; fix the file, then `loopctl resume` the run"}
}

// checkAgentFiles is checked before every agent step: the agents' own
// project files (.claude/settings.json, .mcp.json, .gemini/…) in the
// step's directory must still be the trusted ones. The CLI reads them
// afresh at every start, so what was checked when the run was created is
// not enough: a resumed run after a `git pull`, or files the agent wrote
// in an earlier step, would otherwise run hooks nobody trusted. Read
// from the step's directory (a worktree run's own), named and compared as
// the workspace's.
func (r *runner) checkAgentFiles() *decision {
	// Read again only when something they are read from changed (see
	// trust.AgentCache); the records are checked every time.
	files, err := r.agentFiles.InspectAgentsIn(r.run.Workspace, r.workdir, r.cfg.EnvFile)
	if err == nil && len(files) > 0 {
		var recs map[string]trust.Record
		if recs, err = r.s.records(r.runContext(), r.run.Workspace); err == nil {
			bad := trust.Untrusted(trust.Check(files, recs))
			if len(bad) == 0 {
				return nil
			}
			probs := make([]string, len(bad))
			for i, v := range bad {
				probs[i] = v.Problem()
			}
			return &decision{status: api.RunAborted, reason: "fatal:untrusted_agent_files", event: events.RunAborted,
				description: "the agent's own project files are not trusted (" + strings.Join(probs, "; ") +
					"); the agent was not started; review them, run `loopctl trust -C " + r.run.Workspace + "`, then `loopctl resume " + r.id + "`"}
		}
	}
	if err != nil {
		return &decision{status: api.RunAborted, reason: "fatal:untrusted_agent_files", event: events.RunAborted,
			description: "cannot read the agent's own project files: " + err.Error() + "; the agent was not started"}
	}
	return nil
}
