package scheduler

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/trust"
	"github.com/loopd/loopd/internal/workspace"
)

// InputError is bad user input (config, conditions, paths): nothing was
// changed. Problems lists each one, located (file:line: key, JSON path).
type InputError struct {
	Msg      string
	Problems []string
}

func (e *InputError) Error() string {
	if len(e.Problems) == 0 {
		return e.Msg
	}
	return e.Msg + ":\n  " + strings.Join(e.Problems, "\n  ")
}

// StateError is a request the run's status does not allow.
type StateError struct{ Msg string }

func (e *StateError) Error() string { return e.Msg }

func problems(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		out = append(out, err.Error())
	}
	walk(err)
	return out
}

// CreateRun validates a request completely — workspace, every config
// layer, the stop conditions, the workspace's isolation — and creates a
// PENDING run with its config frozen. On any problem it returns an
// *InputError (or a *StateError when an in-place run is already active in
// the workspace) and creates nothing. The warnings say what the user
// should know about the run (no verification, no cost cap, a dirty
// checkout); they are in the RUN_CREATED payload too.
func (s *Scheduler) CreateRun(ctx context.Context, req api.CreateRunRequest) (storage.Run, []string, error) {
	run, warnings, err := s.createRun(ctx, req)
	return run, warnings, err
}

func (s *Scheduler) createRun(ctx context.Context, req api.CreateRunRequest) (storage.Run, []string, error) {
	if req.Snapshot == nil {
		return s.createIn(ctx, req, nil)
	}
	// Through LOOPD_URL: the clone is on the sender's machine, its files
	// in the request (see snapshot.go).
	if req.RepoURL == "" || req.BaseCommit != req.Snapshot.Commit {
		return storage.Run{}, nil, &InputError{Msg: "invalid fleet run source; nothing was created",
			Problems: []string{fmt.Sprintf("a snapshot needs repo_url, and base_commit %q must be the snapshot's commit %q", req.BaseCommit, req.Snapshot.Commit)}}
	}
	st, err := s.stage(req.Workspace, req.Snapshot)
	if err != nil {
		return storage.Run{}, nil, err
	}
	defer st.remove()
	run, warnings, err := s.createIn(ctx, req, st)
	return run, warnings, st.namedErr(err)
}

// createIn is createRun in the workspace req names, or, when st is not
// nil, in the staged snapshot of a clone this node cannot see. Each step
// refuses with an *InputError (or a *StateError) before anything is
// written; insertRun writes the run at the end, in one transaction.
func (s *Scheduler) createIn(ctx context.Context, req api.CreateRunRequest, st *staged) (storage.Run, []string, error) {
	ws, err := s.newRunWorkspace(ctx, req.Workspace, st)
	if err != nil {
		return storage.Run{}, nil, err
	}
	in, err := loadStartConfig(ws, req, st)
	if err != nil {
		return storage.Run{}, nil, err
	}
	cfg := &in.Config
	if st != nil && (cfg.TasksFile != "" || cfg.TasksCommand != "") {
		// Its tasks_command would run here, on the API node, and its
		// tasks land into a branch of the user's checkout.
		return storage.Run{}, nil, &InputError{Msg: "a backlog run (a task list) cannot be started through LOOPD_URL yet; nothing was created",
			Problems: []string{"start it on your own daemon (unset LOOPD_URL), or start its tasks one by one"}}
	}
	// A backlog run (a task list) is read here, once: the tasks stored
	// are the bytes the trust check below hashes.
	bl, err := s.prepareBacklog(ctx, ws, cfg)
	if err != nil {
		return storage.Run{}, nil, err
	}
	goal, err := startGoal(*cfg, bl)
	if err != nil {
		return storage.Run{}, nil, err
	}
	file, full, stopData, err := startConditions(ws, *cfg)
	if err != nil {
		return storage.Run{}, nil, err
	}
	run, err := newPendingRun(req.Name, ws, goal, cfg, file, st)
	if err != nil {
		return storage.Run{}, nil, err
	}
	commonDir, warnings, err := s.placeRun(ctx, &run, *cfg, req, st)
	if err != nil {
		return storage.Run{}, nil, err
	}
	// After placeRun: a worktree run's agent reads the agents' own files
	// (.claude/settings.json…) as committed in its base commit, so those
	// are the ones checked.
	in.Context, in.StopData = ctx, stopData
	switch {
	case st != nil:
		// The staged files are the commit's already; the parents of the
		// staging directory are nobody's run.
		in.UserConfig, in.NoParents = st.userConfig, true
	case run.Isolation == string(config.IsolationWorktree):
		in.AgentCommit = run.BaseCommit
	}
	if bl != nil {
		in.TasksFile, in.TasksData = cfg.TasksFile, bl.data
	}
	envTrust, err := s.checkTrust(ctx, in, st)
	if err != nil {
		return storage.Run{}, nil, err
	}
	envTrust = st.named(envTrust)
	if bl != nil {
		// tasks_command runs only now: a command from the workspace's
		// config runs once the user has trusted it.
		if err := bl.read(ctx, ws, *cfg); err != nil {
			return storage.Run{}, nil, err
		}
		run.Kind = storage.KindBacklog
	}
	// After the trust check: the PATH an untrusted env file sets says
	// nothing until the user has reviewed it.
	if err := checkAgentAtStart(*cfg, ws); err != nil {
		return storage.Run{}, nil, err
	}
	warnings = append(warnings, startWarnings(*cfg, full)...)
	for i, w := range warnings {
		warnings[i] = st.named(w)
	}
	// The event has every warning; the response gets the unpriced budget
	// from Describe, which says it as long as it holds.
	recorded := warnings
	if w := unpricedBudget(*cfg, full); w != "" {
		recorded = append(recorded[:len(recorded):len(recorded)], w)
	}
	if err := s.insertRun(ctx, run, recorded, commonDir, bl, envTrust, st); err != nil {
		return storage.Run{}, nil, err
	}
	s.log.Info("run created", zap.String("run", run.ID), zap.String("workspace", run.Workspace), zap.String("isolation", run.Isolation))
	s.Wake()
	created, err := s.store.Run(ctx, run.ID)
	return created, warnings, err
}

// loadStartConfig loads a start's config from every layer, the request's
// flags last, and returns it as the trust check's inputs (the bytes of
// .loop/config it was built from, the sets). A staged snapshot's files
// are named inside it, with the sender's user config. A backlog's goal is
// optional (each task brings its own): a config whose only problem is the
// missing goal loads with the backlog's default one, when it is a
// backlog.
func loadStartConfig(ws string, req api.CreateRunRequest, st *staged) (trust.Inputs, error) {
	// Flags are the last layer, after --set: the goal given on the command
	// line wins over prompt/prompt_file from any file.
	sets := append([]string(nil), req.Set...)
	for _, kv := range [][2]string{{"prompt_file", req.PromptFile}, {"spec_file", req.SpecFile},
		{"plan_file", req.PlanFile}, {"stop_file", req.StopFile}, {"tasks_file", req.TasksFile}} {
		if kv[1] != "" {
			if st != nil {
				var err error
				if kv[1], err = st.inside(kv[0], kv[1]); err != nil {
					return trust.Inputs{}, err
				}
			}
			sets = append(sets, kv[0]+"="+config.QuoteValue(kv[1]))
		}
	}
	if strings.TrimSpace(req.Goal) != "" {
		sets = append(sets, "prompt="+config.QuoteValue(req.Goal))
	}
	// .loop/config is read once: the run is built from the very bytes
	// the trust check hashes. (An unreadable one is left to Load, which
	// reports it as a config error.)
	opts := config.LoadOptions{Workspace: ws, Sets: sets}
	if st != nil {
		opts.UserConfig = st.userConfig
		// The other layers were confined when they were staged.
		// A set that does not parse is Load's to report.
		entries, _ := config.ParseSets(sets)
		if err := st.confine(entries, func(e config.Entry) string { return fmt.Sprintf("--set #%d", e.Line) }); err != nil {
			return trust.Inputs{}, err
		}
	}
	switch data, err := trust.ReadFile(filepath.Join(ws, config.WorkspaceConfig)); {
	case err == nil:
		opts.WorkspaceConfigGiven, opts.WorkspaceConfigData = true, data
	case errors.Is(err, fs.ErrNotExist):
		opts.WorkspaceConfigGiven = true
	}
	cfg, err := config.Load(opts)
	if err != nil && strings.TrimSpace(req.Goal) == "" {
		retry := opts
		retry.Sets = append(slices.Clip(opts.Sets), "prompt="+config.QuoteValue(backlogGoal))
		if c2, err2 := config.Load(retry); err2 == nil && (c2.TasksFile != "" || c2.TasksCommand != "") {
			cfg, err = c2, nil
		}
	}
	if err != nil {
		return trust.Inputs{}, &InputError{Msg: "invalid configuration; nothing was created", Problems: problems(err)}
	}
	return trust.Inputs{Workspace: ws, Config: cfg, Sets: sets,
		ConfigGiven: opts.WorkspaceConfigGiven, ConfigData: opts.WorkspaceConfigData}, nil
}

// startGoal is a new run's goal: the prompt, else prompt_file's content,
// else a backlog's default goal; none is an *InputError.
func startGoal(cfg config.Config, bl *newBacklog) (string, error) {
	goal := cfg.Prompt
	if goal == "" && cfg.PromptFile != "" {
		var err error
		if goal, err = readPromptFile("", cfg.PromptFile); err != nil {
			return "", &InputError{Msg: "cannot read the goal; nothing was created", Problems: []string{err.Error()}}
		}
	}
	if goal == "" && bl != nil {
		goal = bl.defaultGoal()
	}
	if goal == "" {
		return "", &InputError{Msg: "no goal: pass one (loopctl start \"…\"), set prompt or prompt_file, or add PROMPT.md to the workspace"}
	}
	return goal, nil
}

// startConditions reads a start's stop file and validates it with the
// shorthands merged in: file is what is stored, full what is evaluated,
// data the bytes the trust check hashes.
func startConditions(ws string, cfg config.Config) (file, full stop.Set, data []byte, err error) {
	file, data, err = readStopFile(cfg)
	if err != nil {
		return stop.Set{}, stop.Set{}, nil, err
	}
	full = shorthandsOf(cfg).Set()
	full.Merge(file)
	if err := errors.Join(file.Validate(ws), full.ValidateModels(pricesOf(cfg))); err != nil {
		return stop.Set{}, stop.Set{}, nil, &InputError{Msg: "invalid stop conditions in " + cfg.StopFile + "; nothing was created", Problems: problems(err)}
	}
	return file, full, data, nil
}

// newPendingRun is the row of a new run, its config frozen (with a staged
// snapshot's paths named as the sender knows them). The goal is stored,
// shown and sent to the model: a secret pasted into it, or read from a
// file that holds one, is redacted like the steps' output (the frozen
// config holds a goal given as text too, so cfg.Prompt is redacted in
// place).
func newPendingRun(name, ws, goal string, cfg *config.Config, file stop.Set, st *staged) (storage.Run, error) {
	secrets := secretsOf(*cfg)
	goal, cfg.Prompt = secrets.String(goal), secrets.String(cfg.Prompt)
	cfgJSON, err := json.Marshal(*cfg)
	if err != nil {
		return storage.Run{}, fmt.Errorf("encode config: %w", err)
	}
	condJSON, err := json.Marshal(file)
	if err != nil {
		return storage.Run{}, fmt.Errorf("encode conditions: %w", err)
	}
	return storage.Run{ID: newID(), Name: name, Workspace: ws, Goal: goal, Config: string(st.namedJSON(cfgJSON)),
		Conditions: string(st.namedJSON(condJSON)), Status: api.RunPending}, nil
}

// placeRun decides where a new run works: its isolation in the workspace
// (commonDir is the repository whose worktree and branch it will create),
// or, for a staged snapshot, a worktree of the worker's mirror, nothing
// of which is on this node; then the fleet source req names. The warnings
// say what the user should know of the place (a dirty checkout).
func (s *Scheduler) placeRun(ctx context.Context, run *storage.Run, cfg config.Config, req api.CreateRunRequest, st *staged) (commonDir string, warnings []string, err error) {
	if st == nil {
		if commonDir, warnings, err = s.isolate(ctx, run, cfg); err != nil {
			return "", nil, err
		}
	} else {
		run.Workspace, run.Isolation = st.name, string(config.IsolationWorktree)
		run.Worktree, run.Branch, run.BaseBranch = s.WorktreePath(run.ID), "loop/"+shortOf(run.ID), req.BaseBranch
	}
	if err := fleetSource(run, req); err != nil {
		return "", nil, err
	}
	if cfg.VerifyBaseline && len(cfg.VerifyCommands) == 0 {
		warnings = append(warnings, "verify_baseline is ignored: there is no verify_command to run before iteration 1")
	}
	return commonDir, warnings, nil
}

// insertRun writes a new run in one transaction with its RUN_CREATED
// event (warnings in its payload, and a snapshot's manifest, which the
// worker checks the base commit against), the git objects a worktree run
// will create here, a backlog's tasks and the env trust it waits for.
func (s *Scheduler) insertRun(ctx context.Context, run storage.Run, warnings []string, commonDir string, bl *newBacklog, envTrust string, st *staged) error {
	ws := run.Workspace
	payload := map[string]any{"run_id": run.ID, "name": run.Name, "workspace": ws, "isolation": run.Isolation,
		"worktree": run.Worktree, "branch": run.Branch, "base_branch": run.BaseBranch, "base_commit": run.BaseCommit,
		"warnings": warnings}
	if run.RepoURL != "" {
		payload["repo_url"] = run.RepoURL
	}
	if run.CreatedBy != "" {
		payload["created_by"] = run.CreatedBy
	}
	if st != nil {
		payload["snapshot"] = snapshotManifest{Commit: st.commit, Files: st.manifest}
	}
	return s.store.Write(ctx, func(tx *storage.Tx) error {
		if run.Isolation == string(config.IsolationInPlace) {
			// Checked in the inserting transaction (one writer, BEGIN
			// IMMEDIATE): of two racing starts exactly one wins.
			active, err := tx.ActiveInPlaceRun(ws, "")
			if err == nil {
				return busyWorkspace(ws, active)
			}
			if !errors.Is(err, storage.ErrNotFound) {
				return err
			}
		}
		if err := tx.InsertRun(run, payload); err != nil {
			return err
		}
		if run.Isolation == string(config.IsolationWorktree) && commonDir != "" {
			// Recorded before git creates them (at the run's start): loopd
			// removes only what it recorded, and a crash in between leaves
			// a record of what may exist, never an object it forgot.
			for _, o := range []storage.GitObject{
				{RunID: run.ID, Kind: storage.GitWorktree, Repo: commonDir, Name: run.Worktree},
				{RunID: run.ID, Kind: storage.GitBranch, Repo: commonDir, Name: run.Branch},
			} {
				if err := tx.RecordGitObject(o); err != nil {
					return err
				}
			}
		}
		if bl != nil {
			if err := bl.insert(tx, run.ID); err != nil {
				return err
			}
		}
		if envTrust != "" {
			return tx.RequireEnvTrust(run.ID, envTrust)
		}
		return nil
	})
}

// newRunWorkspace resolves the workspace a new run is created in: the
// staged snapshot when st is not nil (the name is the sender's), else ws
// as loopctl resolves it (a client that sent a subdirectory gets the same
// workspace as one that resolved it first). A .loop that is not the
// user's is refused here, not passed over silently: it would make
// another user's directory the workspace.
func (s *Scheduler) newRunWorkspace(ctx context.Context, ws string, st *staged) (string, error) {
	if st != nil {
		return resolveWorkspace(st.dir)
	}
	ws, err := resolveWorkspace(ws)
	if err != nil {
		return "", err
	}
	resolved, err := workspace.ResolveChecked(ctx, ws)
	if err != nil {
		return "", &InputError{Msg: "refusing the workspace; nothing was created", Problems: []string{err.Error()}}
	}
	if ws, err = resolveWorkspace(resolved); err != nil {
		return "", err
	}
	return ws, s.refuseRunWorktree(ctx, ws)
}

func loadStopFile(cfg config.Config) (stop.Set, error) {
	set, _, err := readStopFile(cfg)
	return set, err
}

// readStopFile is loadStopFile that also returns the bytes it decoded, for
// the trust check to hash (nil when there is no stop file).
func readStopFile(cfg config.Config) (stop.Set, []byte, error) {
	if cfg.StopFile == "" {
		return stop.Set{}, nil, nil
	}
	b, err := trust.ReadFile(cfg.StopFile) // never blocks on a FIFO
	if err != nil {
		return stop.Set{}, nil, &InputError{Msg: "cannot read the stop file", Problems: []string{err.Error()}}
	}
	set, err := stop.DecodeSet(b)
	if err != nil {
		probs := problems(err)
		for i, p := range probs {
			probs[i] = cfg.StopFile + ": " + p
		}
		return stop.Set{}, nil, &InputError{Msg: "invalid stop file; nothing was created", Problems: probs}
	}
	return set, b, nil
}

// resolveWorkspace checks that a workspace is an existing directory and
// returns its canonical path (symlinks resolved, so `last` finds runs
// however the directory was named).
func resolveWorkspace(ws string) (string, error) {
	if ws == "" || !filepath.IsAbs(ws) {
		return "", &InputError{Msg: fmt.Sprintf("workspace %q must be an absolute path", ws)}
	}
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return "", &InputError{Msg: fmt.Sprintf("workspace %s does not exist", ws)}
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return "", &InputError{Msg: fmt.Sprintf("workspace %s is not a directory", ws)}
	}
	return real, nil
}

// refuseRunWorktree refuses a workspace inside a run's worktree
// (LOOPD_HOME/worktrees/<run-id>): loopd made it for that run and removes
// it with the run's clean, so a run started there (in place, changing the
// other run's branch) would lose its work with it.
func (s *Scheduler) refuseRunWorktree(ctx context.Context, ws string) error {
	root := CanonicalWorkspace(filepath.Join(s.opts.Home, "worktrees"))
	rel, err := filepath.Rel(root, ws)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil
	}
	id, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	msg := fmt.Sprintf("workspace %s is inside the worktree loopd made for run %s, which `loopctl clean` removes with everything in it; start the run from your own checkout", ws, id)
	if run, err := s.store.Run(ctx, id); err == nil {
		msg = fmt.Sprintf("workspace %s is the worktree loopd made for run %s (branch %s), which `loopctl clean` removes with everything in it; start the run from your checkout: loopctl start -C %s ...",
			ws, run.ID, run.Branch, run.Workspace)
	}
	return &InputError{Msg: msg}
}

// CanonicalWorkspace resolves a workspace path for lookups ("last");
// unresolvable paths are returned cleaned.
func CanonicalWorkspace(ws string) string {
	if real, err := filepath.EvalSymlinks(ws); err == nil {
		return real
	}
	return filepath.Clean(ws)
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Stop ends a run: at once when no step runs (PENDING, PAUSED, WAITING),
// else after the current step, or with the step killed when now.
func (s *Scheduler) Stop(ctx context.Context, runID string, now bool) error {
	kind := storage.StopGraceful
	if now {
		kind = storage.StopNow
	}
	var terminal bool
	err := s.store.Write(ctx, func(tx *storage.Tx) error {
		run, err := tx.Run(runID)
		if err != nil {
			return err
		}
		switch run.Status {
		case api.RunPending, api.RunPaused, api.RunWaiting:
			terminal = true
			desc := "stopped by the user while " + strings.ToLower(string(run.Status))
			return tx.TransitionRun(storage.Transition{RunID: runID, From: []api.RunStatus{run.Status}, To: api.RunInterrupted,
				Reason: "user_stop", Description: desc, Event: events.RunInterrupted, ClearRequests: true,
				Payload: events.TerminalPayload{RunID: runID, Reason: "user_stop", Description: desc}})
		case api.RunRunning:
			if run.StopRequest == storage.StopNow {
				kind = storage.StopNow // never downgrade a stop --now
			}
			return tx.SetStopRequest(runID, kind)
		}
		return &StateError{Msg: fmt.Sprintf("run %s has already ended (%s)", runID, run.Status)}
	})
	if err != nil {
		return err
	}
	if terminal {
		s.finished(runID)
		return nil
	}
	// On a fleet node that does not run the run there is no runner here:
	// the worker that runs it carries the stop out at its next lease
	// renewal (carryOutStops).
	if r := s.runner(runID); r != nil {
		r.carryOutStop(kind)
	}
	return nil
}

// Pause holds a run: at once when no step runs, else after the current step.
func (s *Scheduler) Pause(ctx context.Context, runID string) error {
	err := s.store.Write(ctx, func(tx *storage.Tx) error {
		run, err := tx.Run(runID)
		if err != nil {
			return err
		}
		switch run.Status {
		case api.RunPaused:
			return nil
		case api.RunPending, api.RunWaiting:
			return tx.TransitionRun(storage.Transition{RunID: runID, From: []api.RunStatus{run.Status}, To: api.RunPaused,
				Event: events.RunPaused, Payload: map[string]any{"run_id": runID}})
		case api.RunRunning:
			return tx.SetPauseRequest(runID, true)
		}
		return &StateError{Msg: fmt.Sprintf("run %s has ended (%s); nothing to pause", runID, run.Status)}
	})
	if err == nil {
		if r := s.runner(runID); r != nil {
			r.poke() // a runner waiting to retry after an error pauses now
		}
	}
	return err
}

// Resume continues a PAUSED, WAITING, FAILED, ABORTED or INTERRUPTED run
// with its history, counters and budgets intact. sets change the frozen
// config (to raise a limit) and are validated like a new run's. For a
// RUNNING run it cancels a pending pause. The run is read and changed in
// one transaction, so a runner pausing it at the same moment cannot make
// a resume report success and leave it PAUSED.
func (s *Scheduler) Resume(ctx context.Context, runID string, sets []string) error {
	if _, busy := s.ontoBusy.Load(runID); busy {
		return &StateError{Msg: fmt.Sprintf("run %s is being resumed with --onto-base; wait for it to finish", runID)}
	}
	if run, err := s.store.Run(ctx, runID); err == nil {
		if base := s.cutOntoBase(ctx, run); base != "" {
			// A resume --onto-base was cut after git merged: finish it,
			// as running it again would (the docs promise either works).
			s.log.Info("resume: finishing the merge of the base a cut resume --onto-base left in the worktree",
				zap.String("run", runID), zap.String("base", base))
			return s.resumeOntoBase(ctx, runID, sets, base)
		}
	}
	return s.resume(ctx, runID, sets, nil)
}

// resume is Resume; onto, when set, is the merge resume --onto-base made
// (an ended COMPLETED run may then continue too).
func (s *Scheduler) resume(ctx context.Context, runID string, sets []string, onto *ontoBase) error {
	err := s.store.Write(ctx, func(tx *storage.Tx) error {
		run, err := tx.Run(runID)
		if err != nil {
			return err
		}
		switch run.Status {
		case api.RunCompleted:
			if onto == nil {
				return &StateError{Msg: fmt.Sprintf("run %s is %s and cannot be resumed", runID, run.Status)}
			}
		case api.RunPaused, api.RunWaiting, api.RunFailed, api.RunAborted, api.RunInterrupted:
		case api.RunRunning, api.RunPending:
			if len(sets) > 0 {
				return &StateError{Msg: fmt.Sprintf("run %s is %s; pause it before changing its config", runID, run.Status)}
			}
			return tx.SetPauseRequest(runID, false)
		default:
			return &StateError{Msg: fmt.Sprintf("run %s is %s and cannot be resumed", runID, run.Status)}
		}
		if run.Status.Terminal() && run.Isolation == string(config.IsolationInPlace) {
			// An ended in-place run becomes active again: the workspace
			// must not have another.
			if active, err := tx.ActiveInPlaceRun(run.Workspace, run.ID); err == nil {
				return &StateError{Msg: fmt.Sprintf("workspace %s already has an active run %s (%s); resuming %s would make two in-place runs edit the same files.\n"+
					"  wait for it (loopctl wait %s) or stop it (loopctl stop %s), then resume this one;\n"+
					"  runs that must work side by side on one repository use --set isolation=worktree",
					run.Workspace, shortOf(active.ID), active.Status, shortOf(runID), shortOf(active.ID), shortOf(active.ID))}
			} else if !errors.Is(err, storage.ErrNotFound) {
				return err
			}
		}
		if run.Status.Terminal() && (run.WorktreeState == "removed" || run.WorktreeState == "gone") {
			// Accepted, the run would only end again at once with
			// fatal:worktree_gone, and lose the reason it ended with: loopd
			// never recreates a worktree that was removed.
			how := "was removed by loopctl clean"
			if run.WorktreeState == "gone" {
				how = "was removed by hand"
			}
			return &StateError{Msg: fmt.Sprintf("run %s cannot be resumed: its worktree %s %s.\n"+
				"  every recorded iteration is on branch %s (loopctl diff %s); start a new run to go on",
				shortOf(runID), run.Worktree, how, run.Branch, shortOf(runID))}
		}
		if len(sets) > 0 {
			cfg, _, err := decodeFrozen(run)
			if err != nil {
				return err
			}
			next, err := cfg.With(run.Workspace, sets)
			if err != nil {
				return &InputError{Msg: "invalid --set; the run was not changed", Problems: problems(err)}
			}
			b, err := json.Marshal(next)
			if err != nil {
				return err
			}
			if err := tx.UpdateConfig(runID, string(b), run.Conditions); err != nil {
				return err
			}
		}
		// A signal that ended the run is spent; one raised while the run
		// was held has not been evaluated yet and stays.
		if run.UserSignal && run.Status.Terminal() {
			if err := tx.ClearUserSignal(runID); err != nil {
				return err
			}
		}
		payload := map[string]any{"run_id": runID, "from": run.Status, "set": sets}
		if onto != nil {
			payload["onto_base"] = onto
		}
		return tx.TransitionRun(storage.Transition{RunID: runID, From: []api.RunStatus{run.Status}, To: api.RunPending,
			Event: events.RunResumed, ClearRequests: true, Payload: payload})
	})
	if err != nil {
		return err
	}
	s.Wake()
	return nil
}

// MaxAnswerBytes bounds an answer: it is stored with the step and copied
// into the next prompt.
const MaxAnswerBytes = 64 << 10

// Answer gives the user's answer to the question a run WAITING with reason
// needs_answer asked, and resumes it: the answer is stored on the step that
// asked (redacted like the goal) and the run goes PENDING in the same
// transaction, so a daemon that dies after the answer keeps both. The next
// implementation prompt carries the question and the answer.
func (s *Scheduler) Answer(ctx context.Context, runID, text string) error {
	text = strings.TrimSpace(text)
	switch {
	case text == "":
		return &InputError{Msg: "the answer is empty; say what the agent should know"}
	case len(text) > MaxAnswerBytes:
		return &InputError{Msg: fmt.Sprintf("the answer is %d bytes, more than %d KiB; point the agent to a file instead", len(text), MaxAnswerBytes>>10)}
	}
	err := s.store.Write(ctx, func(tx *storage.Tx) error {
		run, err := tx.Run(runID)
		if err != nil {
			return err
		}
		if run.Status != api.RunWaiting || run.Reason != storage.ReasonNeedsAnswer {
			why := string(run.Status)
			if run.Reason != "" {
				why += " (" + run.Reason + ")"
			}
			return &StateError{Msg: fmt.Sprintf("run %s is %s, not waiting for an answer: only a run WAITING with reason needs_answer "+
				"(its agent asked a question) takes one; see `loopctl status %s`", shortOf(runID), why, shortOf(runID))}
		}
		cfg, _, err := decodeFrozen(run)
		if err != nil {
			return err
		}
		answer := secretsOf(cfg).String(text)
		seq, err := tx.SetAnswer(runID, answer)
		if err != nil {
			return err
		}
		return tx.TransitionRun(storage.Transition{RunID: runID, From: []api.RunStatus{api.RunWaiting}, To: api.RunPending,
			Event: events.RunResumed, ClearRequests: true,
			Payload: map[string]any{"run_id": runID, "from": api.RunWaiting, "reason": "answered", "seq": seq, "answer": answer}})
	})
	if err != nil {
		return err
	}
	s.Wake()
	return nil
}

// Signal raises the run's user_signal condition; it is evaluated after the
// current step.
func (s *Scheduler) Signal(ctx context.Context, runID string) error {
	run, err := s.store.Run(ctx, runID)
	if err != nil {
		return err
	}
	if _, set, err := decodeFrozen(run); err != nil {
		return err
	} else if !set.Uses(stop.TypeUserSignal) {
		// Raised, it would do nothing: no condition of the run reads it.
		return &StateError{Msg: fmt.Sprintf("run %s has no user_signal stop condition, so a signal would do nothing; "+
			"a run's conditions are fixed when it starts: add {\"type\": \"user_signal\"} to the conditions of the stop file "+
			"(.loop/stop.json) for the next run; to end this one, loopctl stop %s", runID, shortOf(runID))}
	}
	err = s.store.Write(ctx, func(tx *storage.Tx) error { return tx.SetUserSignal(runID) })
	if errors.Is(err, storage.ErrConflict) {
		return &StateError{Msg: fmt.Sprintf("run %s has ended; nothing to signal", runID)}
	}
	if err == nil {
		// A run with no step running evaluates its conditions when it
		// next runs; a PENDING one is woken now.
		s.Wake()
	}
	return err
}

// unpricedBudget warns when a max_cost budget depends on the run's model
// and that model is not in the pricing table: such a budget counts only
// what the agent itself reports (Claude Code does; Codex and Gemini do not),
// so it may never be reached. "" when there is nothing to say.
func unpricedBudget(cfg config.Config, set stop.Set) string {
	if !set.CostLimitWithoutModel() {
		return ""
	}
	if _, ok := pricesOf(cfg).Lookup(cfg.Model); ok {
		return ""
	}
	model := cfg.Model
	if model == "" {
		model = "(none set)"
	}
	return fmt.Sprintf("max_cost is set but the model %s cannot be priced: the budget counts only the cost the agent "+
		"reports itself (Claude Code does; Codex and Gemini do not) unless the agent names a model loopd knows; "+
		"add price.%s=input,output,cache_read,cache_write to .loop/config", model, cmp.Or(cfg.Model, "<model>"))
}
