package scheduler

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
)

func TestNextIfSucceeded(t *testing.T) {
	impl := storage.Step{Seq: 1, Phase: api.PhaseImplementation, Iteration: 1, Status: api.StepRunning}
	verify := storage.Step{Seq: 2, Phase: api.PhaseVerification, Iteration: 1, Status: api.StepRunning}
	review := storage.Step{Seq: 2, Phase: api.PhaseReview, Iteration: 1, Status: api.StepRunning}
	tests := []struct {
		name  string
		steps []storage.Step
		p     Pipeline
		want  Next
		ok    bool
	}{
		{"no step", nil, Pipeline{Verification: true}, Next{}, false},
		{"an implementation is verified", []storage.Step{impl}, Pipeline{Verification: true}, Next{Phase: api.PhaseVerification, Iteration: 1}, true},
		{"an implementation is reviewed first", []storage.Step{impl}, Pipeline{Review: true, Verification: true}, Next{Phase: api.PhaseReview, Iteration: 1}, true},
		{"without verification the next iteration", []storage.Step{impl}, Pipeline{}, Next{Phase: api.PhaseImplementation, Iteration: 2}, true},
		{"a review is verified", []storage.Step{impl, review}, Pipeline{Review: true, Verification: true}, Next{Phase: api.PhaseVerification, Iteration: 1}, true},
		{"a verification ends the iteration", []storage.Step{impl, verify}, Pipeline{Verification: true}, Next{Phase: api.PhaseImplementation, Iteration: 2}, true},
		{"an implementation that will ask a question is still predicted verified", []storage.Step{{Seq: 1, Phase: api.PhaseImplementation, Iteration: 1, Outcome: storage.Outcome{Question: "which?"}}}, Pipeline{Verification: true}, Next{Phase: api.PhaseVerification, Iteration: 1}, true},
		{"a setup is not predicted", []storage.Step{{Seq: 1, Phase: api.PhaseSetup, Status: api.StepRunning}}, Pipeline{Setup: true, Verification: true}, Next{}, false},
		{"a baseline is not predicted", []storage.Step{{Seq: 1, Phase: api.PhaseBaseline, Status: api.StepRunning}}, Pipeline{Baseline: true, Verification: true}, Next{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory(tc.steps, tc.p)
			before := slices.Clone(h.Steps)
			got, ok := h.NextIfSucceeded()
			if got != tc.want || ok != tc.ok {
				t.Fatalf("NextIfSucceeded() = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
			if !slices.EqualFunc(before, h.Steps, func(a, b storage.Step) bool { return a.Status == b.Status && a.Question == b.Question }) {
				t.Fatal("the history was changed")
			}
			if tc.ok {
				// Once the newest step did succeed, Next agrees.
				h.Steps[len(h.Steps)-1].Status, h.Steps[len(h.Steps)-1].Question = api.StepSucceeded, ""
				if n := h.Next(); n != tc.want {
					t.Fatalf("after success Next() = %+v, want %+v", n, tc.want)
				}
			}
		})
	}
}

// aheadCount counts the scheduler's OnAhead reports.
type aheadCount struct {
	mu              sync.Mutex
	used, discarded int
}

func (c *aheadCount) observe(used bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if used {
		c.used++
	} else {
		c.discarded++
	}
}

func (c *aheadCount) get() (used, discarded int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, c.discarded
}

// runFiles lists the step files (logs and prompts) in a run's directory.
func runFiles(t *testing.T, h *harness, id string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(h.s.opts.Home, "runs", id))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") || strings.HasSuffix(e.Name(), ".prompt") {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestStepsStartedAhead(t *testing.T) {
	tests := []struct {
		name   string
		sets   []string
		script func(api.Phase, int) fakeStep
		steps  string
		// used and discarded: what became of the processes started ahead.
		used, discarded int
		// abandoned: the processes that ran nothing, those discarded and
		// the one started with the last step's commit when the run stops
		// there (completeStep).
		abandoned int
		files     []string
	}{
		{
			name:   "every step after the first was started ahead; none after the last iteration",
			sets:   []string{"max_iterations=3", "verify_command=true"},
			script: func(api.Phase, int) fakeStep { return fakeStep{} },
			steps: "implementation:SUCCEEDED verification:SUCCEEDED implementation:SUCCEEDED verification:SUCCEEDED " +
				"implementation:SUCCEEDED verification:SUCCEEDED",
			used: 5, discarded: 0, abandoned: 1,
			files: []string{"0001-implementation.log", "0001-implementation.prompt", "0002-verification.log",
				"0003-implementation.log", "0003-implementation.prompt", "0004-verification.log",
				"0005-implementation.log", "0005-implementation.prompt", "0006-verification.log"},
		},
		{
			// A failed implementation is not verified: the verification
			// started ahead is discarded, its log removed, and the next
			// implementation started as planned.
			name: "a failed implementation discards the verification started ahead",
			sets: []string{"max_iterations=2", "verify_command=true", "max_consecutive_implementation_failures=0"},
			script: func(phase api.Phase, seq int) fakeStep {
				if seq == 1 {
					return fakeStep{code: 3}
				}
				return fakeStep{}
			},
			steps: "implementation:FAILED implementation:SUCCEEDED verification:SUCCEEDED",
			used:  1, discarded: 1, abandoned: 2,
			files: []string{"0001-implementation.log", "0001-implementation.prompt",
				"0002-implementation.log", "0002-implementation.prompt", "0003-verification.log"},
		},
		{
			// The run completes after a verification: the next
			// iteration's implementation started ahead never runs.
			name:   "a run that completes discards the step started ahead",
			sets:   []string{"max_iterations=5", "verify_command=true", "completion=verify"},
			script: func(api.Phase, int) fakeStep { return fakeStep{} },
			steps:  "implementation:SUCCEEDED verification:SUCCEEDED",
			used:   1, discarded: 1, abandoned: 1,
			files: []string{"0001-implementation.log", "0001-implementation.prompt", "0002-verification.log"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFakeExec(t, tc.script)
			h := newHarness(t, fx)
			var count aheadCount
			h.s.opts.OnAhead = count.observe
			id := h.start("", append([]string{"agent=command", "agent_command=agent"}, tc.sets...)...)
			h.drive(id, false)
			if got := statuses(h.steps(id)); got != tc.steps {
				t.Fatalf("steps:\n got %s\nwant %s", got, tc.steps)
			}
			if used, discarded := count.get(); used != tc.used || discarded != tc.discarded {
				t.Fatalf("started ahead: %d used, %d discarded; want %d, %d", used, discarded, tc.used, tc.discarded)
			}
			fx.mu.Lock()
			abandoned := fx.abandoned
			fx.mu.Unlock()
			if abandoned != tc.abandoned {
				t.Fatalf("%d processes abandoned, want %d", abandoned, tc.abandoned)
			}
			if got := runFiles(t, h, id); !slices.Equal(got, tc.files) {
				t.Fatalf("the run's step files:\n got %v\nwant %v", got, tc.files)
			}
			if n := len(h.s.ahead); n != 0 {
				t.Fatalf("%d slots for processes started ahead still held", n)
			}
		})
	}
}

// A process started ahead may be killed while it waits (by the step
// before it, the OOM killer, a user): the step then runs in a process
// started afresh, whether the death is seen before the process is taken
// or only as it is opened, and nothing counts as a failure.
func TestStepStartedAheadKilledWhileItWaits(t *testing.T) {
	for _, tc := range []struct {
		name string
		die  fakeStep
		// used, discarded: what became of the processes started ahead.
		used, discarded int
	}{
		{"seen before it is taken", fakeStep{killedWaiting: true}, 0, 1},
		{"seen as it is opened", fakeStep{openFails: true}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var starts sync.Map // seq → starts so far
			fx := newFakeExec(t, func(phase api.Phase, seq int) fakeStep {
				n, _ := starts.LoadOrStore(seq, new(atomic.Int32))
				if seq == 2 && n.(*atomic.Int32).Add(1) == 1 {
					return tc.die // the first process of step 2 only
				}
				return fakeStep{}
			})
			h := newHarness(t, fx)
			var count aheadCount
			h.s.opts.OnAhead = count.observe
			id := h.start("", "agent=command", "agent_command=agent", "max_iterations=1", "verify_command=true")
			h.drive(id, false)
			if got := statuses(h.steps(id)); got != "implementation:SUCCEEDED verification:SUCCEEDED" {
				t.Fatalf("steps: %s", got)
			}
			if used, discarded := count.get(); used != tc.used || discarded != tc.discarded {
				t.Fatalf("started ahead: %d used, %d discarded; want %d, %d", used, discarded, tc.used, tc.discarded)
			}
			if got := fx.steps(); !slices.Equal(got, []string{"implementation/1", "verification/2"}) {
				t.Fatalf("opened %v; want each step once", got)
			}
		})
	}
}

// A daemon that died with a process started ahead left its log (and an
// implementation's prompt) for a step that was never recorded; the next
// load of the run removes them, and only them.
func TestLoadRemovesTheFilesOfUnrecordedSteps(t *testing.T) {
	fx := newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{} })
	h := newHarness(t, fx)
	id := h.start("", "agent=command", "agent_command=agent", "max_iterations=1", "verify_command=true")
	h.drive(id, false)
	dir := filepath.Join(h.s.opts.Home, "runs", id)
	for _, name := range []string{"exits", "0003-implementation.log", "0003-implementation.prompt", "0004-verification.log", "10000-implementation.log"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := newRunner(h.s, id)
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	want := []string{"0001-implementation.log", "0001-implementation.prompt", "0002-verification.log"}
	if got := runFiles(t, h, id); !slices.Equal(got, want) {
		t.Fatalf("the run's step files:\n got %v\nwant %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "exits")); err != nil {
		t.Fatalf("a file that is not a step's was removed: %v", err)
	}
}

// sameSpec compares every field of supervise.Spec: a field added to Spec
// and not compared would let a process started ahead run a step whose
// spec differs in it.
func TestSameSpecComparesEveryField(t *testing.T) {
	base := supervise.Spec{Dir: "/w", Commands: []string{"a"}, Env: []string{"A=1"}, StdinPath: "/p", LogPath: "/l",
		StatusPath: "/s", Tag: "t", Gated: true, Guard: "/g", Next: "n"}
	if !sameSpec(base, base) {
		t.Fatal("a spec differs from itself")
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		other := base
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Slice: // one more element, in a new array
			f.Set(reflect.Append(f, reflect.Zero(f.Type().Elem())))
		default:
			t.Fatalf("Spec.%s is a %s, which this test cannot change: compare it in sameSpec and teach the test", typ.Field(i).Name, f.Kind())
		}
		if sameSpec(base, other) {
			t.Errorf("sameSpec ignores Spec.%s", typ.Field(i).Name)
		}
	}
}
