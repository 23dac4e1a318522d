package scheduler

import (
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
)

// recoverStep resolves a step that a previous daemon left RUNNING: still
// alive → adopted and watched to its real end; ended with a recorded exit
// status → recorded; outcome lost → INTERRUPTED, and its phase runs again.
func (r *runner) recoverStep(st *storage.Step) (bool, error) {
	if r.takenFrom != "" {
		return r.interruptLost(st)
	}
	f := r.files(st.Seq, st.Phase)
	var id supervise.Identity
	if st.Pid != nil {
		id.Pid, id.BootID = *st.Pid, st.BootID
		if st.ProcStart != nil {
			id.StartTicks = *st.ProcStart
		}
	} else if found, ok := r.s.exec.Find(f.tag); ok {
		id = found
	}
	if proc, err := r.s.exec.Adopt(id, f.tag, f.status); err == nil {
		if r.run.StopRequest == storage.StopNow && (st.CancelCause == storage.CancelNone || st.CancelCause == storage.CancelUser) {
			// A stop --now that the previous daemon did not carry out, or
			// died carrying out.
			r.live.request(errStopNow)
		}
		err := r.write(func(tx *storage.Tx) error {
			if st.Pid == nil {
				if err := tx.SetStepProcess(st.ID, id.Pid, id.Pid, id.StartTicks, id.BootID); err != nil {
					return err
				}
			}
			_, err := tx.Event(r.id, &st.ID, events.StepAdopted, map[string]any{"seq": st.Seq, "phase": st.Phase, "pid": id.Pid})
			return err
		})
		if err != nil {
			return false, err
		}
		r.log.Info("adopted running step", zap.Int("seq", st.Seq), zap.Int("pid", id.Pid))
		done, err := r.watchStep(st, proc)
		if err != nil {
			return false, err
		}
		return r.completeStep(done, events.StepFinished)
	}
	// Its leader is gone: whatever it left running while no daemon
	// watched (a background job in a session of its own) goes now.
	r.s.exec.Sweep(f.tag, time.UnixMilli(st.StartedAt))
	if code, ok := supervise.ReadStatus(f.status, f.tag); ok {
		// It ended while no daemon watched: the exits file was last
		// written then (by this step, the run's newest), so the daemon's
		// downtime is not counted as running time.
		if fi, err := os.Stat(f.status); err == nil {
			ended := max(fi.ModTime().UnixMilli(), st.StartedAt)
			st.EndedAt = &ended
		}
		r.classifyEnd(st, supervise.Exit{Code: code, Recorded: true}, supervise.Exited)
		return r.completeStep(st, events.StepFinished)
	}
	if st.CancelCause != storage.CancelNone {
		// The previous daemon was stopping it and died before recording
		// the end: it ended as that stop meant.
		r.classifyEnd(st, supervise.Exit{Code: -1}, supervise.Canceled)
		if fi, err := os.Stat(st.LogPath); err == nil {
			ended := max(fi.ModTime().UnixMilli(), st.StartedAt)
			st.EndedAt = &ended
		}
		return r.completeStep(st, events.StepFinished)
	}
	st.Status = api.StepInterrupted
	st.Error = "the daemon stopped while this step ran and its outcome was lost; the phase runs again"
	// It ran at least until its last output: count that much of it as
	// running time, not the daemon's downtime.
	if fi, err := os.Stat(st.LogPath); err == nil {
		ended := max(fi.ModTime().UnixMilli(), st.StartedAt)
		st.EndedAt = &ended
	} else {
		st.EndedAt = &st.StartedAt
	}
	if st.Phase != api.PhaseVerification && st.Phase != api.PhaseBaseline {
		r.readAgentOutput(st) // the tokens it spent were spent
	}
	r.recordChanges(st) // and what it changed, changed
	return r.completeStep(st, events.StepInterrupted)
}
