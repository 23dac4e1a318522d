package homeguard

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// lockWait bounds how long a starting daemon waits for a lock whose
// recorded loopd has exited. The holder then is a child the dead daemon
// was starting: between fork and exec a child shares the parent's open
// file description, and with it the flock, until exec closes the
// close-on-exec descriptor. That takes milliseconds, seconds on a machine
// under heavy load; a daemon restarted by systemd right after a crash
// (kill -9, OOM) met it and exited 75, which systemd does not retry.
var lockWait = 10 * time.Second

// lockPoll is how often the lock is tried again while waiting.
const lockPoll = 20 * time.Millisecond

// flockAfterDeadHolder takes f's exclusive flock. When another process
// holds it, it reads the pid recorded in path: a live holder is refused at
// once (EWOULDBLOCK, with that pid); a recorded loopd that has exited, or no
// pid at all (a daemon killed between taking the lock and writing its pid),
// means the holder is a leftover that lets go by itself, and the lock is
// tried again until lockWait has passed. exited reports, with EWOULDBLOCK,
// that the wait ran out with the recorded loopd gone.
func flockAfterDeadHolder(f *os.File, path string, log *zap.Logger) (pid int, exited bool, err error) {
	var deadline time.Time
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil || !errors.Is(err, unix.EWOULDBLOCK) {
			return 0, false, err
		}
		// Read through the locked descriptor, not the path: the path is
		// what another user may have swapped.
		var start uint64
		pid, start = readHolder(f)
		if pid > 0 && processAlive(pid, start) {
			return pid, false, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(lockWait)
			log.Info("waiting for the home's lock: the loopd that took it has exited, a process it started still holds it",
				zap.String("lock", path), zap.Int("recorded_pid", pid), zap.Duration("up_to", lockWait))
		}
		if time.Now().After(deadline) {
			return pid, pid > 0, err
		}
		time.Sleep(lockPoll)
	}
}

// readHolder reads what lock wrote into the lock file: "<pid> <start>",
// start being the process's start time (see procStart); a file written by
// an older loopd holds the pid alone (start 0).
func readHolder(f *os.File) (pid int, start uint64) {
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	fields := strings.Fields(string(b[:n]))
	if len(fields) == 0 {
		return 0, 0
	}
	pid, _ = strconv.Atoi(fields[0])
	if len(fields) > 1 {
		start, _ = strconv.ParseUint(fields[1], 10, 64)
	}
	return pid, start
}

// holderRecord is what lock writes into the lock file: the daemon's pid
// and its start time, which tells the daemon from a later process that was
// given the same pid.
func holderRecord() string {
	pid := os.Getpid()
	if start, ok := procStart(pid); ok {
		return strconv.Itoa(pid) + " " + strconv.FormatUint(start, 10) + "\n"
	}
	return strconv.Itoa(pid) + "\n"
}

// procStart is pid's start time (field 22 of /proc/<pid>/stat, in clock
// ticks since boot): with the pid, it names one process for as long as the
// machine runs.
func procStart(pid int) (uint64, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	f := statFields(stat)
	if len(f) < 20 {
		return 0, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return start, err == nil
}

// statFields are the fields of /proc/<pid>/stat after the command name
// (which may hold spaces and ')'): the state (field 3) first.
func statFields(stat []byte) []string {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(stat[i+1:]))
}

// processAlive reports whether pid is a live process, and, when start is
// not 0, the one that started at start: the loopd that recorded its pid
// may be long gone and its pid given to another process, which must not
// keep the next daemon out (it would exit 75, "already running"). A zombie
// is not alive: it holds no files, and a daemon killed by its supervisor
// stays one until reaped. A process of another user is alive (EPERM).
func processAlive(pid int, start uint64) bool {
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	f := statFields(stat)
	if len(f) == 0 {
		return true
	}
	if f[0] == "Z" || f[0] == "X" {
		return false
	}
	if start != 0 && len(f) >= 20 {
		return f[19] == strconv.FormatUint(start, 10)
	}
	return true
}
