package supervise

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A step's processes can leave its process group: Claude Code's Bash tool,
// Gemini's run_shell_command, Codex without its sandbox and any `setsid cmd &`
// start their own session. Killing the group misses them, and they outlive
// the step. Where the kernel offers a writable cgroup v2 hierarchy, each step
// runs in a cgroup that holds nothing else, under the daemon's cgroup:
// every process the step ever starts stays in it whatever session it moves
// to, and one write to cgroup.kill ends them all. The step's leader is born
// in it (clone3 with CLONE_INTO_CGROUP), so not even its first fork
// escapes. A restarted daemon finds an adopted step's cgroup from its
// processes' /proc/<pid>/cgroup, so nothing needs recording.
//
// A run's steps share one cgroup, one after the other: the first makes it,
// named after its tag (loopd-step-<run>-<seq>), and each step that ran
// hands it on to the next once everything in it is dead (offerCgroup). The
// kernel does work on a cgroup's first process: a fork into a new cgroup
// took 0.42–0.64 ms here, into one entered before 0.16–0.22 ms, and that
// fork is on the way from one step to the next. (A cgroup v2 directory
// cannot be renamed, hence the name of the step that made it.) It never
// holds two steps' processes: it is handed on only once empty, after the
// leader's exit and the kill of what is left, and the next step starts
// after that; when it does not empty, it is not handed on and the next
// step makes its own. So a step's cgroup is "its run's, with the seq of an
// earlier step" (runCgroup), and killing it after a restart, while no
// step of the run runs, kills only what the dead daemon's step left.
//
// Where there is no such hierarchy (cgroup v1 only, a read-only or
// undelegated one), the step's processes are found by the tag in their
// environment and as descendants of the leader (see stepProcesses).

// useCgroups is false in tests of the fallback without cgroups.
var useCgroups = true

// testCgroupHook, when set by a test, is called with a step's new cgroup
// before the step is started in it.
var testCgroupHook func(dir string)

// cgroupPrefix starts the name of every step cgroup; the rest is the tag
// with characters unfit for a file name replaced.
const cgroupPrefix = "loopd-step-"

// cgroupMount returns the mount point of the cgroup v2 hierarchy ("" when
// there is none): /sys/fs/cgroup on most systems, /sys/fs/cgroup/unified on
// hybrid ones.
var cgroupMount = sync.OnceValue(func() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "36 25 0:31 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		if fields := strings.Fields(pre); len(fields) >= 5 && fields[3] == "/" {
			return unescapeMount(fields[4])
		}
	}
	return ""
})

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupOf returns the cgroup v2 path of a process ("/" for the root), or
// "" when it has none or is gone.
func cgroupOf(pid string) string {
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest
		}
	}
	return ""
}

// cgroupName is the name of the cgroup directory a step makes when it
// has none of its run's to reuse (see offerCgroup).
func cgroupName(tag string) string {
	return cgroupPrefix + strings.Map(func(r rune) rune {
		if r == '/' || r == ':' || r < ' ' || r == 0x7f {
			return '-'
		}
		return r
	}, strings.TrimPrefix(tag, "loopd-step:")) // "loopd-step-<run>-<seq>"
}

// newCgroup creates the step's cgroup under the daemon's own and returns
// its path and a directory fd for clone3 (the caller closes it). It returns
// "" when cgroups cannot be used here: no v2 hierarchy, no permission, or a
// kernel without cgroup.kill (before 5.14), whose kill would need a freezer
// dance that is not worth its races.
func newCgroup(tag string) (string, int) {
	if cgroupMount() == "" || !useCgroups {
		return "", -1
	}
	for again := range 2 {
		// The parent as last looked up; looked up again when the step's
		// cgroup cannot be made there (the daemon was moved, and its old
		// cgroup removed).
		parent, kill := cgroupParent(again == 1)
		if parent == "" || kill == killMissing {
			return "", -1
		}
		dir := filepath.Join(parent, cgroupName(tag))
		// A directory left by an earlier attempt of the same step (a daemon
		// that died before removing it) holds nothing alive, or that
		// attempt's step would still be running and this one not started.
		// It is made anew: one that was killed (cgroup.kill) would kill
		// every process cloned into it on this kernel (see killedCgroup).
		// One that cannot be removed (what was killed in it has not left
		// it yet) is not used: the step runs without a cgroup, its
		// processes found by parentage and tag.
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, os.ErrExist) {
			if os.Remove(dir) != nil {
				return "", -1
			}
			err = os.Mkdir(dir, 0o755)
		}
		if err != nil {
			continue
		}
		if kill == killUnknown {
			_, err := os.Stat(filepath.Join(dir, "cgroup.kill"))
			if kill = setCgroupKill(err == nil); kill == killMissing {
				os.Remove(dir)
				return "", -1
			}
		}
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			os.Remove(dir)
			return "", -1
		}
		return dir, fd
	}
	return "", -1
}

// Whether the kernel offers cgroup.kill, once known.
const (
	killUnknown = iota
	killPresent
	killMissing
)

// stepParent is where step cgroups are made: the daemon's own cgroup, and
// whether the kernel has cgroup.kill. Both were read at every step's start,
// two files on the way from one step to the next; the kernel does not
// change, and a daemon is moved to another cgroup rarely (newCgroup looks
// again when making a step's cgroup fails).
var stepParent struct {
	mu   sync.Mutex
	dir  string // the daemon's cgroup directory; "" until looked up
	kill int
}

// cgroupParent returns the daemon's cgroup directory ("" when it has
// none), looked up now when fresh or never before, and what is known of
// cgroup.kill.
func cgroupParent(fresh bool) (string, int) {
	stepParent.mu.Lock()
	defer stepParent.mu.Unlock()
	if fresh || stepParent.dir == "" {
		stepParent.dir = ""
		if own := cgroupOf("self"); own != "" {
			stepParent.dir = filepath.Join(cgroupMount(), own)
		}
	}
	return stepParent.dir, stepParent.kill
}

func setCgroupKill(present bool) int {
	stepParent.mu.Lock()
	defer stepParent.mu.Unlock()
	stepParent.kill = killMissing
	if present {
		stepParent.kill = killPresent
	}
	return stepParent.kill
}

// A step's cgroup waits for it in prepared: the cgroup of the run's step
// before, handed on at its end, or, where that step had none, one made
// while it ran (Spec.Next; a mkdir in the cgroup file system, about 40 µs,
// off the way from one step's end to the next one's fork). A cgroup not
// taken within preparedTTL (the run ended or stopped, or its next step is
// a retry much later) is removed; its step, if it comes, makes its own.
// Removing can never take a cgroup from a step that runs in it: rmdir
// refuses a cgroup with processes.
var prepared = struct {
	mu sync.Mutex
	m  map[string]*preparedCgroup // by tag
}{m: map[string]*preparedCgroup{}}

type preparedCgroup struct {
	dir string
	fd  int
}

// preparedTTL is how long a prepared cgroup waits for its step; a
// variable for tests.
var preparedTTL = time.Minute

// prepareCgroup makes the cgroup of the step tagged tag ahead of its Start.
func prepareCgroup(tag string) {
	prepared.mu.Lock()
	_, done := prepared.m[tag]
	prepared.mu.Unlock()
	if done {
		return
	}
	dir, fd := newStepCgroup(tag)
	if fd < 0 {
		return
	}
	offerCgroup(tag, dir, fd)
}

// offerCgroup keeps the cgroup dir (and its fd) for the step tagged tag,
// for preparedTTL at most. The entry it replaces, if any, is closed, and
// its cgroup removed unless it is the same one.
func offerCgroup(tag, dir string, fd int) {
	e := &preparedCgroup{dir: dir, fd: fd}
	prepared.mu.Lock()
	old := prepared.m[tag]
	prepared.m[tag] = e
	prepared.mu.Unlock()
	if old != nil {
		unix.Close(old.fd)
		if old.dir != dir {
			os.Remove(old.dir)
		}
	}
	time.AfterFunc(preparedTTL, func() {
		prepared.mu.Lock()
		defer prepared.mu.Unlock()
		if prepared.m[tag] == e {
			delete(prepared.m, tag)
			unix.Close(e.fd)
			os.Remove(e.dir)
		}
	})
}

// stepCgroupFor returns the cgroup of the step tagged tag and a directory
// fd for clone3 (the caller closes it): the one its run's step before it
// handed on or one prepared for it (kept true), or a new one ("" and -1
// when cgroups cannot be used here).
func stepCgroupFor(tag string) (dir string, fd int, kept bool) {
	prepared.mu.Lock()
	e, ok := prepared.m[tag]
	delete(prepared.m, tag)
	prepared.mu.Unlock()
	if ok {
		return e.dir, e.fd, true
	}
	dir, fd = newStepCgroup(tag)
	return dir, fd, false
}

// emptyCgroup waits, as removeCgroup does, for a cgroup whose processes
// were killed to hold none (a killed process leaves it as it exits, zombie
// or not), and reports whether it does.
func emptyCgroup(dir string) bool {
	for range 100 {
		switch populated(dir) {
		case 0:
			return true
		case -1:
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// stepCgroup returns the directory of the step cgroup that process pid is
// in, "" when it is in none of this step's (it was started without one, or
// moved out).
func stepCgroup(pid int, tag string) string {
	cg := cgroupOf(strconv.Itoa(pid))
	mount := cgroupMount()
	if cg == "" || mount == "" || !runCgroup(filepath.Base(cg), tag) {
		return ""
	}
	return filepath.Join(mount, cg)
}

// splitTag splits a scheduler's step tag, "loopd-step:<run>:<seq>" or,
// for a fleet worker, "loopd-step:<run>:<seq>:e<epoch>", around its seq.
// ok is false for a tag of another form, whose cgroup is never shared.
func splitTag(tag string) (head, tail string, ok bool) {
	// Without allocating: it runs at every step's end.
	rest := tag
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && len(rest)-i > 2 && rest[i+1] == 'e' && digits(rest[i+2:]) {
		tail, rest = rest[i+1:], rest[:i]
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 || !digits(rest[i+1:]) {
		return "", "", false
	}
	return rest[:i], tail, true
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// sameRun reports whether two step tags are of one run (and one lease
// epoch), so that the later may run in the earlier's cgroup.
func sameRun(a, b string) bool {
	ha, ta, ok := splitTag(a)
	hb, tb, okb := splitTag(b)
	return ok && okb && ha == hb && ta == tb
}

// runCgroup reports whether the cgroup directory called name can be the
// step tagged tag's: the one it made itself (cgroupName), or one made by
// an earlier step of its run (and epoch) and handed on from step to step.
// The seq in the name is that of the step that made it; that it is a
// number and the run's part matches exactly keeps runs whose ids share a
// prefix apart.
func runCgroup(name, tag string) bool {
	if name == cgroupName(tag) {
		return true
	}
	head, tail, ok := splitTag(tag)
	if !ok {
		return false
	}
	rest, ok := strings.CutPrefix(name, cgroupName(head)+"-")
	if ok && tail != "" {
		rest, ok = strings.CutSuffix(rest, "-"+tail) // "e<epoch>"
	}
	return ok && digits(rest)
}

// runCgroups lists the cgroups under the daemon's own that can be the
// step tagged tag's (runCgroup).
func runCgroups(tag string) []string {
	mount, own := cgroupMount(), cgroupOf("self")
	if mount == "" || own == "" {
		return nil
	}
	pattern := cgroupName(tag)
	if head, _, ok := splitTag(tag); ok {
		pattern = cgroupName(head) + "-*"
	}
	dirs, _ := filepath.Glob(filepath.Join(mount, own, pattern))
	var out []string
	for _, d := range dirs {
		if runCgroup(filepath.Base(d), tag) && dirExists(d) {
			out = append(out, d)
		}
	}
	return out
}

// cgroupPids lists the processes in a cgroup.
func cgroupPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for f := range bytes.FieldsSeq(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// populated reads whether a cgroup holds a live process: 0 when it holds
// none (a process leaves it as it exits, zombie or not), 1 when it does,
// -1 when that cannot be read.
func populated(dir string) int {
	// Read at every step's end: an open, one read and a close into a
	// buffer on the stack ("populated 0\nfrozen 0\n"), not os.ReadFile's
	// stat and allocations.
	fd, err := unix.Open(dir+"/cgroup.events", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	var buf [128]byte
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	switch {
	case err != nil || n <= 0:
		return -1
	case bytes.Contains(buf[:n], []byte("populated 0")):
		return 0
	}
	return 1
}

// killCgroup kills every process in the cgroup at once; the kernel also
// catches processes forked while it kills.
func killCgroup(dir string) bool {
	return os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) == nil
}

// removeCgroup removes a step's cgroup once its processes are gone (a
// killed process leaves the cgroup as it exits, zombie or not). It gives up
// after a while: an unremovable directory is harmless, and a daemon must
// not hang on it.
func removeCgroup(dir string) {
	for range 100 {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		if !errors.Is(err, unix.EBUSY) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PruneCgroups removes the empty step cgroups under this process's cgroup:
// those of steps that ended while no daemon watched them, or whose
// processes someone else killed. A live step's cgroup holds processes, and
// removing a non-empty cgroup fails, so it stays (for adoption). It returns
// how many were removed. The daemon calls it at start.
func PruneCgroups() int {
	mount, own := cgroupMount(), cgroupOf("self")
	if mount == "" || own == "" {
		return 0
	}
	dirs, _ := filepath.Glob(filepath.Join(mount, own, cgroupPrefix+"*"))
	n := 0
	for _, d := range dirs {
		if os.Remove(d) == nil {
			n++
		}
	}
	return n
}
