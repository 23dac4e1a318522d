package scheduler

import (
	"os"
	"slices"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
)

// ahead is the next step's process, started at its gate while the
// current step runs, for the step the runner expects after it: the one
// that follows if the current step succeeds, with the current step's
// environment. Starting a step's process (the fork and exec of its
// wrapper) is the longest part of the way from one step's end to the next
// one's start; started ahead, it is off that way.
//
// It is a guess, and is used only when it turned out right: once the
// current step has ended and the next one is planned as always (every
// check before a step made again), completeStep takes it only when the
// process the plan asks for is exactly the one started — same commands,
// environment, directory, files and tag — and it is still waiting at its
// gate; otherwise it is abandoned and the planned step started as before.
// Either way its commands run only when runStep opens its gate, after the
// step's row is committed: a process started ahead keeps every guarantee
// of a gated step (supervise.Spec.Gated). A daemon that dies meanwhile
// closes its gate, and it exits without running or recording anything.
type ahead struct {
	spec supervise.Spec
	pre  *started
}

// startAhead starts, gated, the process of the step expected after st
// (running, with environment env), when a slot is free (Scheduler.ahead).
func (r *runner) startAhead(st *storage.Step, env []string) {
	if r.ahead != nil || r.s.detached() || r.s.isStopping() {
		return
	}
	select {
	case r.s.ahead <- struct{}{}:
	default:
		return
	}
	next, ok := r.expected(st)
	if !ok {
		<-r.s.ahead
		return
	}
	spec := r.spec(next, env)
	a := &ahead{spec: spec, pre: &started{}}
	if a.pre.proc, a.pre.err = r.s.exec.Start(spec); a.pre.err != nil {
		<-r.s.ahead
		return
	}
	r.ahead = a
}

// expected is the step that follows st (the newest step, running) if st
// succeeds.
func (r *runner) expected(st *storage.Step) (*planned, bool) {
	i := len(r.hist.Steps) - 1
	if i < 0 || r.hist.Steps[i].Seq != st.Seq {
		return nil, false
	}
	// The history's newest step as it would read after a success, for as
	// long as Next looks at it.
	was := r.hist.Steps[i]
	guess := was
	guess.Status, guess.Question, guess.Answer = api.StepSucceeded, "", ""
	r.hist.Steps[i] = guess
	next := r.hist.Next()
	r.hist.Steps[i] = was
	if next.Phase != api.PhaseImplementation && next.Phase != api.PhaseReview && next.Phase != api.PhaseVerification {
		return nil, false // setup and baseline steps come once
	}
	seq := st.Seq + 1
	f := r.files(seq, next.Phase)
	return &planned{step: &storage.Step{RunID: r.id, Seq: seq, Phase: next.Phase, Iteration: next.Iteration, LogPath: f.log}, files: f}, true
}

// takeAhead returns the process started ahead, if any, for the step
// whose process is described by want; a process started for another, or
// no longer waiting at its gate, is abandoned.
func (r *runner) takeAhead(want *supervise.Spec) *started {
	a := r.ahead
	if a == nil {
		return nil
	}
	r.ahead = nil
	<-r.s.ahead
	if want != nil && sameProcess(a.spec, *want) {
		select {
		case <-a.pre.proc.Done():
			// Gone while it waited (killed by someone): start anew.
		default:
			return a.pre
		}
	}
	a.pre.abandon()
	if want == nil || want.LogPath != a.spec.LogPath {
		// The log its wrapper created belongs to no step. (When the
		// planned step has the same log, its own start creates it again.)
		os.Remove(a.spec.LogPath)
	}
	return nil
}

// dropAhead abandons the process started ahead, if any.
func (r *runner) dropAhead() { r.takeAhead(nil) }

// sameProcess reports whether a process started for a is the one b asks
// for.
func sameProcess(a, b supervise.Spec) bool {
	return a.Dir == b.Dir && a.StdinPath == b.StdinPath && a.LogPath == b.LogPath && a.StatusPath == b.StatusPath &&
		a.Tag == b.Tag && a.Gated == b.Gated && a.Next == b.Next &&
		slices.Equal(a.Commands, b.Commands) && slices.Equal(a.Env, b.Env)
}
