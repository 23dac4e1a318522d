package supervise

import (
	"context"
	"os"
	"time"
)

// Limits bound a step while it runs.
type Limits struct {
	Deadline    time.Time     // the step is stopped at this time; zero = none
	IdleTimeout time.Duration // the step is stopped after this long without new output; 0 = none
	LogPath     string        // where its output goes (watched for idleness)
	// Since is when the step started. An adopted step's idle clock starts
	// at its log's last change, but never before this: the log of a step
	// whose process was started ahead of it exists, unchanged, from
	// before it started (a whole step earlier).
	Since time.Time
	Grace time.Duration // between SIGTERM and SIGKILL; default 5s
	// OnKill, when set, is called before Watch stops the step for a limit
	// or a cancel, with the reason: the caller records its intent first,
	// so that a daemon that dies during the kill still knows afterwards
	// why the step ended.
	OnKill func(Ending)
	// Detach, when closed, makes Watch return Detached at once and leave
	// the process alone: the daemon is shutting down and the step goes on
	// for the next daemon to adopt.
	Detach <-chan struct{}
	// Check, when set, is called every CheckEvery while the step runs, on
	// Watch's goroutine (with a thousand runs, a goroutine of its own per
	// step would be a thousand more stacks). It returns true when the agent
	// ended its turn a while ago and its process still runs (on a
	// background job): Watch stops what is left of the step and returns
	// Lingered.
	Check      func(now time.Time) bool
	CheckEvery time.Duration
}

// Ending says why Watch returned.
type Ending int

const (
	Exited   Ending = iota // the step's commands ended by themselves
	TimedOut               // Limits.Deadline passed; the step was stopped
	Idle                   // no output for Limits.IdleTimeout; the step was stopped
	Canceled               // ctx was canceled; the step was stopped
	Detached               // Limits.Detach was closed; the step is still running
	Lingered               // Limits.TurnEnded was closed; what was left of the step was stopped
)

// Watch waits for the process to end while enforcing limits. When ctx is
// canceled or a limit is hit it terminates the step's process group
// (SIGTERM, grace, SIGKILL) and waits for it.
func (p *Process) Watch(ctx context.Context, l Limits) Ending {
	if l.Grace <= 0 {
		l.Grace = 5 * time.Second
	}
	var deadline <-chan time.Time
	if !l.Deadline.IsZero() {
		t := time.NewTimer(time.Until(l.Deadline))
		defer t.Stop()
		deadline = t.C
	}
	var idleTick <-chan time.Time
	var lastSize int64 = -1
	var lastChange time.Time
	if l.IdleTimeout > 0 {
		// Output goes straight to the file, so idleness is observed by its
		// size; the poll interval is a small fraction of the timeout.
		every := min(max(l.IdleTimeout/20, 50*time.Millisecond), time.Second)
		tk := time.NewTicker(every)
		defer tk.Stop()
		idleTick = tk.C
		lastChange = time.Now()
		if fi, err := os.Stat(l.LogPath); err == nil {
			lastSize = fi.Size()
			if p.adopted {
				// Started by an earlier daemon: its last output may be
				// long before now. A step of this daemon has been idle
				// at most since now, whatever its log file's age (a
				// gated step's log exists before the step may run).
				lastChange = fi.ModTime()
				if lastChange.Before(l.Since) {
					lastChange = l.Since
				}
			}
		}
	}
	var checkTick <-chan time.Time
	if l.Check != nil {
		tk := time.NewTicker(max(l.CheckEvery, 10*time.Millisecond))
		defer tk.Stop()
		checkTick = tk.C
	}
	for {
		select {
		case <-p.done:
			return Exited
		case <-l.Detach:
			if p.ended() {
				return Exited
			}
			if ctx.Err() != nil {
				// Stopped and detached at once (daemon stop
				// --kill-steps): the stop wins.
				l.kill(p, Canceled)
				return Canceled
			}
			return Detached
		case <-ctx.Done():
			if p.ended() {
				return Exited
			}
			l.kill(p, Canceled)
			return Canceled
		case now := <-checkTick:
			if !l.Check(now) {
				continue
			}
			if p.ended() {
				return Exited
			}
			l.kill(p, Lingered)
			return Lingered
		case <-deadline:
			if p.ended() {
				return Exited
			}
			l.kill(p, TimedOut)
			return TimedOut
		case now := <-idleTick:
			if fi, err := os.Stat(l.LogPath); err == nil && fi.Size() != lastSize {
				lastSize, lastChange = fi.Size(), now
				continue
			}
			if now.Sub(lastChange) >= l.IdleTimeout && !p.ended() {
				l.kill(p, Idle)
				return Idle
			}
		}
	}
}

// ended reports, without blocking, whether the process is done; a limit
// that fires in the same instant as a natural exit must not turn it into a
// kill. When the leader has exited but the goroutine that waits for it
// has not run yet — a daemon frozen (SIGSTOP) past a limit wakes to find
// both the exit and the timer ready — it waits for that goroutine: the
// step ended by itself, before the limit was noticed.
func (p *Process) ended() bool {
	select {
	case <-p.done:
		return true
	default:
	}
	p.mu.Lock()
	child := !p.adopted && !p.reaped && p.cmd != nil
	p.mu.Unlock()
	var gone bool
	if child {
		gone = exitedUnreaped(p.Pid)
	} else if p.adopted {
		gone = !Matches(p.Identity, p.tag)
	}
	if gone {
		<-p.done
	}
	return gone
}

func (l Limits) kill(p *Process, why Ending) {
	if l.OnKill != nil {
		l.OnKill(why)
	}
	p.Terminate(l.Grace)
}
