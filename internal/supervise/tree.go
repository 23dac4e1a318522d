package supervise

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procInfo is what one /proc/<pid>/stat says about a process.
type procInfo struct {
	pid, ppid, pgid, sid int
	state                byte
	start                int64 // clock ticks since boot: with the pid, the process's identity
}

// readStat parses /proc/<pid>/stat.
func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after the last ')' are plain: state, ppid, pgrp, session, …
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procInfo{}, false
	}
	pi := procInfo{pid: pid, state: f[0][0]}
	pi.ppid, _ = strconv.Atoi(f[1])
	pi.pgid, _ = strconv.Atoi(f[2])
	pi.sid, _ = strconv.Atoi(f[3])
	pi.start, _ = strconv.ParseInt(f[19], 10, 64)
	return pi, true
}

// allProcs reads every process's stat.
func allProcs() []procInfo {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	out := make([]procInfo, 0, len(dirs))
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if pi, ok := readStat(pid); ok {
			out = append(out, pi)
		}
	}
	return out
}

// stepProcesses finds the live processes of a step, wherever they moved:
// those in its cgroup (cg, "" for none), those whose environment carries
// its tag (inherited by everything the step starts, unless a program
// clears its environment), and the descendants of its leader (by parent
// links; the daemon is a child subreaper, so an orphan of a step started by
// this daemon is re-parented to the daemon, not to init — see
// BecomeSubreaper — and found through the tag or the cgroup instead). The
// leader and the members of its process group are not included: the caller
// signals the group as a whole (a second signal could turn a graceful stop
// into a forced one). Zombies are left out: they are dead. Processes that
// started before since (clock ticks since boot: the leader's start) cannot
// be the step's, and their environments are not read: most processes of a
// machine are older than any step, and reading each one's environment at
// every step's end would cost more than the step's start.
func stepProcesses(leader int, tag, cg string, since int64) []procInfo {
	procs := allProcs()
	want := map[int]bool{}
	if cg != "" {
		for _, pid := range cgroupPids(cg) {
			want[pid] = true
		}
	}
	children := map[int][]int{}
	for _, pi := range procs {
		children[pi.ppid] = append(children[pi.ppid], pi.pid)
	}
	stack := append([]int(nil), children[leader]...)
	for len(stack) > 0 {
		pid := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !want[pid] {
			want[pid] = true
			stack = append(stack, children[pid]...)
		}
	}
	entry := []byte(TagEnv + "=" + tag)
	var out []procInfo
	for _, pi := range procs {
		if pi.pid == leader || pi.pgid == leader || pi.state == 'Z' || pi.pid == os.Getpid() || pi.start < since {
			continue
		}
		if want[pi.pid] || hasTagEnv(pi.pid, entry) {
			out = append(out, pi)
		}
	}
	return out
}

// ownedProcesses is stepProcesses for a step started by this daemon while
// it is the child subreaper of its steps (see BecomeSubreaper), without
// reading every process on the machine: with a thousand runs on the
// machine, that scan at each step's end cost more than all the rest of
// the daemon's work. Every live process of such a step descends either
// from its leader or, once its parent died, from a child of this daemon
// that it was re-parented to (orphanPids); such a child is the step's when
// it is in the step's session or process group, or carries its tag. The
// step's leaders are skipped (registered, see startRegistered), so the walk
// reads the files of the step's own processes and of the few orphans alive.
//
// What a process that cleared its environment in a session of its own
// leaves behind once its parent died is out of reach here as in the full
// scan; a cgroup is what catches it. It returns false when the orphans
// cannot be listed reliably; the caller then scans every process.
func ownedProcesses(leader int, tag string, since int64) ([]procInfo, bool) {
	orphans, ok := orphanPids()
	if !ok {
		return nil, false
	}
	leaders.mu.Lock()
	skip := maps.Clone(leaders.pids)
	leaders.mu.Unlock()
	self := os.Getpid()
	entry := []byte(TagEnv + "=" + tag)
	type node struct{ pid, parent int }
	var stack []node
	if pi, ok := readStat(leader); ok && pi.state != 'Z' {
		stack = append(stack, node{leader, pi.ppid}) // alive: its descendants are the step's
	}
	for _, pid := range orphans {
		if skip[pid] {
			continue
		}
		pi, ok := readStat(pid)
		// Checked to be this process's child: the pid read from the
		// children file cannot have been reused by a stranger since.
		if !ok || pi.ppid != self || pi.state == 'Z' || pi.start < since {
			continue
		}
		if pi.sid == leader || pi.pgid == leader || hasTagEnv(pi.pid, entry) {
			stack = append(stack, node{pid, self})
		}
	}
	var out []procInfo
	seen := map[int]bool{}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n.pid] {
			continue
		}
		seen[n.pid] = true
		if n.pid != leader {
			pi, ok := readStat(n.pid)
			if !ok || pi.state == 'Z' || pi.ppid != n.parent {
				continue // gone, or its pid reused since its parent's file was read
			}
			if pi.pgid != leader && pi.pid != self {
				out = append(out, pi)
			}
		}
		kids, ok := stableChildPids(n.pid)
		if !ok {
			return nil, false
		}
		for _, child := range kids {
			stack = append(stack, node{child, n.pid})
		}
	}
	return out, true
}

// orphanPids returns the children of this process's main thread: every
// orphan re-parented to this process as its subreaper. Linux (3.19 and
// later, see subreaperKernel) gives an orphan to the first live thread of
// its subreaper (kernel/exit.c: find_new_reaper, find_alive_thread), the
// thread group's leader while it lives, and a Go program's main thread
// lives as long as the program. loopd's main goroutine is locked to that
// thread (cmd/loopd), so no step leader is started from it and the list
// holds only orphans: one small file to read. It returns false when the
// list cannot be read consistently (see readChildrenStable).
func orphanPids() ([]int, bool) {
	self := strconv.Itoa(os.Getpid())
	return readChildrenStable("/proc/" + self + "/task/" + self + "/children")
}

// stableChildPids returns the children of process pid, each of its
// threads' list read until two reads agree (readChildrenStable); a process
// gone meanwhile has none. It reports false when a list keeps changing.
func stableChildPids(pid int) ([]int, bool) {
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var out []int
	for _, f := range files {
		kids, ok := readChildrenStable(f)
		if !ok {
			if _, err := os.Stat(f); err != nil {
				continue // the thread or the process ended
			}
			return nil, false
		}
		out = append(out, kids...)
	}
	return out, true
}

// cgroupMembers lists the live processes of a step's cgroup outside the
// leader's process group (which the caller signals as a whole).
func cgroupMembers(cg string, leader int) []procInfo {
	var out []procInfo
	for _, pid := range cgroupPids(cg) {
		if pi, ok := readStat(pid); ok && pi.pid != leader && pi.pgid != leader && pi.state != 'Z' {
			out = append(out, pi)
		}
	}
	return out
}

func hasTagEnv(pid int, entry []byte) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return err == nil && hasEntry(env, entry)
}

// signalProcs sends sig to each process, pinned by a pidfd and checked to
// be the same process (pid and start time) first, so that a pid reused
// since the scan is never signalled. It returns how many were signalled.
func signalProcs(procs []procInfo, sig syscall.Signal) int {
	n := 0
	for _, pi := range procs {
		fd, err := pidfdOpen(pi.pid, 0)
		if err != nil {
			if errors.Is(err, unix.ESRCH) {
				continue
			}
			// No pidfds here: check and signal by pid (a window of
			// microseconds for reuse, against never stopping the step).
			if now, ok := readStat(pi.pid); ok && now.start == pi.start && unix.Kill(pi.pid, sig) == nil {
				n++
			}
			continue
		}
		if now, ok := readStat(pi.pid); ok && now.start == pi.start && unix.PidfdSendSignal(fd, sig, nil, 0) == nil {
			n++
		}
		unix.Close(fd)
	}
	return n
}

// Sweep kills whatever is left of a step whose leader ended while no
// daemon watched it (the daemon was down): its processes by tag, and its
// cgroup, found from them or by name under this daemon's cgroup, which it
// then removes. By name, that is every cgroup of the step's run (see
// runCgroup): it is called before the run goes on, so none of them holds
// a later step's processes — only a gated next step the dead daemon had
// started and never opened, which would exit at its closed gate anyway. started is when the step started: older processes are not
// looked at (zero: all are).
func Sweep(tag string, started time.Time) {
	procs := stepProcesses(-1, tag, "", ticksAt(started))
	cgs := map[string]bool{}
	for _, pi := range procs {
		if cg := stepCgroup(pi.pid, tag); cg != "" {
			cgs[cg] = true
		}
	}
	for _, dir := range runCgroups(tag) {
		cgs[dir] = true
	}
	for cg := range cgs {
		killCgroup(cg)
	}
	signalProcs(procs, unix.SIGKILL)
	for cg := range cgs {
		removeCgroup(cg)
	}
}

// userHZ is the unit of /proc/<pid>/stat's start times: USER_HZ, 100 on
// every Linux architecture's ABI.
const userHZ = 100

// bootTime is when the machine booted (/proc/stat btime), zero if unknown.
var bootTime = sync.OnceValue(func() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(sec, 0)
			}
		}
	}
	return time.Time{}
})

// ticksAt converts a wall-clock time into a start time in clock ticks
// since boot, with a few seconds of margin for clock adjustments; 0 (every
// process) when it cannot.
func ticksAt(t time.Time) int64 {
	boot := bootTime()
	if t.IsZero() || boot.IsZero() {
		return 0
	}
	return max(int64(t.Sub(boot).Seconds()-5)*userHZ, 0)
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
