package supervise

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

var leaders = struct {
	sync.RWMutex
	pids map[int]bool
}{pids: map[int]bool{}}

// startRegistered starts a step's leader and registers it before the
// reaper can see it exit.
func startRegistered(cmd *exec.Cmd) error {
	leaders.Lock()
	defer leaders.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	leaders.pids[cmd.Process.Pid] = true
	return nil
}

func unregisterLeader(pid int) {
	leaders.Lock()
	delete(leaders.pids, pid)
	leaders.Unlock()
}

// BecomeSubreaper makes the calling process a child subreaper and reaps,
// until ctx ends, the orphans of steps that die as its children. The
// daemon calls it once at start.
func BecomeSubreaper(ctx context.Context) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become a child subreaper: %w", err)
	}
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
func reapOrphans() {
	self := os.Getpid()
	ownSid, err := unix.Getsid(0)
	if err != nil {
		return
	}
	ownPgid := unix.Getpgrp()
	leaders.RLock()
	defer leaders.RUnlock()
	for _, pi := range children() {
		if pi.ppid != self || pi.state != 'Z' || leaders.pids[pi.pid] {
			continue
		}
		helperOrphan := pi.sid == ownSid && pi.pgid != pi.pid && pi.pgid != ownPgid
		if pi.sid == ownSid && !helperOrphan {
			continue // a child os/exec waits for
		}
		var info unix.Siginfo
		_ = unix.Waitid(unix.P_PID, pi.pid, &info, unix.WEXITED|unix.WNOHANG, nil)
	}
}

// children returns this process's children, from the children files of
// its threads (an orphan is re-parented to any thread of its subreaper), or
// by scanning every process where those files do not exist.
func children() []procInfo {
	files, _ := filepath.Glob("/proc/self/task/*/children")
	if len(files) == 0 {
		return allProcs()
	}
	var out []procInfo
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for field := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(field); err == nil {
				if pi, ok := readStat(pid); ok {
					out = append(out, pi)
				}
			}
		}
	}
	return out
}
