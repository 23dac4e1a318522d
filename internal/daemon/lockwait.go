package daemon

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
		b, _ := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && processAlive(pid) {
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

// processAlive reports whether pid is a live process. A zombie is not: it
// holds no files, and a daemon killed by its supervisor stays one until
// reaped. A process of another user is alive (EPERM).
func processAlive(pid int) bool {
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name, which may hold spaces and ')'.
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z' && stat[i+2] != 'X'
	}
	return true
}
