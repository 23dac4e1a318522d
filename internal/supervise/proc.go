package supervise

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loopd/loopd/internal/filetail"
)

var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// BootID returns the kernel's boot id ("" when unavailable).
func BootID() string { return bootID() }

// StartTicks returns a process's start time in clock ticks since boot.
func StartTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may contain spaces
	// and parentheses itself; fields after the last ')' are plain.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state); starttime is field 22.
	const idx = 22 - 3
	if len(fields) <= idx {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(fields))
	}
	return strconv.ParseInt(fields[idx], 10, 64)
}

// Matches reports whether the process id.Pid is alive and is the step with
// this identity and tag.
func Matches(id Identity, tag string) bool {
	if id.BootID != "" && id.BootID != BootID() {
		return false // recorded before a reboot
	}
	ticks, err := StartTicks(id.Pid)
	if err != nil || (id.StartTicks != 0 && ticks != id.StartTicks) {
		return false
	}
	return hasTag(id.Pid, tag)
}

func hasTag(pid int, tag string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	for arg := range bytes.SplitSeq(b, []byte{0}) {
		if string(arg) == tag {
			return true
		}
	}
	return false
}

// Find locates a running step's leader by its tag, scanning /proc: the
// step's pid is recorded only when it ends, so this is how a restarted
// daemon finds a step that was running. The leader is the process whose
// argv carries the tag and that leads its own session (the wrapper's
// subshells carry the same argv but lead nothing).
func Find(tag string) (Identity, bool) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || !hasTag(pid, tag) {
			continue
		}
		if sid, err := unix.Getsid(pid); err != nil || sid != pid {
			continue
		}
		if ticks, err := StartTicks(pid); err == nil {
			return Identity{Pid: pid, StartTicks: ticks, BootID: BootID()}, true
		}
	}
	return Identity{}, false
}

// ReadStatus finds the exit status the wrapper of the step with tag
// appended to path. ok is false when it is not there (the step has not
// ended, or its end was not recorded).
func ReadStatus(path, tag string) (code int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	// Only complete lines count: a wrapper killed mid-write, or a full
	// disk, can leave a partial line (each record starts on a fresh line,
	// so a partial one never hides the next).
	complete := string(b[:max(bytes.LastIndexByte(b, '\n'), 0)])
	prefix := tag + " exit "
	for line := range strings.SplitSeq(complete, "\n") {
		if rest, found := strings.CutPrefix(line, prefix); found {
			// A status written over a reservation is padded.
			if n, err := strconv.Atoi(strings.TrimRight(rest, " ")); err == nil {
				code, ok = n, true
			}
		}
	}
	return code, ok
}

// signalTagged sends sig to every live process in process group pgid whose
// environment carries the step's tag, pinning each with a pidfd before
// checking it so that a recycled pid is never signalled. It returns how
// many were signalled. Used for adopted steps, whose leader this daemon
// cannot hold unreaped.
func signalTagged(pgid int, tag string, sig syscall.Signal) int {
	want := []byte(TagEnv + "=" + tag)
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if g, err := unix.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		fd, err := pidfdOpen(pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			// No pidfds here: check and signal by pid. The window for
			// the pid to be reused in between is microseconds, and the
			// alternative is never stopping the step.
			if env, err := os.ReadFile(d + "/environ"); err == nil && hasEntry(env, want) && unix.Kill(pid, sig) == nil {
				n++
			}
			continue
		}
		env, err := os.ReadFile(d + "/environ")
		if err == nil && hasEntry(env, want) && unix.PidfdSendSignal(fd, sig, nil, 0) == nil {
			n++
		}
		unix.Close(fd)
	}
	return n
}

func hasEntry(nulSeparated, entry []byte) bool {
	for e := range bytes.SplitSeq(nulSeparated, []byte{0}) {
		if bytes.Equal(e, entry) {
			return true
		}
	}
	return false
}

// exitedUnreaped reports whether pid, a child this daemon has not reaped,
// has exited (it is a zombie). The pid cannot be reused before the reap.
func exitedUnreaped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}

// RecordedEnd returns when the step with tag recorded its exit status in
// the exits file at path: the file's modification time, provided the
// file's last record is this step's (a run's steps end one after the
// other, so the newest step's record is the last one, and nothing has
// written the file since). It reads only the file's tail.
func RecordedEnd(path, tag string) (time.Time, bool) {
	b, fi, err := filetail.Read(path, 4<<10)
	if err != nil {
		return time.Time{}, false
	}
	b = bytes.TrimRight(b, "\n")
	last := b[bytes.LastIndexByte(b, '\n')+1:]
	if !bytes.HasPrefix(last, []byte(tag+" exit ")) {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}
