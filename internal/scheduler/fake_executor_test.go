package scheduler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
)

// fakeStep is what one step does under the fake executor: no process
// runs; its output goes to the step's log as a real wrapper's would.
type fakeStep struct {
	code     int    // its exit code
	output   string // written to its log when it is opened
	lost     bool   // it ends without its exit status recorded
	hold     bool   // it runs until the runner stops it
	startErr error  // it cannot be started
	// files are written into the workspace when it is opened, as an
	// agent's edits (name → content).
	files map[string]string
	// killedWaiting: its process is killed while it waits at its gate,
	// before it is taken (at once) or as it is opened (openFails).
	killedWaiting, openFails bool
}

// fakeExec is a StepExecutor without processes: each step's behaviour
// comes from script, given the step's phase and seq (from the
// environment the runner built for it).
type fakeExec struct {
	script func(phase api.Phase, seq int) fakeStep
	// bySpec, when set, replaces script: for steps that differ by what
	// the spec says (the directory a task run's worktree is in, the
	// prompt). It is asked when the step is opened, once the prompt is
	// written, as a real agent reads it only then.
	bySpec func(spec supervise.Spec) fakeStep
	// onOpen, when set, runs when a step is opened, before it ends: a
	// user's request arriving while the step runs.
	onOpen func(phase api.Phase, seq int)
	// onWatch, when set, runs when the runner starts watching a step
	// (after it was opened and the step after it started ahead): what
	// happens while a step runs.
	onWatch func(phase api.Phase, seq int)

	mu        sync.Mutex
	ran       []string // "phase/seq" of every opened step
	abandoned int
	swept     []string
	held      chan struct{} // receives when a hold step is running
}

func newFakeExec(t *testing.T, script func(api.Phase, int) fakeStep) *fakeExec {
	return &fakeExec{script: script, held: make(chan struct{}, 16)}
}

func envValue(env []string, key string) string { return lookupEnv(env, key) }

func (fx *fakeExec) Start(spec supervise.Spec) (StepProcess, error) {
	phase := api.Phase(envValue(spec.Env, "LOOP_PHASE"))
	seq, _ := strconv.Atoi(envValue(spec.Env, "LOOP_STEP"))
	var st fakeStep
	if fx.bySpec == nil {
		st = fx.script(phase, seq)
	}
	if st.startErr != nil {
		return nil, st.startErr
	}
	// A gated wrapper creates its log before it waits at its gate.
	if err := os.WriteFile(spec.LogPath, nil, 0o600); err != nil {
		return nil, err
	}
	p := &fakeProc{fx: fx, spec: spec, phase: phase, seq: seq, step: st, done: make(chan struct{})}
	if st.killedWaiting {
		p.end(supervise.Exit{Code: -1, Signal: syscall.SIGKILL})
	}
	return p, nil
}

func (fx *fakeExec) Find(string) (supervise.Identity, bool) { return supervise.Identity{}, false }

func (fx *fakeExec) Adopt(supervise.Identity, string, string) (StepProcess, error) {
	return nil, errors.New("gone")
}

func (fx *fakeExec) Sweep(tag string, _ time.Time) {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	fx.swept = append(fx.swept, tag)
}

func (fx *fakeExec) steps() []string {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	return append([]string(nil), fx.ran...)
}

type fakeProc struct {
	fx    *fakeExec
	spec  supervise.Spec
	phase api.Phase
	seq   int
	step  fakeStep

	once sync.Once
	done chan struct{}
	exit supervise.Exit
}

func (p *fakeProc) Open() error {
	if p.step.killedWaiting || p.step.openFails {
		p.end(supervise.Exit{Code: -1, Signal: syscall.SIGKILL})
		return errors.New("open step: not a waiting gated step")
	}
	if p.fx.bySpec != nil {
		p.step = p.fx.bySpec(p.spec)
	}
	p.fx.mu.Lock()
	p.fx.ran = append(p.fx.ran, string(p.phase)+"/"+strconv.Itoa(p.seq))
	p.fx.mu.Unlock()
	if err := os.WriteFile(p.spec.LogPath, []byte(p.step.output), 0o600); err != nil {
		return err
	}
	for name, content := range p.step.files {
		if err := os.WriteFile(filepath.Join(p.spec.Dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if p.fx.onOpen != nil {
		p.fx.onOpen(p.phase, p.seq)
	}
	return nil
}

func (p *fakeProc) end(ex supervise.Exit) {
	p.once.Do(func() {
		p.exit = ex
		close(p.done)
	})
}

func (p *fakeProc) Abandon() {
	p.fx.mu.Lock()
	p.fx.abandoned++
	p.fx.mu.Unlock()
	p.end(supervise.Exit{Code: -1})
}

func (p *fakeProc) Watch(ctx context.Context, l supervise.Limits) supervise.Ending {
	if p.fx.onWatch != nil {
		p.fx.onWatch(p.phase, p.seq)
	}
	if p.step.hold {
		p.fx.held <- struct{}{}
		select {
		case <-ctx.Done():
			if l.OnKill != nil {
				l.OnKill(supervise.Canceled)
			}
			p.end(supervise.Exit{Code: -1, Signal: syscall.SIGTERM})
			return supervise.Canceled
		case <-l.Detach:
			return supervise.Detached
		}
	}
	if p.step.lost {
		p.end(supervise.Exit{Code: -1})
	} else {
		p.end(supervise.Exit{Code: p.step.code, Recorded: true})
	}
	return supervise.Exited
}

func (p *fakeProc) Done() <-chan struct{}     { return p.done }
func (p *fakeProc) Exit() supervise.Exit      { <-p.done; return p.exit }
func (p *fakeProc) Ident() supervise.Identity { return supervise.Identity{Pid: 100000 + p.seq} }

// harness is a Scheduler over a real database in a temporary LOOPD_HOME,
// with the fake executor: the state machine runs for real, no step does.
type harness struct {
	t     testing.TB
	s     *Scheduler
	store *storage.Store
	fx    *fakeExec
}

func newHarness(t *testing.T, fx *fakeExec) *harness { return newBenchHarness(t, fx) }

func newBenchHarness(t testing.TB, fx *fakeExec) *harness {
	t.Helper()
	home := t.TempDir()
	store, err := storage.Open(context.Background(), filepath.Join(home, "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: store, fx: fx}
	h.s = New(Options{Store: store, Home: home, Executor: fx, RetryBackoff: 10 * time.Millisecond})
	t.Cleanup(func() {
		h.s.shutdown() // waits for the postmortem writers
		store.Close()
	})
	return h
}

// start creates a run in a new workspace (ws "" for a temporary one) with
// flags sets, and makes it RUNNING as the scheduler's claim would.
func (h *harness) start(ws string, sets ...string) string {
	h.t.Helper()
	if ws == "" {
		ws = h.t.TempDir()
	}
	ctx := context.Background()
	run, _, err := h.s.CreateRun(ctx, api.CreateRunRequest{Workspace: ws, Goal: "make it so", Set: sets})
	if err != nil {
		h.t.Fatalf("create run: %v", err)
	}
	h.claim(run.ID)
	return run.ID
}

func (h *harness) claim(id string) {
	h.t.Helper()
	err := h.store.Write(context.Background(), func(tx *storage.Tx) error {
		run, err := tx.Run(id)
		if err != nil {
			return err
		}
		return tx.TransitionRun(storage.Transition{RunID: id, From: []api.RunStatus{run.Status}, To: api.RunRunning,
			Event: events.RunStarted, Payload: map[string]any{"run_id": id}})
	})
	if err != nil {
		h.t.Fatalf("claim: %v", err)
	}
}

// drive runs the run's runner to its return, registered as the
// scheduler's own (so that stop and pause reach it), and returns the run.
func (h *harness) drive(id string, recovered bool) storage.Run {
	h.t.Helper()
	r := newRunner(h.s, id)
	h.s.mu.Lock()
	h.s.active[id] = r
	h.s.mu.Unlock()
	r.drive(recovered)
	h.s.mu.Lock()
	delete(h.s.active, id)
	h.s.mu.Unlock()
	run, err := h.store.Run(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return run
}

func (h *harness) steps(id string) []storage.Step {
	h.t.Helper()
	steps, err := h.store.Steps(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return steps
}

func (h *harness) eventTypes(id string) []string {
	h.t.Helper()
	evs, err := h.store.Events(context.Background(), id, 0, 10000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Type))
	}
	return out
}

// statuses is the steps' "phase:status" in order.
func statuses(steps []storage.Step) string {
	var parts []string
	for _, st := range steps {
		parts = append(parts, string(st.Phase)+":"+string(st.Status))
	}
	return strings.Join(parts, " ")
}
