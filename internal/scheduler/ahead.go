package scheduler

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
)

// The step after the running one is started ahead: once a step is
// opened, the runner predicts the step that follows it were it to end as
// a success, and starts that step's process, gated, while it runs. When
// the step ends, the runner plans the next step as always (every check of
// planNext, the trust of the agents' files included); if the plan's
// process is exactly the one started ahead — the same spec: argv,
// environment, directory, files, tag — that process is the next step's,
// and the fork, the exec and the shell's start are off the way from one
// step to the next (BENCHMARKS.md, "The step overhead, fourth pass").
// Otherwise it is abandoned and the planned process started as before.
//
// A process started ahead runs nothing of the step until it is opened,
// after its step's row commits, exactly as one started while the
// previous step commits (completeStep): it is a wrapper shell waiting at
// its gate, with its log created. Abandoned, it exits at its gate; if
// the daemon dies, the gate's write end closes with it and it exits
// there all the same. Its log file, created for a step that was not
// recorded, is removed (and, after a crash, by the next daemon's
// recovery: removeUnrecordedFiles). What may change while it waits is
// taken again once it is opened, as a process started then would: its
// working directory and its log by their paths (the wrapper), its
// prompt (read only then). One that ended while it waited (killed) is
// not used, and one found ended only as it is opened is started again
// (runner.open).

// aheadSlots is how many runs may hold a process started ahead at once.
// Only steps shorter than a fork and a shell's start gain from it; the
// rest just leave a process waiting for the whole of a step, so a machine
// with many runs does not start one for each.
const aheadSlots = 32

// ahead is the process of the step predicted after the running one.
type ahead struct {
	spec supervise.Spec
	done chan struct{} // closed once the start returned
	started
}

// startAhead starts, gated, the process of the step predicted after cur,
// the step just opened. It does nothing where no prediction is made, a
// fleet worker (whose step path is led by its lease, not by a fork), or
// when aheadSlots processes wait already.
func (r *runner) startAhead(cur *storage.Step) {
	if r.ahead != nil || r.s.lease != nil || r.s.detached() || r.s.isStopping() {
		return
	}
	next, ok := r.hist.NextIfSucceeded()
	if !ok || r.hist.Last() == nil || r.hist.Last().Seq != cur.Seq {
		return
	}
	if maxIt := r.cfg.MaxIterations; maxIt > 0 && next.Iteration > maxIt {
		return // the run ends with cur
	}
	env, err := r.envWithFile()
	if err != nil {
		return // the plan reports it, after cur
	}
	seq := cur.Seq + 1
	f := r.files(seq, next.Phase)
	p := &planned{step: &storage.Step{RunID: r.id, Seq: seq, Phase: next.Phase, Iteration: next.Iteration, LogPath: f.log}, files: f}
	spec := r.spec(p, env)
	select {
	case r.s.ahead <- struct{}{}:
	default:
		return
	}
	a := &ahead{spec: spec, done: make(chan struct{})}
	r.ahead = a
	go func() {
		defer close(a.done)
		a.proc, a.err = r.s.exec.Start(spec)
	}()
}

// takeAhead returns the process started ahead when it is the one spec
// describes and still waits; otherwise it abandons it and returns nil.
// (Its working directory need not be compared: once opened, the wrapper
// enters Spec.Dir again by its path, as a process started now would.)
func (r *runner) takeAhead(spec supervise.Spec) *started {
	a := r.ahead
	if a == nil {
		return nil
	}
	r.ahead = nil
	<-a.done
	if a.err == nil && !ended(a.proc) && sameSpec(a.spec, spec) {
		<-r.s.ahead
		return &a.started // reported once its step is recorded (completeStep)
	}
	r.discard(a)
	return nil
}

// dropAhead abandons the process started ahead, if any: the run does not
// go on to it.
func (r *runner) dropAhead() {
	if a := r.ahead; a != nil {
		r.ahead = nil
		<-a.done
		r.discard(a)
	}
}

// discard abandons a process started ahead and removes the log it
// created; once it is gone, the same step can be started again under the
// same tag and log.
func (r *runner) discard(a *ahead) {
	a.abandon()
	if a.err == nil {
		os.Remove(a.spec.LogPath)
	}
	<-r.s.ahead
	r.s.aheadEnded(false)
}

func (s *Scheduler) aheadEnded(used bool) {
	if s.opts.OnAhead != nil {
		s.opts.OnAhead(used)
	}
}

// sameSpec reports whether two specs describe the same process.
func sameSpec(a, b supervise.Spec) bool {
	return a.Dir == b.Dir && slices.Equal(a.Commands, b.Commands) && slices.Equal(a.Env, b.Env) &&
		a.StdinPath == b.StdinPath && a.LogPath == b.LogPath && a.StatusPath == b.StatusPath &&
		a.Tag == b.Tag && a.Gated == b.Gated && a.Guard == b.Guard && a.Next == b.Next
}

// removeUnrecordedFiles removes from the run's directory the log and
// prompt files of steps after the newest recorded one: the files of a
// process started ahead (or with the previous step's commit) by a daemon
// that died before the step was recorded. The run's next step is planned
// afresh, and a step that was never recorded leaves no file behind.
func (r *runner) removeUnrecordedFiles() {
	last := 0
	if st := r.hist.Last(); st != nil {
		last = st.Seq
	}
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".log") && !strings.HasSuffix(name, ".prompt") {
			continue
		}
		num, _, ok := strings.Cut(name, "-")
		seq, err := strconv.Atoi(num)
		if ok && err == nil && seq > last && e.Type().IsRegular() {
			os.Remove(filepath.Join(r.dir, name))
		}
	}
}

// ended reports whether a process has ended already: one started ahead
// that ended while it waited (killed, or its log could not be created
// then) is not used; the step's process is started afresh.
func ended(p StepProcess) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}
