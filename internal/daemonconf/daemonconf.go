// Package daemonconf reads the daemon's settings file, LOOPD_HOME/daemon.conf:
// the loopd flags a user wants every time the daemon starts, whoever starts
// it — loopd by hand, loopctl's autostart after a crash, or the systemd unit
// of `loopctl daemon install`. Before it, the daemon that loopctl started
// had none of the flags the user once gave loopd (its dashboard silently
// disappeared after a crash).
//
// The file is in the config format (key=value lines, # comments; see
// internal/config.Parse), one key per loopd flag, with underscores:
//
//	http = 127.0.0.1:7777
//	max_concurrent_runs = 8
//	log_level = debug
//
// Precedence: loopd's flags > LOOPD_* environment > daemon.conf > defaults.
// It lives in LOOPD_HOME, not in the user config, because its settings are
// one daemon's: two homes are two daemons, which cannot share a port.
package daemonconf

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/editdist"
	"github.com/loopd/loopd/internal/humantime"
)

// FileName is the settings file's name in LOOPD_HOME.
const FileName = "daemon.conf"

// Path is the settings file of the daemon whose home is home.
func Path(home string) string { return filepath.Join(home, FileName) }

// Setting is one key of daemon.conf.
type Setting struct {
	Key  string // in daemon.conf
	Flag string // loopd's flag, without dashes
	Env  string // its LOOPD_* variable, "" when it has none

	// Secret says the value may hold a password (the store URL): it is
	// shown only through Redact.
	Secret bool

	// check validates a value and returns it in the form loopd's flag
	// parses, or a problem worded for "key: problem".
	check func(v string) (string, string)
}

// Redact is v as it may be shown (a summary, a warning, a log): for a
// Secret setting, a store URL's password (postgres://user:xxxxx@…, or a
// key=value string's password=xxxxx) hidden.
func (s Setting) Redact(v string) string {
	if !s.Secret {
		return v
	}
	return RedactStore(v)
}

// RedactStore hides the password of a PostgreSQL URL or key=value
// connection string. (internal/storage has its own, beside the driver;
// this one keeps loopctl, which reads daemon.conf, free of it.)
func RedactStore(v string) string {
	if u, err := url.Parse(v); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return passwordKV.ReplaceAllString(v, "${1}xxxxx")
}

var passwordKV = regexp.MustCompile(`(?i)(password\s*=\s*)('[^']*'|\S+)`)

// Settings are the keys of daemon.conf, in the order docs/service.md lists
// them (a test holds the two together).
// The socket and the home are not among them: loopctl finds the daemon
// through them before it could read the file.
var Settings = []Setting{
	{Key: "http", Flag: "http", Env: "LOOPD_HTTP", check: checkHTTP},
	{Key: "http_allow_remote", Flag: "http-allow-remote", check: checkBool},
	{Key: "max_concurrent_runs", Flag: "max-concurrent-runs", Env: "LOOPD_MAX_CONCURRENT_RUNS", check: checkRuns},
	{Key: "log_level", Flag: "log-level", Env: "LOOPD_LOG_LEVEL", check: checkLevel},
	{Key: "log_format", Flag: "log-format", Env: "LOOPD_LOG_FORMAT", check: checkFormat},
	{Key: "log_file", Flag: "log-file", Env: "LOOPD_LOG_FILE", check: checkAbsPath},
	{Key: "dashboard_code_ttl", Flag: "dashboard-code-ttl", Env: "LOOPD_DASHBOARD_CODE_TTL", check: checkTTL},
	{Key: "kill_grace", Flag: "kill-grace", check: checkPositive},
	{Key: "retry_backoff", Flag: "retry-backoff", check: checkPositive},
	{Key: "notify_backoff", Flag: "notify-backoff", Env: "LOOPD_NOTIFY_BACKOFF", check: checkPositive},
	{Key: "notify_command_timeout", Flag: "notify-command-timeout", Env: "LOOPD_NOTIFY_COMMAND_TIMEOUT", check: checkPositive},
	{Key: "api_backoff", Flag: "api-backoff", Env: "LOOPD_API_BACKOFF", check: checkPositive},
	// A fleet worker's (docs/fleet.md). The URL is better given without a
	// password (~/.pgpass, PGPASSFILE): the file is readable by its owner
	// only, but a password in it is one more copy.
	{Key: "store", Flag: "store", Env: "LOOPD_STORE", Secret: true, check: checkStore},
	{Key: "worker", Flag: "worker", check: checkBool},
	{Key: "worker_id", Flag: "worker-id", check: checkWorkerID},
	{Key: "lease_ttl", Flag: "lease-ttl", check: checkLeaseTTL},
	{Key: "heartbeat", Flag: "heartbeat", check: checkPositive},
	{Key: "fence_margin", Flag: "fence-margin", check: checkPositive},
	{Key: "drain_timeout", Flag: "drain-timeout", check: checkPositive},
	{Key: "notify_claim_ttl", Flag: "notify-claim-ttl", check: checkPositive},
}

// FleetKeys are the settings that make sense only with a store.
var FleetKeys = []string{"worker", "worker_id", "lease_ttl", "heartbeat", "fence_margin", "drain_timeout", "notify_claim_ttl"}

// Value is one setting as the file gives it.
type Value struct {
	Setting
	Value string // checked, in the form loopd's flag parses
	File  string
	Line  int
}

// File is a daemon.conf as read: its path and its settings, the last line
// of a key winning, in the order of Settings.
type File struct {
	Path   string
	Exists bool
	Values []Value
}

// Get returns the value of key and whether the file sets it.
func (f *File) Get(key string) (string, bool) {
	for _, v := range f.Values {
		if v.Key == key {
			return v.Value, true
		}
	}
	return "", false
}

// Summary is the settings on one line, "http=127.0.0.1:7777
// max_concurrent_runs=8", "" when there are none.
func (f *File) Summary() string {
	parts := make([]string, len(f.Values))
	for i, v := range f.Values {
		parts[i] = v.Key + "=" + config.QuoteValue(v.Redact(v.Value))
	}
	return strings.Join(parts, " ")
}

// Load reads the daemon.conf of home. A missing file is no settings. A file
// that another user owns or may write (or that sits in a home another user
// may write) is refused: whoever can change it chooses what the daemon
// listens on and where it writes its log. Every bad line is reported at
// once, each as "file:line: key: problem".
func Load(home string) (*File, error) {
	path := Path(home)
	f := &File{Path: path}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err := checkSafe(path); err != nil {
		return nil, err
	}
	entries, err := config.ParseFile(path)
	if err != nil {
		return nil, err
	}
	f.Exists = true
	byKey := map[string]Value{}
	var errs []error
	for _, e := range entries {
		s, ok := lookup(e.Key)
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %s", e.File, e.Line, e.Key, unknown(e.Key)))
			continue
		}
		v, problem := s.check(e.Value)
		if problem != "" {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %s", e.File, e.Line, e.Key, problem))
			continue
		}
		byKey[s.Key] = Value{Setting: s, Value: v, File: e.File, Line: e.Line}
	}
	if h, ok := byKey["http"]; ok {
		remote := byKey["http_allow_remote"].Value == "true"
		if host, _, _ := net.SplitHostPort(h.Value); !remote && !isLoopback(host) {
			errs = append(errs, fmt.Errorf("%s:%d: http: %s is not a loopback address; set http_allow_remote=true to serve the API beyond this machine (docs/security.md)", h.File, h.Line, h.Value))
		}
	}
	errs = append(errs, checkFleet(byKey)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("bad daemon settings (nothing was started or changed):\n%w", errors.Join(errs...))
	}
	for _, s := range Settings {
		if v, ok := byKey[s.Key]; ok {
			f.Values = append(f.Values, v)
		}
	}
	return f, nil
}

func lookup(key string) (Setting, bool) {
	for _, s := range Settings {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}

// unknown words the problem of a key that is not a setting.
func unknown(key string) string {
	switch key {
	case "home", "socket":
		return "not a daemon.conf setting: loopctl finds the daemon through LOOPD_HOME and LOOPD_SOCKET before it could read this file; set them in the environment"
	}
	norm := strings.ReplaceAll(strings.TrimLeft(key, "-"), "-", "_")
	if s, ok := lookup(norm); ok && norm != key {
		return fmt.Sprintf("unknown setting (did you mean %s?)", s.Key)
	}
	best, bestD := "", 4
	for _, s := range Settings {
		if d := editdist.Distance(key, s.Key); d < bestD {
			best, bestD = s.Key, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown setting (did you mean %s?)", best)
	}
	keys := make([]string, len(Settings))
	for i, s := range Settings {
		keys[i] = s.Key
	}
	return "unknown setting; the settings are " + strings.Join(keys, ", ")
}

// checkSafe refuses a settings file, or a home holding it, that someone
// other than the user reading it could change. Group write is allowed to
// the user's own group, as for LOOPD_HOME's directories (user-private
// groups make a user's own files group-writable under umask 002).
func checkSafe(path string) error {
	uid, gid := os.Geteuid(), os.Getegid()
	check := func(p, what string, fi fs.FileInfo) error {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if int(st.Uid) != uid {
			return fmt.Errorf("%s: %s belongs to uid %d, not to uid %d that runs loopd: whoever owns it chooses what the daemon listens on and where it writes; refusing it (nothing was started or changed). If it is yours, take it back: `chown %d %s`",
				path, what, st.Uid, uid, uid, p)
		}
		perm := fi.Mode().Perm()
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil // a symlink's own mode is always 0777 and means nothing; its target's is checked
		}
		if perm&0o002 != 0 || (perm&0o020 != 0 && int(st.Gid) != gid) {
			return fmt.Errorf("%s: %s is writable by other users (mode %04o): whoever can change it chooses what the daemon listens on and where it writes; refusing it (nothing was started or changed). Run `chmod go-w %s`",
				path, what, perm, p)
		}
		return nil
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err == nil {
		if err := check(dir, "its directory "+dir, fi); err != nil {
			return err
		}
	}
	li, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := check(path, "the file", li); err != nil {
		return err
	}
	if li.Mode()&fs.ModeSymlink != 0 {
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		real, _ := filepath.EvalSymlinks(path)
		if err := check(real, "the file it links to, "+real+",", fi); err != nil {
			return err
		}
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func checkHTTP(v string) (string, string) {
	host, port, err := net.SplitHostPort(v)
	if err != nil || port == "" {
		return "", fmt.Sprintf("must be host:port such as 127.0.0.1:7777, got %q", v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Sprintf("port must be a number from 0 to 65535, got %q", port)
	}
	if host == "" {
		return "", fmt.Sprintf("must name the host, such as 127.0.0.1:%s (an empty host is every address)", port)
	}
	return v, ""
}

func checkBool(v string) (string, string) {
	switch strings.ToLower(v) {
	case "true", "yes", "on", "1":
		return "true", ""
	case "false", "no", "off", "0":
		return "false", ""
	}
	return "", fmt.Sprintf("must be true or false, got %q", v)
}

func checkRuns(v string) (string, string) {
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil || n < 1 {
		return "", fmt.Sprintf("must be a whole number, at least 1, got %q", v)
	}
	return strconv.Itoa(n), ""
}

func checkLevel(v string) (string, string) {
	l := strings.ToLower(v)
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, l) {
		return "", fmt.Sprintf("must be debug, info, warn or error, got %q", v)
	}
	return l, ""
}

func checkFormat(v string) (string, string) {
	if v != "console" && v != "json" {
		return "", fmt.Sprintf("must be console or json, got %q", v)
	}
	return v, ""
}

func checkAbsPath(v string) (string, string) {
	if !filepath.IsAbs(v) {
		return "", fmt.Sprintf("must be an absolute path (the daemon runs in /), got %q", v)
	}
	return filepath.Clean(v), ""
}

func parseDuration(v string) (time.Duration, string) {
	d, err := humantime.Parse(v)
	if err != nil {
		return 0, fmt.Sprintf("must be a duration such as 30s or 2m, got %q", v)
	}
	return d, ""
}

func checkPositive(v string) (string, string) {
	d, problem := parseDuration(v)
	if problem != "" {
		return "", problem
	}
	if d <= 0 {
		return "", fmt.Sprintf("must be more than 0, got %q", v)
	}
	return d.String(), ""
}

// checkStore accepts what the PostgreSQL driver does: a postgres:// or
// postgresql:// URL, or a key=value connection string. The database is
// reached only when loopd starts.
func checkStore(v string) (string, string) {
	if strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") {
		u, err := url.Parse(v)
		if err != nil {
			// url's error quotes the URL, password and all.
			return "", "not a valid postgres:// URL"
		}
		if u.Host == "" && u.Query().Get("host") == "" {
			return "", "the URL names no host, such as postgres://loopd@db.internal/loopd"
		}
		return v, ""
	}
	if strings.Contains(v, "=") && !strings.Contains(v, "://") {
		return v, "" // key=value: host=db.internal dbname=loopd
	}
	return "", "must be a PostgreSQL URL (postgres://user@host/db) or a key=value connection string (host=… dbname=…)"
}

func checkWorkerID(v string) (string, string) {
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", fmt.Sprintf("must be a name without spaces or control characters (a pod name, a host name), got %q", v)
	}
	return v, ""
}

func checkLeaseTTL(v string) (string, string) {
	d, problem := parseDuration(v)
	if problem != "" {
		return "", problem
	}
	if d < time.Second {
		return "", fmt.Sprintf("must be at least 1s, got %q", v)
	}
	return d.String(), ""
}

// checkFleet checks the fleet keys the file sets against each other, as
// loopd checks its flags: the lease's margin within its TTL, two
// heartbeats within TTL − margin, a notification claim that outlasts the
// longest delivery. Keys the file does not set take loopd's defaults
// here; a flag or LOOPD_* variable that overrides one is checked again by
// loopd.
func checkFleet(byKey map[string]Value) []error {
	dur := func(key string, def time.Duration) (time.Duration, bool) {
		v, ok := byKey[key]
		if !ok {
			return def, false
		}
		d, _ := time.ParseDuration(v.Value)
		return d, true
	}
	ttl, _ := dur("lease_ttl", 30*time.Second)
	margin, marginSet := dur("fence_margin", 5*time.Second)
	hb, hbSet := dur("heartbeat", ttl/6)
	var errs []error
	at := func(key string) string { v := byKey[key]; return fmt.Sprintf("%s:%d: %s", v.File, v.Line, key) }
	if marginSet && margin >= ttl {
		errs = append(errs, fmt.Errorf("%s: must be less than the lease TTL (%s), got %s", at("fence_margin"), ttl, margin))
	} else if hbSet && 2*hb > ttl-margin {
		errs = append(errs, fmt.Errorf("%s: must be at most half of the lease TTL minus the fence margin (%s), got %s", at("heartbeat"), (ttl-margin)/2, hb))
	}
	cmdTimeout, _ := dur("notify_command_timeout", notifyCommandTimeout)
	if claim, set := dur("notify_claim_ttl", 0); set && claim < minNotifyClaimTTL(cmdTimeout) {
		errs = append(errs, fmt.Errorf("%s: must be at least %s: a delivery is cut off a quarter of the claim before it expires, and the longest "+
			"(a notify command's timeout, %s, or a webhook's, %s) must fit before that; got %s",
			at("notify_claim_ttl"), minNotifyClaimTTL(cmdTimeout), cmdTimeout, notifyWebhookTimeout, claim))
	}
	return errs
}

// The bounds of a notification's delivery, as internal/notify has them
// (notify.DefaultCommandTimeout, WebhookTimeout, DesktopTimeout,
// MinClaimTTL; a test holds the two together): this package is read by
// loopctl, which must not link the store's drivers that notify does.
const (
	notifyCommandTimeout = time.Minute
	notifyWebhookTimeout = 15 * time.Second
	notifyDesktopTimeout = 10 * time.Second
)

// minNotifyClaimTTL is notify.MinClaimTTL.
func minNotifyClaimTTL(commandTimeout time.Duration) time.Duration {
	longest := max(commandTimeout, notifyWebhookTimeout, notifyDesktopTimeout)
	return (4*longest + 2) / 3
}

func checkTTL(v string) (string, string) {
	d, problem := parseDuration(v)
	if problem != "" {
		return "", problem
	}
	if d <= 0 || d > 10*time.Minute {
		return "", fmt.Sprintf("must be more than 0 and at most 10m, got %q", v)
	}
	return d.String(), ""
}
