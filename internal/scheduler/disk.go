package scheduler

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
)

// Disk-full handling: a step's output and exit status go to LOOPD_HOME,
// so a full LOOPD_HOME makes the agent fail (it cannot write its output)
// for a reason that is not the agent's. Such a failure is never counted:
// the run waits, WAITING with reason disk_full, and retries by itself.
const (
	// minFreeBytes is the space LOOPD_HOME needs for a step to start.
	minFreeBytes = 1 << 20
	// diskFullRetry is how often a run waiting for space looks again.
	diskFullRetry = 30 * time.Second
	// reasonDiskFull is the WAITING reason while LOOPD_HOME is full.
	reasonDiskFull = "disk_full"
)

// errDiskFull marks a step that could not run, or failed, because
// LOOPD_HOME was out of space.
var errDiskFull = errors.New("LOOPD_HOME is out of disk space")

// diskFull reports whether the file system of LOOPD_HOME has less than
// minFreeBytes available to the daemon's user. A file system that cannot
// be asked is taken as not full: the step's own errors will say more.
func (s *Scheduler) diskFull() bool {
	var st unix.Statfs_t
	if err := unix.Statfs(s.opts.Home, &st); err != nil {
		return false
	}
	return st.Bavail*uint64(st.Bsize) < minFreeBytes
}

// waitForDisk is the decision to wait for space in LOOPD_HOME.
func (r *runner) waitForDisk() *decision {
	until := r.s.opts.Now().Add(diskFullRetry).UnixMilli()
	desc := "LOOPD_HOME (" + r.s.opts.Home + ") is out of disk space: the run waits and goes on by itself once space is freed"
	return &decision{status: api.RunWaiting, waitUntil: &until, event: events.RunWaiting, reason: reasonDiskFull,
		description: desc, payload: map[string]any{"run_id": r.id, "until": api.Millis(until), "reason": desc}}
}

// diskTrouble reports whether err is LOOPD_HOME's file system refusing a
// write: out of space or quota, or read-only. It passes by itself.
func diskTrouble(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS)
}
