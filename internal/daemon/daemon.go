// Package daemon is loopd's process lifecycle and HTTP API: it takes the
// home's lock, opens the database, recovers runs, serves the JSON API on
// an owner-only Unix socket, and shuts down promptly, leaving running steps
// for the next daemon to adopt.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/dashboard"
	"github.com/loopd/loopd/internal/dashsource"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/fleet"
	"github.com/loopd/loopd/internal/homeguard"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/metrics"
	"github.com/loopd/loopd/internal/notify"
	"github.com/loopd/loopd/internal/scheduler"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
	"github.com/loopd/loopd/internal/tcpguard"
	"github.com/loopd/loopd/internal/tokens"
)

// Options configure the daemon.
type Options struct {
	Home              string // LOOPD_HOME
	Socket            string // default Home/loopd.sock
	MaxConcurrentRuns int
	Logger            *zap.Logger
	Version           string
	// DebugConditions logs every stop-condition evaluation (--log-level debug).
	DebugConditions bool
	// Grace is the time between SIGTERM and SIGKILL when a step is stopped.
	Grace time.Duration
	// RetryBackoff is how long a run whose runner hit an internal error
	// waits before trying again; default 5s.
	RetryBackoff time.Duration
	// APIBackoff is the first wait of a run whose model API is unavailable;
	// it doubles per failed attempt up to 30 times itself. Default 1m.
	APIBackoff time.Duration
	// LogFile, when set, also receives the logs, through a core built by
	// LogCore. It is opened only after the lock is taken, so a second
	// daemon that refuses to start writes nothing.
	LogFile string
	LogCore func(zapcore.WriteSyncer) zapcore.Core
	// HTTPAddr, when set, also serves the API over TCP on this address,
	// requiring the bearer token in LOOPD_HOME/http.token. Only loopback
	// addresses unless HTTPAllowRemote.
	HTTPAddr        string
	HTTPAllowRemote bool
	// DashboardCodeTTL is how long a dashboard login code stays valid
	// (dashboard.CodeTTL when 0).
	DashboardCodeTTL time.Duration
	// NotifyBackoff is the delay before a failed webhook's second attempt,
	// doubled for each further one (default 2s).
	NotifyBackoff time.Duration
	// NotifyCommandTimeout bounds a run's notify_command (default
	// notify.DefaultCommandTimeout).
	NotifyCommandTimeout time.Duration
	// Fleet, when set, stores everything in a shared PostgreSQL database
	// and makes the daemon a fleet worker or API node (docs/fleet.md).
	Fleet *fleet.Node
	// FollowPoll is how often a node on a PostgreSQL store re-reads the
	// event log when no notification came (storage.DefaultFollowPoll).
	FollowPoll time.Duration
	// OnActiveRuns, when set, is told the number of runs with a runner
	// each time it changes (scheduler.Options.OnActive).
	OnActiveRuns func(n int)
}

// Daemon is a running loopd.
type Daemon struct {
	opts    Options
	log     *zap.Logger
	store   *storage.Store
	bus     *events.Bus
	sched   *scheduler.Scheduler
	notify  *notify.Notifier
	started time.Time

	token string // bearer token of the TCP listener, "" without one

	dash     *dashboard.Server // the web dashboard, served on the TCP listener
	httpAddr string            // host:port of the TCP listener for login URLs, "" without one
	tcpAddr  string            // the address the TCP listener is bound to, "" without one
	// noDashboard says why the TCP listener serves no dashboard (a
	// loopback address other than 127.0.0.1 and ::1), nil when it does.
	noDashboard error

	stopOnce  sync.Once
	stopCh    chan struct{} // closed by POST /v1/daemon/stop
	killSteps bool
	closing   chan struct{} // closed when shutdown begins, whatever asked for it: ends streams

	lander *landing.Lander // land, diff and clean of runs' branches and worktrees
	tokens *tokens.Service // users' bearer tokens (api_tokens)

	stepGap prometheus.Histogram // loopd_step_gap_seconds (metrics.NewStepGap)
	ahead   metrics.StepsAhead   // loopd_steps_started_ahead_total (metrics.NewStepsAhead)

	busStart int64 // the event seq the bus started at
}

// Run runs the daemon until ctx is done or a client asks it to stop.
func Run(ctx context.Context, opts Options) error {
	if opts.Home == "" {
		return errors.New("no home directory: set LOOPD_HOME")
	}
	if opts.Socket == "" {
		opts.Socket = filepath.Join(opts.Home, "loopd.sock")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	// A home another user could change is refused before anything is
	// written to it: its owner could swap http.token or the database.
	if err := homeguard.Check(opts.Home, opts.Socket); err != nil {
		return err
	}
	// Only create the home before taking the lock: a second daemon that
	// is refused must change nothing, not even the home's modes.
	if err := os.MkdirAll(opts.Home, 0o700); err != nil {
		return fmt.Errorf("create LOOPD_HOME %s: %w", opts.Home, err)
	}
	lockFile, err := homeguard.Lock(opts.Home, opts.Logger.Named("daemon"))
	if err != nil {
		return err
	}
	defer lockFile.Close()
	// Close the home to others first, then check it again: while it was
	// open (an existing home of mode 0777), another user could have added
	// an entry after the first check (runs/ as a symlink to a directory of
	// ours, whose mode homeguard.Prepare would change). Nothing else is written
	// before that second check.
	if err := homeguard.Tighten(opts.Home); err != nil {
		return err
	}
	if err := homeguard.Check(opts.Home, opts.Socket); err != nil {
		if he := (*homeguard.OwnerError)(nil); errors.As(err, &he) {
			he.Wrote = "loopd.lock was taken and the home made owner-only; no token, database or socket was written"
		}
		return err
	}
	if err := homeguard.Prepare(opts.Home); err != nil {
		return err
	}
	if opts.LogFile != "" && opts.LogCore != nil {
		f, err := homeguard.OpenLogFile(opts.LogFile)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.Logger = zap.New(zapcore.NewTee(opts.Logger.Core(), opts.LogCore(zapcore.Lock(f))))
	}

	d := &Daemon{opts: opts, log: opts.Logger.Named("daemon"), started: time.Now(),
		stopCh: make(chan struct{}), closing: make(chan struct{})}
	d.store, err = d.openStore(ctx)
	if err != nil {
		return err
	}
	defer d.store.Close()
	seq, err := d.store.LastEventSeq(ctx)
	if err != nil {
		return fmt.Errorf("read event log: %w", err)
	}
	d.tokens = tokens.New(d.store, d.log)
	d.bus = events.NewBus(seq)
	d.busStart = seq
	d.store.SetNotifyRuns(d.bus.PublishRuns)
	// Orphans of steps become the daemon's children, which it reaps: no
	// zombie piles up under a PID 1 that does not reap.
	if err := supervise.BecomeSubreaper(ctx); err != nil {
		d.log.Warn("orphans of steps go to init", zap.Error(err))
	}
	if n := supervise.PruneCgroups(); n > 0 {
		d.log.Info("removed the empty cgroups of ended steps", zap.Int("count", n))
	}
	d.stepGap = metrics.NewStepGap()
	d.ahead = metrics.NewStepsAhead()
	d.sched = scheduler.New(scheduler.Options{
		Store: d.store, Home: opts.Home, MaxConcurrent: opts.MaxConcurrentRuns, Logger: opts.Logger,
		Grace: opts.Grace, DebugConditions: opts.DebugConditions, RetryBackoff: opts.RetryBackoff,
		APIBackoff: opts.APIBackoff, OnStepGap: func(gap time.Duration) { d.stepGap.Observe(gap.Seconds()) },
		OnAhead:  d.ahead.Observe,
		Fleet:    d.schedulerFleet(),
		OnActive: opts.OnActiveRuns,
	})
	d.lander = landing.New(landing.Options{Store: d.store, Home: opts.Home, Verifier: d.sched, Logger: d.log, Grace: opts.Grace,
		PRCommands: d.sched, PRTasks: d.sched.PRTasks})
	d.sched.SetLander(d.lander)
	d.dash = dashboard.New(dashboard.Options{Source: dashsource.New(d.store, d.sched, d.bus), Auth: dashboard.NewAuth(nil, opts.DashboardCodeTTL),
		Logger: opts.Logger.Named("dashboard"), Closing: d.closing})
	// The outbox hook is installed before the first write: every state
	// change from now on enqueues its notifications in its own transaction.
	d.notify = notify.New(notify.Options{Store: d.store, Bus: d.bus, Logger: opts.Logger, Backoff: opts.NotifyBackoff,
		CommandTimeout: opts.NotifyCommandTimeout,
		Describe: func(ctx context.Context, run storage.Run) (api.Run, error) {
			return d.sched.Describe(ctx, run, scheduler.DescribeOptions{})
		},
		// d.httpAddr is set below, before the notifier runs.
		Dashboard: func() bool { return d.httpAddr != "" },
		Claim:     d.notifyClaim()})
	d.store.SetEventHook(d.notify.Hook)

	ln, err := listenUnix(opts.Socket)
	if err != nil {
		return err
	}
	var tcp net.Listener
	if opts.HTTPAddr != "" {
		if d.token, err = tcpguard.LoadToken(opts.Home); err != nil {
			ln.Close()
			return err
		}
		if tcp, err = tcpguard.Listen(opts.HTTPAddr, opts.HTTPAllowRemote); err != nil {
			ln.Close()
			return err
		}
		d.httpAddr, d.noDashboard = dashboard.LoginHost(tcp)
		d.tcpAddr = tcp.Addr().String()
		d.log.Info("serving the API over TCP", zap.String("addr", tcp.Addr().String()),
			zap.String("token_file", filepath.Join(opts.Home, TokenFile)))
		if d.noDashboard != nil {
			d.log.Warn("no dashboard on this address: only the bearer token is accepted", zap.String("addr", tcp.Addr().String()),
				zap.String("why", d.noDashboard.Error()))
		}
	}
	err = d.store.Write(ctx, func(tx *storage.Tx) error {
		_, err := tx.Event("", nil, events.DaemonStarted, map[string]any{"pid": os.Getpid(), "version": opts.Version,
			"home": opts.Home, "socket": opts.Socket})
		return err
	})
	if err != nil {
		ln.Close()
		return err
	}
	// Records of worktrees removed by hand while the daemon was down are
	// marked gone, and lands cut short are undone or recorded, before any
	// run is recovered or anything is removed.
	if d.runsSteps() {
		d.lander.Recover(ctx)
	}
	d.log.Info("loopd started", zap.String("home", opts.Home), zap.String("socket", opts.Socket),
		zap.Int("pid", os.Getpid()), zap.Int("max_concurrent_runs", d.sched.MaxConcurrent()))

	return d.serve(ctx, ln, tcp)
}

// serve runs the scheduler, the notifier and the listeners until ctx is
// done, a client asks the daemon to stop or one of them fails, then shuts
// them down in order.
func (d *Daemon) serve(ctx context.Context, ln, tcp net.Listener) error {
	routes := d.routes()
	srv := &http.Server{
		Handler:           routes,
		ConnContext:       connContext,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          zap.NewStdLog(d.log.Named("http")),
	}
	// The TCP listener has a server of its own, with timeouts and a cap on
	// its connections: nothing done to the TCP port can use up the
	// descriptors the Unix socket needs.
	var tcpSrv *http.Server
	if tcp != nil {
		tcpSrv = tcpguard.NewServer(routes, connContext, d.log)
		tcp = tcpguard.NewCapListener(tcp, tcpguard.ConnCap(), d.log.Named("http"))
	}
	schedCtx, stopSched := context.WithCancel(context.Background())
	defer stopSched()
	// The group's context ends when the scheduler or a listener fails: a
	// daemon that can no longer run loops must not go on accepting them.
	g, gctx := errgroup.WithContext(context.Background())
	g.Go(func() error {
		if !d.runsSteps() {
			<-schedCtx.Done() // an API-only node: other workers run the runs
			return nil
		}
		if err := d.sched.Run(schedCtx); err != nil {
			return fmt.Errorf("scheduler: %w", err)
		}
		return nil
	})
	// Notifications are delivered beside the runs, never in their way; the
	// ones in flight at shutdown stay due for the next daemon.
	g.Go(func() error { return d.notify.Run(schedCtx) })
	// Every node on PostgreSQL wakes its followers on the other nodes'
	// commits too.
	g.Go(func() error {
		return fleet.Follow(schedCtx, d.store, d.busStart, d.opts.FollowPoll, d.bus.PublishRuns, d.log.Named("follow"))
	})
	for _, s := range []struct {
		srv *http.Server
		l   net.Listener
	}{{srv, ln}, {tcpSrv, tcp}} {
		if s.l == nil {
			continue
		}
		g.Go(func() error {
			if err := s.srv.Serve(s.l); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("serve: %w", err)
			}
			return nil
		})
	}

	select {
	case <-ctx.Done():
		d.log.Info("shutting down: signal")
	case <-d.stopCh:
		d.log.Info("shutting down: requested", zap.Bool("kill_steps", d.killSteps))
	case <-gctx.Done():
		d.log.Error("shutting down: a component failed")
	}
	close(d.closing)
	// Stop accepting work first, then end the streams (followers see EOF),
	// then stop the runners: steps keep running unless asked otherwise.
	ln.Close()
	if tcp != nil {
		tcp.Close()
	}
	d.bus.Close()
	if d.killSteps {
		d.sched.KillSteps()
	} else if gctx.Err() == nil {
		d.drain() // a fleet worker hands its runs over; the embedded daemon leaves them running
	}
	stopSched()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var shut sync.WaitGroup
	for _, s := range []*http.Server{srv, tcpSrv} {
		if s != nil {
			shut.Go(func() { _ = s.Shutdown(shutdownCtx) })
		}
	}
	shut.Wait()
	err := g.Wait()
	d.log.Info("loopd stopped")
	return err
}

func (d *Daemon) requestStop(killSteps bool) {
	d.stopOnce.Do(func() {
		d.killSteps = killSteps
		close(d.stopCh)
	})
}
