package supervise

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The daemon is a child subreaper (BecomeSubreaper): a process of a step
// whose parent dies is re-parented to the daemon instead of init. Some
// systems' init (a container's PID 1) never reaps such orphans, and a
// killed orphan would stay a zombie there; the daemon reaps them itself.
//
// It must never reap a child that os/exec waits for, or that Wait fails
// with ECHILD and the exit status is lost. Its own children are either step
// leaders (each in a session of its own, registered here from before it can
// exit until waitChild reaps it) or helpers such as git, custom_script and
// notification commands (in the daemon's session, each leading its own
// process group or in the daemon's). An orphan is neither: it is in a step's
// session or one it made itself, or — an orphan of a helper — in the
// daemon's session but in the helper's process group, which it does not
// lead. Only such zombies are reaped.

// isSubreaper is true once BecomeSubreaper made this process the child
// subreaper of its steps (and the kernel lists a process's children): the
// processes of a step it started are then found by walking down from its
// children (ownedProcesses) instead of reading every process's files.
var isSubreaper atomic.Bool

// canListChildren reports whether /proc lists a process's children.
func canListChildren() bool {
	_, ok := childPidsOK("self")
	return ok
}

var leaders = struct {
	// starting is held for reading while a leader is started and
	// registered, and for writing while an orphan is reaped: a zombie is
	// never taken for an orphan in the instant between its fork and its
	// registration. Starts do not wait for each other, and a step's end
	// (unregisterLeader) waits for neither.
	starting sync.RWMutex
	mu       sync.Mutex // guards pids
	pids     map[int]bool
}{pids: map[int]bool{}}

// startRegistered starts a step's leader and registers it before the
// reaper can see it exit.
func startRegistered(cmd *exec.Cmd) error {
	leaders.starting.RLock()
	defer leaders.starting.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	leaders.mu.Lock()
	leaders.pids[cmd.Process.Pid] = true
	leaders.mu.Unlock()
	return nil
}

func unregisterLeader(pid int) {
	leaders.mu.Lock()
	delete(leaders.pids, pid)
	leaders.mu.Unlock()
}

func isLeader(pid int) bool {
	leaders.mu.Lock()
	defer leaders.mu.Unlock()
	return leaders.pids[pid]
}

// BecomeSubreaper makes the calling process a child subreaper and reaps,
// until ctx ends, the orphans of steps that die as its children. The
// daemon calls it once at start.
func BecomeSubreaper(ctx context.Context) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become a child subreaper: %w", err)
	}
	isSubreaper.Store(canListChildren() && subreaperKernel())
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	go func() {
		defer signal.Stop(chld)
		// A SIGCHLD can be missed (several merge into one, or one
		// arrives during a scan): a slow tick catches up. Scans are at
		// least a second apart: with many runs, children end many times
		// a second, and a zombie may well wait a second for its reaping.
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-chld:
			case <-t.C:
			}
			reapOrphans()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return nil
}

// reapOrphans reaps the zombie children of this process that are orphans
// of steps (see above).
//
// The scan runs without the leaders' lock: with a thousand runs the daemon
// has a thousand children, and a step's end (unregisterLeader) or start
// (startRegistered) must not wait for their /proc files to be read. Only a
// zombie found to be an orphan is checked again under the lock, just before
// it is reaped, with no leader starting: by then a pid that was reaped and
// reused is either a registered leader or fails the session and group
// tests.
func reapOrphans() {
	self := os.Getpid()
	ownSid, err := unix.Getsid(0)
	if err != nil {
		return
	}
	ownPgid := unix.Getpgrp()
	orphan := func(pi procInfo) bool {
		if pi.ppid != self || pi.state != 'Z' {
			return false
		}
		helperOrphan := pi.sid == ownSid && pi.pgid != pi.pid && pi.pgid != ownPgid
		return pi.sid != ownSid || helperOrphan // else a child os/exec waits for
	}
	leaders.mu.Lock()
	known := maps.Clone(leaders.pids)
	leaders.mu.Unlock()
	for _, pi := range children(known) {
		if !orphan(pi) {
			continue
		}
		leaders.starting.Lock()
		if now, ok := readStat(pi.pid); ok && now.start == pi.start && orphan(now) && !isLeader(pi.pid) {
			var info unix.Siginfo
			_ = unix.Waitid(unix.P_PID, pi.pid, &info, unix.WEXITED|unix.WNOHANG, nil)
		}
		leaders.starting.Unlock()
	}
}

// children returns this process's children but those in skip, from the
// children files of its threads (an orphan is re-parented to any thread of
// its subreaper), or by scanning every process where those files do not
// exist.
func children(skip map[int]bool) []procInfo {
	pids, ok := childPidsOK("self")
	if !ok {
		return allProcs()
	}
	var out []procInfo
	for _, pid := range pids {
		if skip[pid] {
			continue
		}
		if pi, ok := readStat(pid); ok {
			out = append(out, pi)
		}
	}
	return out
}

// childPidsOK returns the children of process pid from the children files
// of its threads, and false when there are no such files (a kernel without
// CONFIG_PROC_CHILDREN, or the process is gone).
func childPidsOK(pid string) ([]int, bool) {
	files, _ := filepath.Glob("/proc/" + pid + "/task/*/children")
	if len(files) == 0 {
		return nil, false
	}
	var out []int
	for _, f := range files {
		out = append(out, readChildren(f)...)
	}
	return out, true
}

// readChildren reads one thread's children file.
func readChildren(file string) []int {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []int
	for field := range strings.FieldsSeq(string(b)) {
		if n, err := strconv.Atoi(field); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// readChildrenStable reads a children file until two reads in a row agree.
// The file is no snapshot: each read(2) returns at most a page and the
// next one restarts by position, so a child reaped between two reads can
// make a live one be skipped (fs/proc/array.c, get_children_pid). It
// returns false when the reads keep disagreeing.
func readChildrenStable(file string) ([]int, bool) {
	last, err := os.ReadFile(file)
	if err != nil {
		return nil, false
	}
	for range 5 {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, false
		}
		if bytes.Equal(b, last) {
			var out []int
			for field := range strings.FieldsSeq(string(b)) {
				if n, err := strconv.Atoi(field); err == nil {
					out = append(out, n)
				}
			}
			return out, true
		}
		last = b
	}
	return nil, false
}

// subreaperKernel reports whether this kernel gives a subreaper's orphans
// to its first live thread (Linux 3.19 and later; before, to the thread
// that forked their ancestor), which orphanPids relies on.
func subreaperKernel() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 3 || major == 3 && minor >= 19
}
