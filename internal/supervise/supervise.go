// Package supervise runs loopd's steps as detached process groups that
// outlive the daemon, and re-attaches to them after a restart.
//
// A step is `/bin/sh -c <wrapper> <tag> <exits file> <reservation> <mode> <command>...` started
// in its own session (so its own process group, with no controlling
// terminal), stdin from a file, stdout and stderr appended straight to the
// step's log file: there is no pipe the daemon must drain, so the step keeps
// running when the daemon dies. The wrapper shell is the group leader; it
// runs the commands, stops at the first failure, and appends the exit
// status to the run's exits file last. The shell is needed to run a shell
// command anyway, so recording the status costs no extra program.
//
// Gate: a step may be started before the daemon has recorded it, so that
// starting its process overlaps with the database commit that records it
// (Spec.Gated). Its wrapper then waits, before anything else, for one line
// on a pipe from the daemon (Open); if the pipe closes without one — the
// daemon abandoned the step, or died before recording it — the wrapper
// exits without running a command or recording a status. So a step's
// commands never run unless the daemon says so after its row is committed,
// whatever moment the daemon dies at.
//
// Identity: a step's processes carry a tag unique to the step, in the
// leader's argv and in every process's environment ($LOOPD_STEP_TAG). The
// leader's pid, start time (clock ticks since boot) and the boot id are
// recorded when the step ends; a daemon that died before that finds the
// leader by its tag (Find). A process is only ever treated as a step's
// when its tag matches, so pid reuse cannot fool recovery.
//
// Signals: a group is only signalled while its leader is this daemon's
// unreaped child, because after that its pgid may be reused: the leader is
// observed with waitid(WNOWAIT), leftovers in its group are killed, and
// only then is it reaped. The processes of an adopted step (a child of the
// previous daemon, now of init) are signalled one by one, each pinned by a
// pidfd and checked for the tag first.
package supervise

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loopd/loopd/internal/shquote"
)

// wrapper is the shell program around a step's commands. $0 is the tag,
// $1 the exits file, $2 the offset of the step's reservation in it ("" for
// none), $3 the mode, the rest are the commands.
//
// A mode starting with "g" is gated, and three more arguments follow it:
// the log, the daemon's umask and the stdin file ("" for /dev/null). The
// wrapper opens its own log (0600, then restores the umask for the
// commands), so that creating the file — slow on some disks — happens
// while the daemon commits the step, not before the fork; if it cannot,
// it exits 124 without waiting, and the shell's message and noLog are on
// the pipe that was its output until then (see Exit.Failed). Then it
// reads a line from fd 3 (the gate) and closes it, so no command inherits
// it; at end of file it exits with 125 and records nothing (see Open and
// Abandon). Once opened, it makes sure its output is still the file at
// the log's path: a wrapper may wait at its gate for a whole step (the
// scheduler starts the next step's process while a step runs), and that
// step's commands may have removed or replaced the file meanwhile; it is
// then opened again, and a failure reported as before, on the pipe kept
// as fd 4 until then. For the same reason it enters its working directory
// (Spec.Dir) again by its path, as a process started then would; a
// directory that is gone fails the step with a recorded 126. TERM is
// ignored while it waits:
// a caught signal would end the read, and the wrapper would exit 125
// after the daemon had opened it. Once opened it takes its stdin, which
// the daemon writes during the commit too; a stdin it cannot open fails
// the step with a recorded 126 (and the shell's message in the log).
//
// In mode "s" each command runs in a subshell of the wrapper, so that
// nothing the command does can take the wrapper's place or its duty to
// record: a command that calls exit, sets its own EXIT trap, or execs
// another program (`exec claude …`) ends only its subshell, and the wrapper
// — the group's leader, which keeps the tag in its argv — records the
// status and exits last. With several commands the first that fails ends
// the step. Mode "i" is for a single command that simple() found unable to
// do any of that (a plain command line, such as the agent presets or
// `go test ./...`): the wrapper evaluates it itself, which saves a process
// per step, and an EXIT trap records its status.
//
// The status is appended as a line "<tag> exit <code>" to a file all the
// run's steps share (appending creates no file; creating one is slow on
// some disks). The line starts with a newline too, so a line cut short by
// a full disk can never hide the next one. When the append fails — the
// disk filled up while the step ran — the status is written over the
// step's reservation instead: a line "<tag> reserved" that Start appended
// while there was space, of the same length as the record, so writing it
// in place needs no new space (dd conv=notrunc). A step whose outcome is
// known is then never taken for a lost one by a daemon that restarts
// before the disk has room again, and its paid agent never runs twice.
//
// The wrapper and each subshell catch SIGTERM with a no-op trap: caught
// signals are reset to their default on exec, so the commands themselves
// still receive TERM and get the whole grace period to exit (an agent
// writes its final usage then), while the shells outlive them and the
// group's leader stays alive until they have. A command that is itself a
// shell loop ignores TERM this way and is ended by the SIGKILL that
// follows the grace period.
const wrapper = `__loopd_s=$1 __loopd_o=$2 __loopd_m=$3; shift 3
__loopd_rec() {
  printf '\n%s exit %d\n' "$0" "$1" 2>/dev/null >>"$__loopd_s" ||
  { [ -n "$__loopd_o" ] && printf '%s exit %-3d' "$0" "$1" |
    dd of="$__loopd_s" bs=1 seek="$__loopd_o" conv=notrunc 2>/dev/null; }
}
case $__loopd_m in g?)
  trap '' TERM
  umask 077
  command exec 4>&1 >>"$1" 2>&1 || { echo "` + noLog + `" >&2; exit 124; }
  IFS= read -r __loopd_g <&3 || exit 125
  exec 3<&-
  [ /dev/fd/1 -ef "$1" ] ||
    command exec 2>&4 >>"$1" 2>&1 || { echo "` + noLog + `" >&2; exit 124; }
  exec 4>&-
  umask "$2"; __loopd_i=$3; __loopd_d=$4; shift 4
  if [ -n "$__loopd_d" ] && ! cd -- "$__loopd_d"; then
    __loopd_rec 126; exit 126
  fi
  if [ -n "$__loopd_i" ] && ! command exec <"$__loopd_i"; then
    __loopd_rec 126; exit 126
  fi
  __loopd_m=${__loopd_m#g};;
esac
trap : TERM
if [ "$__loopd_m" = i ]; then
  trap '__loopd_rec $?' EXIT
  eval "$1"
  exit
fi
__loopd_ec=0
for __loopd_c do
  [ $# -gt 1 ] && printf '\n$ %s\n' "$__loopd_c"
  (trap : TERM; eval "$__loopd_c"); __loopd_ec=$?
  [ $__loopd_ec -eq 0 ] || break
done
__loopd_rec $__loopd_ec
exit $__loopd_ec`

// guard is the part of a guarded wrapper (Spec.Guard) that starts, once
// the gate is open, a process that kills the step's group when the
// worker's deadline in $__loopd_f passes. It runs in the group (the
// wrapper's subshell) with no gate and no stdin, and ends with the wrapper
// ($$ in a subshell is the wrapper's pid) or with the group.
//
// It looks at the deadline when it is due, and at least every
// guardEvery seconds: a worker only ever moves its deadline forward, so
// the kill comes as soon after the deadline as with a look every second
// (within a second of it: the deadline and date are whole seconds), and a
// deadline moved back (a clock set back, a test) is seen within
// guardEvery. Each look forks date and sleep — /bin/sh is dash on Debian,
// with neither a clock nor a sleep of its own — and a look every second
// cost each fleet step about 2 ms of CPU a second (BENCHMARKS.md, "The
// step overhead, third pass").
const guard = `( exec 3<&- </dev/null
  while kill -0 $$ 2>/dev/null; do
    __loopd_d=0; read -r __loopd_d <"$__loopd_f" 2>/dev/null
    __loopd_n=$(date +%s)
    [ "$__loopd_n" -lt "${__loopd_d:-0}" ] 2>/dev/null || kill -KILL 0
    __loopd_n=$((__loopd_d - __loopd_n))
    [ "$__loopd_n" -le ` + guardEvery + ` ] || __loopd_n=` + guardEvery + `
    sleep "$__loopd_n"
  done ) &
`

// guardEvery is the longest the guard sleeps between two looks at the
// deadline, in seconds.
const guardEvery = "5"

// guardAt is where the guard goes in the wrapper: after the gate, before
// the commands.
const guardAt = "trap : TERM\nif [ \"$__loopd_m\" = i ]"

// guarded is the wrapper with a guard on the deadline file path.
func guarded(path string) string {
	i := strings.Index(wrapper, guardAt)
	return wrapper[:i] + "__loopd_f=" + shquote.Quote(path) + "\n" + guard + wrapper[i:]
}

// noLog is what a gated wrapper prints, after the shell's own message,
// when it cannot open its log.
const noLog = "loopd: the step's log cannot be opened"

// pidfdOpen is unix.PidfdOpen; a test replaces it to exercise systems
// without pidfds.
var pidfdOpen = unix.PidfdOpen

// TagEnv is the environment variable that carries a step's tag to every
// process of the step, so that its processes can be recognised (and only
// they signalled) after a daemon restart.
const TagEnv = "LOOPD_STEP_TAG"

// Spec describes a step's process.
type Spec struct {
	Dir        string   // working directory (the workspace)
	Commands   []string // shell commands run in order; the first that fails ends the step
	Env        []string // the complete environment
	StdinPath  string   // file to read stdin from; "" means /dev/null
	LogPath    string   // stdout and stderr are appended here (created 0600)
	StatusPath string   // the exits file: the wrapper appends "<tag> exit <code>" when the commands end (shared by a run's steps)
	Tag        string   // unique per step; placed in argv and in $LOOPD_STEP_TAG to recognise its processes later
	// Gated starts the step's wrapper waiting for Open before it runs
	// the commands; Abandon ends it without running them. The wrapper
	// then creates LogPath itself, before it waits, and opens StdinPath
	// only once opened: that file need not exist before Open.
	Gated bool
	// Guard, when set, is a fleet worker's deadline file: a line with a
	// Unix time in seconds, moved forward after each renewal of the
	// worker's leases. Once the step runs, a guard process in its group
	// reads it every second and kills the group (SIGKILL) when the time
	// has passed or the file cannot be read, so that a worker that dies
	// or freezes cannot leave an agent running after its run was taken
	// over. "" (the embedded daemon): no guard, nothing extra runs.
	Guard string
	// Next is the tag of the run's step that is to take this one's
	// cgroup once this one has ended ("": none), or, when this one has
	// none, for which one is made while this step runs (PrepareNext). The
	// scheduler names the step after next: the next one's process is
	// started while this one runs.
	Next string
}

// Identity identifies a step's leader process across daemon restarts.
type Identity struct {
	Pid        int
	StartTicks int64  // /proc/<pid>/stat starttime
	BootID     string // /proc/sys/kernel/random/boot_id
}

// Exit is how a step's process ended.
type Exit struct {
	Code   int            // the commands' exit code; -1 when unknown
	Signal syscall.Signal // the leader was killed by this signal (0 = it exited)
	// Recorded is true when Code is the commands' own exit status: the
	// wrapper exited normally (it records before it exits), or, for an
	// adopted step, its status line was found in the exits file.
	Recorded bool
	// Failed says why a step could not run its commands at all (its log
	// could not be created); it ran nothing, and the step has failed.
	Failed string
}

// String describes the exit for humans.
func (e Exit) String() string {
	switch {
	case e.Failed != "":
		return e.Failed
	case e.Signal != 0:
		return "killed by " + signalName(e.Signal)
	case e.Code >= 0:
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return "exit status unknown"
}

// ErrGone means an adopted process is no longer running (or is not ours).
var ErrGone = errors.New("process is gone")

// Process is a running (or ended) step process.
type Process struct {
	Identity
	tag        string
	statusPath string

	mu     sync.Mutex
	reaped bool // after this the pgid must not be signalled
	done   chan struct{}
	exit   Exit

	cmd     *exec.Cmd // for children of this daemon
	pidfd   int       // for adopted processes with pidfd support; -1 otherwise
	adopted bool      // started by an earlier daemon
	cgroup  string    // the step's cgroup directory; "" when it has none (see cgroup.go)
	// killedCgroup is set once cgroup.kill was written for the step's
	// cgroup. Such a cgroup is not handed on: this kernel (6.18) kills
	// every process later cloned into a cgroup that was ever killed
	// (CLONE_INTO_CGROUP compares the kill count of the parent's cgroup
	// with the target's), so the next step would die at its start.
	killedCgroup bool
	emptyCgroup  bool // the cgroup was found empty after the leader's exit

	next   string   // Spec.Next
	gated  bool     // started with Spec.Gated
	gate   *os.File // the gate's write end until Open or Abandon
	logErr *os.File // the wrapper's output until it opens its log (see Exit.Failed)
	opened bool     // Open said go: the wrapper's exit status is the commands'
}

// Start launches a step.
func Start(spec Spec) (*Process, error) {
	if len(spec.Commands) == 0 {
		return nil, errors.New("start step: no command")
	}
	mode := "s"
	if len(spec.Commands) == 1 && simple(spec.Commands[0]) {
		mode = "i"
	}
	at, err := reserve(spec.StatusPath, spec.Tag)
	if err != nil {
		return nil, err
	}
	script := wrapper
	if spec.Guard != "" {
		script = guarded(spec.Guard)
	}
	args := []string{"/bin/sh", "-c", script, spec.Tag, spec.StatusPath, at}
	var out, stdin, gateR, gateW, logErr *os.File
	defer func() { closeAll(out, stdin, gateR) }() // the child has its own copies
	if spec.Gated {
		// The wrapper opens its log and its stdin itself (see wrapper);
		// until it has, its output goes to a pipe read if it fails.
		if gateR, gateW, err = pipe(); err != nil {
			return nil, fmt.Errorf("start step: gate: %w", err)
		}
		if logErr, out, err = pipe(); err != nil {
			gateW.Close()
			return nil, fmt.Errorf("start step: %w", err)
		}
		// Its working directory, entered again once opened: the
		// directory at that path may have been replaced while it waited.
		dir := ""
		if filepath.IsAbs(spec.Dir) {
			dir = spec.Dir
		}
		args = append(args, "g"+mode, spec.LogPath, umask, spec.StdinPath, dir)
		spec.StdinPath = ""
	} else {
		if out, err = os.OpenFile(spec.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
			return nil, fmt.Errorf("open step log: %w", err)
		}
		args = append(args, mode)
	}
	stdinPath := spec.StdinPath
	if stdinPath == "" {
		stdinPath = os.DevNull
	}
	if stdin, err = os.Open(stdinPath); err != nil {
		closeAll(gateW, logErr)
		return nil, fmt.Errorf("open step stdin: %w", err)
	}
	newCmd := func() *exec.Cmd {
		cmd := &exec.Cmd{
			Path:   "/bin/sh",
			Args:   append(args, spec.Commands...),
			Dir:    spec.Dir,
			Env:    append(spec.Env[:len(spec.Env):len(spec.Env)], TagEnv+"="+spec.Tag),
			Stdin:  stdin,
			Stdout: out,
			Stderr: out,
			// Setsid: own session and process group, no controlling
			// terminal, so neither the daemon's death nor a Ctrl+C in its
			// terminal reaches the step.
			SysProcAttr: &syscall.SysProcAttr{Setsid: true},
		}
		if gateR != nil {
			cmd.ExtraFiles = []*os.File{gateR} // fd 3
		}
		return cmd
	}
	cmd := newCmd()
	cg, cgfd, kept := stepCgroupFor(spec.Tag)
	if cgfd >= 0 && testCgroupHook != nil {
		testCgroupHook(cg)
	}
	if cgfd >= 0 {
		// Born in its cgroup: not even the leader's first fork escapes.
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgfd
	}
	err = startRegistered(cmd)
	if err != nil && kept {
		// The cgroup kept for it was removed meanwhile (PruneCgroups of
		// another daemon under the same cgroup removes empty ones): a new
		// one, as when none was kept.
		unix.Close(cgfd)
		if cg, cgfd = newStepCgroup(spec.Tag); cgfd >= 0 {
			cmd = newCmd()
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgfd
			err = startRegistered(cmd)
		}
	}
	if err != nil && cgfd >= 0 {
		// clone3 refused (a seccomp filter, an old kernel, a cgroup
		// removed meanwhile): without the cgroup, the step's processes are
		// found by tag and parentage. A Cmd starts only once: a new one.
		os.Remove(cg)
		cg = ""
		cmd = newCmd()
		err = startRegistered(cmd)
	}
	if cgfd >= 0 {
		unix.Close(cgfd)
	}
	if err != nil {
		closeAll(gateW, logErr)
		return nil, fmt.Errorf("start step: %w", err)
	}
	p := &Process{
		tag:        spec.Tag,
		statusPath: spec.StatusPath,
		done:       make(chan struct{}),
		cmd:        cmd,
		pidfd:      -1,
		gated:      spec.Gated,
		next:       spec.Next,
		gate:       gateW,
		logErr:     logErr,
		cgroup:     cg,
	}
	p.Pid = cmd.Process.Pid
	p.BootID = BootID()
	go p.waitChild()
	return p, nil
}

// newStepCgroup is newCgroup; a test replaces it to make the start in a
// cgroup fail.
var newStepCgroup = newCgroup

// reservedWord fills a reservation: as long as " exit <code>" with the
// code padded to three digits, which is what the wrapper writes over it.
const reservedWord = " reserved"

// ErrNoSpace means a step could not be started because the file system
// of its exits file is full: nothing of it ran.
var ErrNoSpace = errors.New("no space left for the step's exit status")

// reserve appends the step's reservation to the exits file (see wrapper)
// and returns its offset for the wrapper.
func reserve(path, tag string) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return "", fmt.Errorf("start step: %w: %v", ErrNoSpace, err)
		}
		return "", fmt.Errorf("start step: open exits file: %w", err)
	}
	defer f.Close()
	line := "\n" + tag + reservedWord + "\n"
	if _, err := f.WriteString(line); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return "", fmt.Errorf("start step: %w: %v", ErrNoSpace, err)
		}
		return "", fmt.Errorf("start step: reserve exit status: %w", err)
	}
	end, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return "", fmt.Errorf("start step: reserve exit status: %w", err)
	}
	return strconv.FormatInt(end-int64(len(line))+1, 10), nil
}

// pipe returns a close-on-exec pipe, so no other step inherits either
// end. Its ends are blocking files, kept out of Go's poller (which costs
// system calls to enter and leave): the daemon only ever writes one byte
// to a gate, and reads a wrapper's output only once the wrapper has
// exited.
func pipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// umask is the daemon's file mode creation mask, which a gated step's
// wrapper restores for its commands after creating its log 0600. It is
// read once, before the daemon creates any file (setting the mask is the
// only way to read it, and it is process-wide).
var umask = func() string {
	m := unix.Umask(0o077)
	unix.Umask(m)
	return fmt.Sprintf("%04o", m)
}()

// Open lets a gated step run its commands. It fails when the step is not
// gated, was opened or abandoned already, or its wrapper is gone.
func (p *Process) Open() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate == nil {
		return errors.New("open step: not a waiting gated step")
	}
	_, err := p.gate.Write([]byte("\n"))
	p.gate.Close()
	p.gate = nil
	if err != nil {
		return fmt.Errorf("open step: %w", err)
	}
	p.opened = true
	return nil
}

// PrepareNext makes the cgroup of the step expected after this one
// (Spec.Next), to be called once this one is opened: while it runs, the
// daemon has nothing else to do for its run. A step that runs in a cgroup
// hands that one on at its end instead (see waitChild), and nothing is
// made.
func (p *Process) PrepareNext() {
	p.mu.Lock()
	next, handOn := p.next, p.cgroup != "" && sameRun(p.tag, p.next)
	p.mu.Unlock()
	if next != "" && !handOn {
		prepareCgroup(next)
	}
}

// Abandon ends a gated step that was not opened, without its commands
// having run, and returns once its process is reaped.
func (p *Process) Abandon() {
	p.mu.Lock()
	if p.gate != nil {
		p.gate.Close()
		p.gate = nil
	}
	p.mu.Unlock()
	<-p.done
}

// Ident returns the process's identity; for a child of this daemon its
// start time is known once the step has ended (it is read while the step
// runs, off the daemon's path from one step to the next).
func (p *Process) Ident() Identity {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Identity
}

// waitChild observes the leader's exit without reaping it, kills whatever
// the step left running in its group, then reaps.
func (p *Process) waitChild() {
	// The child exists until reaped, so its start time is readable until
	// then; read now, while the step runs.
	ticks, _ := StartTicks(p.Pid)
	p.mu.Lock()
	p.StartTicks = ticks
	p.mu.Unlock()
	// Wait for the exit without holding a thread (see waitPidfd); where
	// there are no pidfds, the waitid below blocks until then.
	if fd, err := pidfdOpen(p.Pid, 0); err == nil {
		waitPidfd(fd)
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	p.mu.Lock()
	// The leader is a zombie: its pgid cannot have been reused. Anything
	// still in the group is an orphan of the step (a background job the
	// agent left behind); it must not outlive the step. Nor must what left
	// the group: in the step's cgroup, or carrying its tag.
	if p.cgroup == "" && isSubreaper.Load() {
		// Found by parentage (ownedProcesses): the group is stopped
		// first, so that its processes neither start nor hand over more
		// while they are looked for (what died meanwhile is found by the
		// next search: signalOwned).
		_ = unix.Kill(-p.Pid, unix.SIGSTOP)
		p.killEscaped(unix.SIGKILL)
		_ = unix.Kill(-p.Pid, unix.SIGKILL)
	} else {
		_ = unix.Kill(-p.Pid, unix.SIGKILL)
		p.killEscaped(unix.SIGKILL)
	}
	_ = p.cmd.Wait() // the exit status is in ProcessState
	unregisterLeader(p.Pid)
	p.reaped = true
	// The wrapper exits with its commands' status once it has recorded
	// it; killed by a signal, or at a gate never opened, it recorded
	// nothing.
	p.exit = exitFromState(p.cmd.ProcessState)
	p.exit.Recorded = p.exit.Signal == 0 && (!p.gated || p.opened)
	if p.gate != nil {
		p.gate.Close() // it ended at its gate: there is nothing left to open
		p.gate = nil
	}
	if p.logErr != nil {
		if p.exit.Code == 124 {
			// Either the commands' own 124 (their output went to the
			// log, none here) or the wrapper could not open its log.
			msg, _ := io.ReadAll(io.LimitReader(p.logErr, 64<<10))
			if why, ok := logFailure(msg); ok {
				p.exit = Exit{Code: -1, Failed: why}
			}
		}
		p.logErr.Close()
		p.logErr = nil
	}
	// A step that ran hands its cgroup on to its run's next step (see
	// cgroup.go); one abandoned at its gate does not: its step is started
	// again under the same tag.
	handOn := p.opened && !p.killedCgroup && p.next != "" && sameRun(p.tag, p.next)
	empty := p.emptyCgroup
	p.mu.Unlock()
	if p.cgroup != "" {
		p.releaseCgroup(handOn, empty)
	}
	close(p.done)
}

// releaseCgroup removes the ended step's cgroup once the killed leftovers
// have left it, or, when handOn, keeps it for the run's next step: only
// once nothing is left in it, so that a leftover of this step that is slow
// to die is never taken for a process of the next.
func (p *Process) releaseCgroup(handOn, empty bool) {
	if handOn && (empty || emptyCgroup(p.cgroup)) {
		fd, err := unix.Open(p.cgroup, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == nil {
			offerCgroup(p.next, p.cgroup, fd)
			return
		}
	}
	removeCgroup(p.cgroup)
}

// killEscaped sends sig to the step's processes outside its process group
// (the caller signals the group as a whole): with SIGKILL and a cgroup, to
// everything in the cgroup at once through cgroup.kill, the group included;
// otherwise to each such process. The caller holds p.mu.
//
// With a cgroup, only its members are looked at: nothing of the step can
// leave it (moving a process out takes privileges an agent's tools do not
// use), and reading one file beats scanning every process on the machine
// at the end of every step.
func (p *Process) killEscaped(sig syscall.Signal) int {
	if p.cgroup != "" {
		if sig == unix.SIGKILL {
			if populated(p.cgroup) == 0 {
				// Nothing to kill: and the cgroup stays fit for the run's
				// next step (see killedCgroup). It can be empty only once
				// its leader has exited, and then nothing can enter it but
				// a step this daemon starts in it.
				p.emptyCgroup = true
				return 0
			}
			if killCgroup(p.cgroup) {
				p.killedCgroup = true
				return 1
			}
		}
		return signalProcs(cgroupMembers(p.cgroup, p.Pid), sig)
	}
	if !p.adopted && isSubreaper.Load() {
		if n, ok := p.signalOwned(sig); ok {
			return n
		}
	}
	return signalProcs(stepProcesses(p.Pid, p.tag, "", p.StartTicks), sig)
}

// signalOwned sends sig to the step's processes found by parentage
// (ownedProcesses), again and again until a search finds nothing new: a
// process that dies during a search (killed by the last pass, or exiting
// on the SIGTERM of a stop) hands its children to the daemon, where the
// next search finds them. It reports false, having signalled nothing, when
// the daemon's orphans cannot be listed reliably.
func (p *Process) signalOwned(sig syscall.Signal) (int, bool) {
	type identity struct {
		pid   int
		start int64
	}
	done := map[identity]bool{}
	n := 0
	for range 5 {
		procs, ok := ownedProcesses(p.Pid, p.tag, p.StartTicks)
		if !ok {
			if len(done) == 0 {
				return 0, false
			}
			break
		}
		var fresh []procInfo
		for _, pi := range procs {
			if id := (identity{pi.pid, pi.start}); !done[id] {
				done[id] = true
				fresh = append(fresh, pi)
			}
		}
		if len(fresh) == 0 {
			break
		}
		n += signalProcs(fresh, sig)
	}
	return n, true
}

// logFailure reads what a gated wrapper wrote before it had its log: a
// failure to open the log ends with noLog. The shell may have written
// other things there first (bash warns about a missing locale), so
// output alone, with a command's own exit 124, says nothing.
func logFailure(out []byte) (string, bool) {
	why, ok := strings.CutSuffix(strings.TrimSpace(string(out)), noLog)
	if !ok {
		return "", false
	}
	return "could not create the step's log: " + strings.TrimSpace(why), true
}

func exitFromState(ps *os.ProcessState) Exit {
	if ps == nil {
		return Exit{Code: -1}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return Exit{Code: -1, Signal: ws.Signal()}
	}
	return Exit{Code: ps.ExitCode()}
}

// settle reads an adopted step's recorded status and marks it done.
func (p *Process) settle() {
	if code, ok := ReadStatus(p.statusPath, p.tag); ok {
		p.mu.Lock()
		p.exit = Exit{Code: code, Recorded: true}
		p.mu.Unlock()
	}
	close(p.done)
}

// Adopt re-attaches to a step started by an earlier daemon. It returns
// ErrGone when no process with that identity and tag is running.
func Adopt(id Identity, tag, statusPath string) (*Process, error) {
	if id.Pid <= 0 {
		return nil, ErrGone
	}
	p := &Process{Identity: id, tag: tag, statusPath: statusPath, done: make(chan struct{}), pidfd: -1, adopted: true}
	fd, err := pidfdOpen(id.Pid, 0)
	switch {
	case err == nil:
		// Verify identity only after the pidfd pins the process: from here
		// on the pid cannot be recycled under us.
		if !Matches(id, tag) {
			unix.Close(fd)
			return nil, ErrGone
		}
		p.pidfd = fd
		p.cgroup = stepCgroup(id.Pid, tag)
		go p.waitAdopted()
	case errors.Is(err, unix.ESRCH):
		return nil, ErrGone
	default:
		// No pidfds here (an old kernel, a seccomp filter, gVisor). A live
		// step must still never be taken for a lost one — that would run
		// a second agent — so watch its identity instead.
		if !Matches(id, tag) {
			return nil, ErrGone
		}
		p.cgroup = stepCgroup(id.Pid, tag)
		go p.pollAdopted()
	}
	return p, nil
}

func (p *Process) waitAdopted() {
	waitPidfd(p.pidfd)
	p.adoptedExited()
}

// pollAdopted is waitAdopted without a pidfd: the leader has ended when
// its identity no longer matches (gone, a zombie, or its pid reused).
func (p *Process) pollAdopted() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for range t.C {
		if !Matches(p.Identity, p.tag) {
			break
		}
	}
	p.adoptedExited()
}

func (p *Process) adoptedExited() {
	p.mu.Lock()
	// Not our child: init reaps it, so its pgid is off limits from now on.
	// Whatever the step left running is found by its tag and killed one by
	// one, each pinned by a pidfd first.
	p.reaped = true
	p.exit = Exit{Code: -1}
	p.mu.Unlock()
	signalTagged(p.Pid, p.tag, unix.SIGKILL)
	p.mu.Lock()
	p.killEscaped(unix.SIGKILL)
	p.mu.Unlock()
	if p.cgroup != "" {
		removeCgroup(p.cgroup)
	}
	p.settle()
}

// Done is closed when the step's leader has ended and its outcome is known.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit returns how the process ended; valid after Done is closed.
func (p *Process) Exit() Exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Signal sends sig to the step's processes: to its whole process group
// while this daemon holds its unreaped leader; for an adopted step, to
// each process of the group that carries the step's tag (a pgid is only
// safe to signal while its leader is known not to be reaped). It reports
// whether anything was signalled.
func (p *Process) Signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return false
	}
	// The processes that left the group get the same signal, and so the
	// same grace: a background server the agent started in its own
	// session is asked to stop before it is killed.
	n := p.killEscaped(sig)
	if p.adopted {
		return signalTagged(p.Pid, p.tag, sig)+n > 0
	}
	return unix.Kill(-p.Pid, sig) == nil || n > 0
}

// Terminate stops the step: SIGTERM to its group, then SIGKILL after grace
// if the leader has not ended. It returns when the process is done.
func (p *Process) Terminate(grace time.Duration) {
	if !p.Signal(unix.SIGTERM) {
		<-p.done
		return
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
	}
	p.Signal(unix.SIGKILL)
	<-p.done
}

// signalName is a signal's name, such as "SIGKILL" (syscall.Signal's String
// is a description: "killed", which read "killed by killed").
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}
