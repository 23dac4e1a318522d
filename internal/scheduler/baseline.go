package scheduler

import (
	"bufio"
	"bytes"
	"os"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/testreport"
)

// ignorePreExisting applies verify_baseline to verification step st, whose
// tests res were parsed from its output: the failing tests that were
// already failing in the run's baseline step are recorded as ignored, and
// when every failure of the step is one of them the step SUCCEEDS. The
// baseline ran on the untouched workspace, so those failures are not the
// run's doing, and a gate that demanded them fixed would keep a loop from
// ever completing a task that never asked for them.
//
// The hazard is passing a verification for a failure nobody looked at, so
// anything not known by name keeps the step FAILED: a baseline whose tests
// were not parsed, a build or collection failure, a failing test count
// larger than the names parsed, a step stopped by a timeout or a signal,
// and, with several verify_commands, a failure before the last one (the
// first failing command ends the step, so the later ones never ran).
func (r *runner) ignorePreExisting(st *storage.Step, res testreport.Result) {
	if !r.hist.Pipeline.Baseline || len(st.TestsFailedNames) == 0 {
		return
	}
	base := r.hist.Baseline()
	if base == nil || base.TestsFailed == nil {
		return // nothing is known to have failed before the run
	}
	pre := make(map[string]bool, len(base.TestsFailedNames))
	for _, n := range base.TestsFailedNames {
		pre[n] = true
	}
	fresh := false
	var ignored []string
	for _, n := range st.TestsFailedNames {
		// The baseline's names were stored redacted (redactStep): compare
		// like with like. What is kept is the name as parsed, redacted
		// with the step's other names when it is recorded.
		if pre[r.secrets.String(n)] {
			ignored = append(ignored, n)
		} else {
			fresh = true
		}
	}
	st.TestsIgnoredNames = ignored
	switch {
	case fresh || len(ignored) == 0 || st.Status != api.StepFailed:
		return
	case st.CancelCause != storage.CancelNone || st.ExitCode == nil:
		return // timed out, killed: not the tests' verdict alone
	case res.BuildFailed || st.TestsFailed == nil || *st.TestsFailed != len(st.TestsFailedNames):
		return // a failure without a name cannot be matched
	case !r.ranLastVerifyCommand(st):
		return
	}
	st.Status, st.Error = api.StepSucceeded, ""
}

// ranLastVerifyCommand reports whether verification step st ran the last
// of the run's verify_commands: the step's wrapper heads each command's
// output with "$ <command>" when there are several (supervise), and stops
// at the first that fails.
func (r *runner) ranLastVerifyCommand(st *storage.Step) bool {
	cmds := r.cfg.VerifyCommands
	if len(cmds) <= 1 {
		return true
	}
	f, err := os.Open(st.LogPath)
	if err != nil {
		return false
	}
	defer f.Close()
	head := []byte("$ " + cmds[len(cmds)-1] + "\n")
	br := bufio.NewReaderSize(f, 64<<10)
	for start := true; ; {
		line, err := br.ReadSlice('\n')
		if start && bytes.Equal(line, head) {
			return true
		}
		// A line longer than the buffer comes in pieces: only a piece
		// that starts a line can be the header.
		start = err == nil
		if err != nil && err != bufio.ErrBufferFull {
			return false
		}
	}
}
