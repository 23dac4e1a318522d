// Command loopd is the loopd daemon: it runs autonomous coding-agent loops
// and serves loopctl over a Unix socket. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/daemon"
	"github.com/loopd/loopd/internal/daemonconf"
	"github.com/loopd/loopd/internal/homeguard"
	"github.com/loopd/loopd/internal/notify"
)

// Exit codes of loopd.
const (
	exitOK      = 0
	exitFailure = 1  // the daemon could not start or failed
	exitLocked  = 75 // another daemon serves this home (EX_TEMPFAIL): nothing was changed
	exitUsage   = 64
)

func init() {
	// The main goroutine keeps the main thread to itself, so no step's
	// leader is started from it: the main thread's list of children, which
	// the daemon reads at every step's end (supervise.orphanPids), holds
	// only the orphans of steps.
	runtime.LockOSThread()
}

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) > 0 && args[0] == "migrate" {
		return runMigrate(args[1:])
	}
	fs := flag.NewFlagSet("loopd", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: loopd [flags]\n\nRuns the loopd daemon in the foreground. loopctl starts it in the background when needed.\n"+
			"Settings the daemon should always have go in HOME/daemon.conf (http = 127.0.0.1:7777, one key per\n"+
			"flag, with underscores); the environment overrides it, and flags override both (docs/service.md).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	home := fs.String("home", env("LOOPD_HOME", ""), "state directory: database, socket, lock, run logs (env LOOPD_HOME; default $XDG_STATE_HOME/loop or ~/.local/state/loop)")
	socket := fs.String("socket", env("LOOPD_SOCKET", ""), "Unix socket path (env LOOPD_SOCKET; default HOME/loopd.sock)")
	maxRuns := fs.Int("max-concurrent-runs", envInt("LOOPD_MAX_CONCURRENT_RUNS", 4), "runs executing at once (env LOOPD_MAX_CONCURRENT_RUNS)")
	level := fs.String("log-level", env("LOOPD_LOG_LEVEL", "info"), "debug, info, warn or error; debug also logs every stop-condition evaluation (env LOOPD_LOG_LEVEL)")
	format := fs.String("log-format", env("LOOPD_LOG_FORMAT", "console"), "console or json (env LOOPD_LOG_FORMAT)")
	logFile := fs.String("log-file", env("LOOPD_LOG_FILE", ""), "also append logs to this file (env LOOPD_LOG_FILE)")
	httpAddr := fs.String("http", env("LOOPD_HTTP", ""), "also serve the API over TCP on this loopback address (host:port); requests need the bearer token in HOME/http.token (env LOOPD_HTTP)")
	httpRemote := fs.Bool("http-allow-remote", false, "allow --http on a non-loopback address")
	codeTTL := fs.Duration("dashboard-code-ttl", envDuration("LOOPD_DASHBOARD_CODE_TTL", time.Minute), "how long a `loopctl dashboard` login link stays valid, at most 10m (env LOOPD_DASHBOARD_CODE_TTL)")
	grace := fs.Duration("kill-grace", 5*time.Second, "time between SIGTERM and SIGKILL when a step is stopped")
	retry := fs.Duration("retry-backoff", 5*time.Second, "time a run waits before retrying after an internal error (it ends ABORTED fatal:internal after 5 identical errors in a row)")
	notifyBackoff := fs.Duration("notify-backoff", envDuration("LOOPD_NOTIFY_BACKOFF", 2*time.Second), "delay before a failed notification webhook is retried, doubled for each further attempt (env LOOPD_NOTIFY_BACKOFF)")
	notifyTimeout := fs.Duration("notify-command-timeout", envDuration("LOOPD_NOTIFY_COMMAND_TIMEOUT", notify.DefaultCommandTimeout),
		"how long a run's notify_command may run before its process group is killed (env LOOPD_NOTIFY_COMMAND_TIMEOUT)")
	apiBackoff := fs.Duration("api-backoff", envDuration("LOOPD_API_BACKOFF", time.Minute), "first wait of a run whose model API is unavailable; doubles per attempt up to 30 times this (env LOOPD_API_BACKOFF)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (pprof) to this file until the daemon exits (for benchmarks)")
	fleetf := addFleetFlags(fs)
	version := fs.Bool("version", false, "print the version, the commit it was built from and its date, and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "loopd: unexpected argument %q (loopd takes only flags, or `loopd migrate --store URL`; use loopctl to start runs)\n", fs.Arg(0))
		return exitUsage
	}
	if *version {
		fmt.Println("loopd", api.VersionLine())
		return exitOK
	}
	if *home == "" {
		var err error
		if *home, err = api.DefaultHome(); err != nil {
			fmt.Fprintln(os.Stderr, "loopd:", err)
			return exitUsage
		}
	}
	fromFile, err := applySettings(fs, *home)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loopd:", err)
		return exitUsage
	}
	if *maxRuns < 1 {
		fmt.Fprintf(os.Stderr, "loopd: --max-concurrent-runs must be at least 1, got %d\n", *maxRuns)
		return exitUsage
	}
	if *codeTTL <= 0 || *codeTTL > 10*time.Minute {
		fmt.Fprintf(os.Stderr, "loopd: --dashboard-code-ttl must be more than 0 and at most 10m, got %s\n", *codeTTL)
		return exitUsage
	}
	lvl, err := zapcore.ParseLevel(*level)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loopd: --log-level: %v (use debug, info, warn or error)\n", err)
		return exitUsage
	}
	if *format != "console" && *format != "json" {
		fmt.Fprintf(os.Stderr, "loopd: --log-format must be console or json, got %q\n", *format)
		return exitUsage
	}
	if *home, err = filepath.Abs(*home); err != nil {
		fmt.Fprintln(os.Stderr, "loopd:", err)
		return exitUsage
	}
	if *notifyTimeout <= 0 {
		name := "--notify-command-timeout"
		if at, ok := fromFile["notify-command-timeout"]; ok {
			name = at
		}
		fmt.Fprintf(os.Stderr, "loopd: %s must be more than 0, got %s\n", name, *notifyTimeout)
		return exitUsage
	}
	fleet, err := fleetf.options(fs, *home, fromFile, *notifyTimeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loopd:", err)
		return exitUsage
	}
	log := newLogger(lvl, *format, os.Stderr)
	defer log.Sync()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loopd: --cpuprofile:", err)
			return exitUsage
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "loopd: --cpuprofile:", err)
			return exitUsage
		}
		defer pprof.StopCPUProfile()
	}

	var onActive func(int)
	if os.Getenv("GOGC") == "" {
		// The collector's target follows the number of runs at once
		// (gcPercent); GOGC in the environment overrides it.
		setGCPercent(gcPercent(0))
		onActive = setGCPercentFor()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = daemon.Run(ctx, daemon.Options{
		Home: *home, Socket: *socket, MaxConcurrentRuns: *maxRuns, Logger: log, Version: api.BuildVersion(),
		DebugConditions: lvl == zapcore.DebugLevel, Grace: *grace, RetryBackoff: *retry, APIBackoff: *apiBackoff,
		LogFile: *logFile, LogCore: func(w zapcore.WriteSyncer) zapcore.Core { return core(lvl, "json", w) },
		HTTPAddr: *httpAddr, HTTPAllowRemote: *httpRemote, NotifyBackoff: *notifyBackoff, DashboardCodeTTL: *codeTTL,
		NotifyCommandTimeout: *notifyTimeout,
		Fleet:                fleet,
		OnActiveRuns:         onActive,
	})
	var (
		locked *homeguard.LockedError
		unsafe *homeguard.OwnerError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &locked):
		fmt.Fprintln(os.Stderr, "loopd:", err)
		return exitLocked
	case errors.As(err, &unsafe):
		// A home another user could change is the user's to fix: like a
		// bad flag, retrying (a service's restart) cannot help.
		fmt.Fprintln(os.Stderr, "loopd:", err)
		return exitUsage
	default:
		log.Error("loopd failed", zap.Error(err))
		fmt.Fprintln(os.Stderr, "loopd:", err)
		return exitFailure
	}
}

// applySettings gives every flag that neither the command line nor its
// LOOPD_* variable set the value of HOME/daemon.conf, so that a daemon
// started by hand, by loopctl after a crash or by systemd runs with the
// same settings. A bad file is refused whole: the daemon does not start
// with half of what the user asked for. It returns where each flag it set
// comes from ("file:line: key", by flag name), for the checks that follow
// to name the file rather than a flag nobody gave.
func applySettings(fs *flag.FlagSet, home string) (map[string]string, error) {
	conf, err := daemonconf.Load(home)
	if err != nil {
		return nil, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	from := map[string]string{}
	for _, v := range conf.Values {
		if given[v.Flag] || (v.Env != "" && os.Getenv(v.Env) != "") {
			continue
		}
		if err := fs.Set(v.Flag, v.Value); err != nil {
			// The flag's error quotes the value: a store URL's password too.
			return nil, fmt.Errorf("%s:%d: %s: %v", v.File, v.Line, v.Key, strings.ReplaceAll(err.Error(), v.Value, v.Redact(v.Value)))
		}
		from[v.Flag] = fmt.Sprintf("%s:%d: %s", v.File, v.Line, v.Key)
	}
	return from, nil
}

func newLogger(lvl zapcore.Level, format string, w *os.File) *zap.Logger {
	return zap.New(core(lvl, format, zapcore.Lock(w)))
}

func core(lvl zapcore.Level, format string, w zapcore.WriteSyncer) zapcore.Core {
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	enc := zapcore.NewJSONEncoder(ec)
	if format == "console" {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	}
	return zapcore.NewCore(enc, w, lvl)
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v := os.Getenv(key); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "loopd: ignoring %s=%q: not a number\n", key, v)
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	if v := os.Getenv(key); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
		fmt.Fprintf(os.Stderr, "loopd: ignoring %s=%q: not a positive duration such as 1m\n", key, v)
	}
	return def
}
