//go:build unix

// Package procgroup runs a helper command (a custom_script condition, a
// notification or postmortem command) in a process group of its own that
// dies whole when the command is canceled, and is never signalled once its
// leader is reaped.
package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// Set runs cmd in its own process group and makes cancellation (its
// context's end) kill the whole group, so a command's children die with it.
//
// Hazard: a group must never be signalled after its leader was reaped, because the id
// may by then name someone else's group. os.Process knows when Wait has reaped the
// leader (on Linux through a pidfd), so Cancel checks the leader first and reports
// os.ErrProcessDone instead of signalling. The leader's id also stays allocated while
// any member of its group lives, so between the check and the kill the id can only be
// reused after the whole group is gone and the pid space has wrapped: not in
// nanoseconds.
func Set(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			return os.ErrProcessDone
		}
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return os.ErrProcessDone
			}
			return err
		}
		return nil
	}
}
