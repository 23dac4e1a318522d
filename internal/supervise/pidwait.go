package supervise

import (
	"os"

	"golang.org/x/sys/unix"
)

// waitPidfd returns once the process behind a pidfd has ended (a zombie
// counts: the pidfd turns readable at exit, before any reaping). It takes
// fd over and closes it.
//
// The pidfd is watched by Go's network poller (epoll), so a step that runs
// for hours holds no OS thread meanwhile. A blocking waitid or poll would
// hold one per step: with a thousand runs, a thousand threads, each with
// about 50 KB of stacks in the daemon (Go's g0 and signal stacks) and a
// kernel stack. Where the poller refuses the descriptor, a blocking poll
// does the same job.
func waitPidfd(fd int) {
	if err := unix.SetNonblock(fd, true); err != nil {
		pollExit(fd)
		unix.Close(fd)
		return
	}
	// Non-blocking, so os.NewFile registers it with the poller.
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err == nil {
		// Read calls the function again each time the poller says the
		// descriptor is readable, until it returns true.
		if err = rc.Read(func(fd uintptr) bool { return exited(int(fd)) }); err == nil {
			return
		}
	}
	if rc != nil {
		_ = rc.Control(func(fd uintptr) { pollExit(int(fd)) })
	}
}

// exited reports, without blocking, whether the pidfd is readable: its
// process has ended.
func exited(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return n > 0 || err != nil
	}
}

// pollExit blocks until the pidfd is readable.
func pollExit(fd int) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			return
		}
	}
}
