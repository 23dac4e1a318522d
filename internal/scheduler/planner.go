package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/loopd/loopd/internal/agent"
	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
)

// planOrStop checks that the run may go on and plans its next step; it returns
// a decision instead when the run must stop first, and neither when the
// run is no longer RUNNING.
func (r *runner) planOrStop() (*planned, []string, *decision, error) {
	if err := r.reloadFlags(); err != nil {
		return nil, nil, nil, err
	}
	if r.run.Status != api.RunRunning {
		return nil, nil, nil, nil
	}
	if d := r.userRequests(r.run, false); d != nil {
		return nil, nil, d, nil
	}
	return r.planNext()
}

// planNext plans the step after the history: it checks what the step
// needs (the agent installed, a readable env_file) and its prompt.
func (r *runner) planNext() (*planned, []string, *decision, error) {
	if r.s.diskFull() {
		// The step could not write its output: it would fail for a
		// reason that is not its own.
		return nil, nil, r.waitForDisk(), nil
	}
	if d := r.prepareWorkspace(); d != nil {
		return nil, nil, d, nil
	}
	next := r.hist.Next()
	if next.Phase == api.PhaseImplementation || next.Phase == api.PhaseReview {
		// The agent (or a reviewer that is one) reads its own project
		// files at every start.
		if d := r.checkAgentFiles(); d != nil {
			return nil, nil, d, nil
		}
	}
	env, err := r.envWithFile()
	if err != nil {
		return nil, nil, r.envFileDecision(err), nil
	}
	if next.Phase == api.PhaseImplementation {
		if d := r.checkAgent(env); d != nil {
			return nil, nil, d, nil
		}
		if d := r.checkRoot(env); d != nil {
			return nil, nil, d, nil
		}
	}
	var credential string
	if next.Phase == api.PhaseImplementation {
		// Another run of the same account hit its usage limit: this one
		// would only hit it too.
		credential = credentialOf(r.cfg.Agent, env)
		if d, err := r.sharedLimit(credential); d != nil || err != nil {
			return nil, nil, d, err
		}
	}
	p, err := r.buildStep(next)
	if p != nil {
		p.step.Credential = credential
	}
	return p, env, nil, err
}

// reloadFlags re-reads what of the run can change under the runner: its
// status and the user's requests. It reads nothing when no commit changed
// any run's flags since it last read them (storage.FlagsVersion): twice
// per step, that read was a tenth of the daemon's CPU in the step
// overhead measure. The version is taken before the read, so a change
// committed meanwhile makes the next call read again.
func (r *runner) reloadFlags() error {
	v, covered := r.s.store.FlagsVersion()
	if r.flagsCurrent(v, covered) {
		return nil
	}
	f, err := r.s.store.RunFlags(r.ctx, r.id)
	if err != nil {
		r.flagsKnown = false
		return err
	}
	r.run.Status, r.run.StopRequest, r.run.PauseRequest, r.run.UserSignal = f.Status, f.StopRequest, f.PauseRequest, f.UserSignal
	r.flagsAt, r.flagsKnown = v, covered
	return nil
}

// flagsCurrent reports whether the run's flags as reloadFlags last read
// them are still the database's, by the store's FlagsVersion (v, covered).
func (r *runner) flagsCurrent(v uint64, covered bool) bool {
	return covered && r.flagsKnown && v == r.flagsAt
}

// decision is what happens to the run after an evaluation.
type decision struct {
	status      api.RunStatus // RUNNING-status changes only; "" = go on
	reason      string
	description string
	condition   stop.Condition
	waitUntil   *int64
	event       events.Type
	payload     any
}

// userRequests turns pending user requests into a decision; killed says
// whether a step was just killed for a stop --now.
func (r *runner) userRequests(run storage.Run, killed bool) *decision {
	if run.StopRequest == storage.StopGraceful && r.inFlightLost() {
		// A graceful stop lets the step in flight finish. That step's
		// outcome was lost (the daemon died while it ran): its phase runs
		// again, and the stop applies once that step has finished.
		return nil
	}
	if run.StopRequest != "" {
		return r.interrupted(run.StopRequest, killed)
	}
	if run.PauseRequest {
		return &decision{status: api.RunPaused, event: events.RunPaused,
			payload: map[string]any{"run_id": r.id}}
	}
	return nil
}

// inFlightLost reports whether the run's newest step is INTERRUPTED: it was
// in flight when the daemon died, and its outcome is lost.
func (r *runner) inFlightLost() bool {
	last := r.hist.Last()
	return last != nil && last.Status == api.StepInterrupted
}

func (r *runner) interrupted(kind string, killed bool) *decision {
	desc := "stopped by the user after the current step (loopctl stop)"
	switch {
	case kind == storage.StopNow && killed:
		desc = "stopped by the user; the running step was killed (loopctl stop --now)"
	case kind == storage.StopNow:
		desc = "stopped by the user before the next step (loopctl stop --now)"
	}
	return &decision{status: api.RunInterrupted, reason: "user_stop", description: desc, event: events.RunInterrupted}
}

// checkAgent ends the run when the agent preset's binary is not on the
// PATH the step would have (env: the daemon's environment and the env
// file's): start checked it, but it may have been removed since.
func (r *runner) checkAgent(env []string) *decision {
	bin := r.cfg.AgentBinary()
	if bin == "" || onPath(bin, stepPath(env), r.workdir) {
		return nil
	}
	return &decision{status: api.RunAborted, reason: "fatal:agent_not_found", event: events.RunAborted,
		description: agentNotFound(bin)}
}

// checkRoot ends the run when Claude Code would refuse to start: as root it
// refuses --dangerously-skip-permissions (which the claude preset passes)
// unless IS_SANDBOX=1 says it runs in a sandbox. Every step would fail the
// same way in a second, so the run stops at once, saying what to do.
func (r *runner) checkRoot(env []string) *decision {
	refusal := agent.RootRefusalFor(string(r.cfg.Agent), r.cfg.AgentCommand)
	if os.Geteuid() != 0 || refusal == nil || lookupEnv(env, refusal.SandboxEnv) == "1" {
		return nil
	}
	return &decision{status: api.RunAborted, reason: "fatal:agent_refused_root", event: events.RunAborted,
		description: refusal.Description}
}

// lookupEnv returns the last value of key in env (later entries win, as
// for the step's process).
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func agentNotFound(bin string) string {
	hint := agent.InstallHint(bin)
	msg := fmt.Sprintf("the agent %q was not found on the daemon's PATH", bin)
	if hint != "" {
		msg += ": " + hint
	}
	return msg + ", or set agent=command with your own agent_command; then `loopctl resume` the run"
}

// stepFiles are a step's artifacts under LOOPD_HOME/runs/<id>/.
type stepFiles struct {
	log, prompt string
	status      string // the run's exits file, where each step's wrapper appends its exit status
	tag         string // in the step's argv and environment: identifies its processes after a restart
}

func (r *runner) files(seq int, phase api.Phase) stepFiles {
	base := filepath.Join(r.dir, fmt.Sprintf("%04d-%s", seq, phase))
	tag := "loopd-step:" + r.id + ":" + strconv.Itoa(seq)
	if r.epoch > 0 {
		// A fleet worker's step carries its lease's epoch: two workers on
		// one machine (or one that took its own run back) run the same
		// seq of a run under different epochs, and a tag must never
		// match the other one's processes (they are found, adopted and
		// killed by tag).
		tag += ":e" + strconv.FormatInt(r.epoch, 10)
	}
	return stepFiles{
		log: base + ".log", prompt: base + ".prompt", status: filepath.Join(r.dir, "exits"),
		tag: tag,
	}
}

// planned is a step about to start: its row (inserted, or to be inserted
// in the same transaction as the previous step's end) and its start event.
type planned struct {
	step    *storage.Step
	payload map[string]any // STEP_STARTED
	files   stepFiles
	prompt  []byte // an agent step's prompt, for its prompt file
}

// buildStep prepares the next step: its prompt (an agent's, written by
// writePrompt) and its row, not yet inserted.
func (r *runner) buildStep(next Next) (*planned, error) {
	seq := len(r.hist.Steps) + 1
	f := r.files(seq, next.Phase)
	st := &storage.Step{RunID: r.id, Seq: seq, Phase: next.Phase, Iteration: next.Iteration, LogPath: f.log}
	var prompt []byte
	if next.Phase == api.PhaseImplementation {
		if r.cfg.PlanFile != "" {
			if plan, err := readPlan(r.workdir, r.cfg.PlanFile); err == nil {
				st.PlanTask = r.secrets.String(plan.Current) // stored and sent to the model: a verify script can write PLAN.md
				st.PlanChecked = &plan.Checked
			}
		}
		prompt = []byte(r.prompt(next, st.PlanTask))
	} else if impl := r.hist.LastIn(next.Iteration, api.PhaseImplementation); impl != nil {
		// Stuck-task detection needs to know which task a verification judged.
		st.PlanTask = impl.PlanTask
	}
	return &planned{step: st, files: f, prompt: prompt, payload: map[string]any{"seq": seq, "phase": next.Phase, "iteration": next.Iteration,
		"retry": next.Retry, "log_path": f.log}}, nil
}

// writePrompt writes an agent step's prompt file. It is written before
// the step is recorded, but off the way to its process's start: the
// process opens it only when runStep opens its gate.
func (p *planned) writePrompt() error {
	if p.prompt == nil {
		return nil
	}
	if err := os.WriteFile(p.files.prompt, p.prompt, 0o600); err != nil {
		return fmt.Errorf("write prompt: %w", err)
	}
	return nil
}

// removeFiles removes the files plan and the step's start created, for a
// planned step that was never recorded.
func (p *planned) removeFiles() {
	os.Remove(p.files.log)
	if p.step.Phase == api.PhaseImplementation {
		os.Remove(p.files.prompt)
	}
}

// spec describes a planned step's process, in environment env (the
// daemon's plus the run's env_file). Steps are always gated: the process
// may be started before the step's row is committed, and runs its
// commands only when runStep opens it, after.
func (r *runner) spec(p *planned, env []string) supervise.Spec {
	st, f := p.step, p.files
	prompt := f.prompt // LOOP_PROMPT_FILE: the prompt of the iteration's implementation
	if st.Phase != api.PhaseImplementation {
		prompt = r.files(r.implSeq(st), api.PhaseImplementation).prompt
	}
	var commands []string
	stdin := ""
	switch st.Phase {
	case api.PhaseImplementation:
		commands, stdin = []string{r.cfg.AgentCommandLine()}, f.prompt
	case api.PhaseReview:
		commands = []string{r.cfg.ReviewCommand}
	case api.PhaseVerification, api.PhaseBaseline:
		commands = r.cfg.VerifyCommands
	case api.PhaseSetup:
		// LOOP_CHECKOUT: the user's checkout, to copy what git does not
		// carry into a new worktree (cp "$LOOP_CHECKOUT/.env" .).
		commands = []string{r.cfg.SetupCommand}
		env = append(env[:len(env):len(env)], "LOOP_CHECKOUT="+r.run.Workspace)
	}
	// The step that takes this one's cgroup once it has ended: the one
	// after next, whose process starts (ahead) when the next one is
	// opened, the next one's having started while this one ran; on a
	// fleet worker, which starts none ahead, the next one.
	after := 2
	if r.s.lease != nil {
		after = 1
	}
	return supervise.Spec{
		Dir: r.workdir, Commands: commands, StdinPath: stdin,
		Env:     r.stepEnv(env, st, prompt),
		LogPath: f.log, StatusPath: f.status, Tag: f.tag, Gated: true, Guard: r.s.guard(),
		Next: r.files(st.Seq+after, st.Phase).tag, // the tag does not depend on the phase
	}
}

// implSeq is the seq of the implementation step of st's iteration, whose
// prompt file every step of the iteration gets as LOOP_PROMPT_FILE.
func (r *runner) implSeq(st *storage.Step) int {
	for i := len(r.hist.Steps) - 1; i >= 0; i-- {
		if s := &r.hist.Steps[i]; s.Iteration == st.Iteration && s.Phase == api.PhaseImplementation {
			return s.Seq
		}
	}
	return st.Seq
}

// stepEnv adds a step's LOOP_* variables to env (the daemon's environment
// and the run's env_file).
func (r *runner) stepEnv(env []string, st *storage.Step, promptFile string) []string {
	return append(env[:len(env):len(env)],
		"LOOP_RUN_ID="+r.id,
		"LOOP_PHASE="+string(st.Phase),
		"LOOP_ITERATION="+strconv.Itoa(st.Iteration),
		"LOOP_STEP="+strconv.Itoa(st.Seq),
		"LOOP_WORKSPACE="+r.workdir,
		"LOOP_PROMPT_FILE="+promptFile,
	)
}

// envWithFile is the daemon's environment plus the run's env_file, read
// afresh for each step so that its values are never stored.
func (r *runner) envWithFile() ([]string, error) {
	env := os.Environ()
	if r.s.lease != nil {
		env = withoutFleetCredentials(env)
	}
	if r.cfg.EnvFile == "" {
		return env, nil
	}
	vars, err := r.loadEnvFile()
	if err != nil {
		return nil, fmt.Errorf("env_file: %w", err)
	}
	r.useSecrets(vars)
	return append(env, vars...), nil
}

// baseEnv is the environment of custom_script conditions.
func (r *runner) baseEnv() []string {
	env, err := r.envWithFile()
	if err != nil {
		return os.Environ()
	}
	return env
}

// withoutFleetCredentials is a fleet worker's environment without what
// reaches its database or its API (git.FleetCredential). An agent runs
// the repository's code and whatever a prompt talks it into; with these
// it could write any run of the fleet, fenced or not. The worker's git
// credentials are not in its environment at all: its own git commands
// push (see docs/fleet.md).
func withoutFleetCredentials(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !git.FleetCredential(name) {
			out = append(out, kv)
		}
	}
	return out
}
