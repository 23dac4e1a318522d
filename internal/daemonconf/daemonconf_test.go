package daemonconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/notify"
)

// home is a LOOPD_HOME holding a daemon.conf of the given lines.
func home(t *testing.T, lines ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(Path(dir), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoad(t *testing.T) {
	dir := home(t,
		"# the daemon I want",
		"http = 127.0.0.1:0",
		"max_concurrent_runs = 1_000",
		"log_level = DEBUG   # loud",
		"dashboard_code_ttl = 2 minutes",
		"kill_grace = 10s",
		"kill_grace = 3s",
		"log_file = /var/log/loopd.log",
		"http_allow_remote = no")
	f, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Exists || f.Path != Path(dir) {
		t.Errorf("file = %+v", f)
	}
	want := "http=127.0.0.1:0 http_allow_remote=false max_concurrent_runs=1000 log_level=debug log_file=/var/log/loopd.log dashboard_code_ttl=2m0s kill_grace=3s"
	if got := f.Summary(); got != want {
		t.Errorf("Summary = %q\nwant      %q", got, want)
	}
	if v, ok := f.Get("kill_grace"); !ok || v != "3s" {
		t.Errorf("kill_grace = %q, %v; want the last line's 3s", v, ok)
	}
	if g, _ := f.Get("kill_grace"); g == "" {
		t.Error("no kill_grace")
	}
	for _, v := range f.Values {
		if v.Key == "kill_grace" && v.Line != 7 {
			t.Errorf("kill_grace from line %d, want 7", v.Line)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	f, err := Load(t.TempDir())
	if err != nil || f.Exists || len(f.Values) != 0 {
		t.Fatalf("Load of a home without daemon.conf = %+v, %v; want no settings", f, err)
	}
}

func TestLoadRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"http = 7777", `:1: http: must be host:port such as 127.0.0.1:7777, got "7777"`},
		{"http = :7777", ":1: http: must name the host, such as 127.0.0.1:7777"},
		{"http = 127.0.0.1:99999", `:1: http: port must be a number from 0 to 65535, got "99999"`},
		{"http = 10.0.0.5:7777", ":1: http: 10.0.0.5:7777 is not a loopback address; set http_allow_remote=true"},
		{"max_concurrent_runs = 0", `:1: max_concurrent_runs: must be a whole number, at least 1, got "0"`},
		{"log_level = loud", `:1: log_level: must be debug, info, warn or error, got "loud"`},
		{"log_format = xml", `:1: log_format: must be console or json, got "xml"`},
		{"log_file = loopd.log", `:1: log_file: must be an absolute path`},
		{"dashboard_code_ttl = 1h", `:1: dashboard_code_ttl: must be more than 0 and at most 10m, got "1h"`},
		{"api_backoff = soon", `:1: api_backoff: must be a duration such as 30s or 2m, got "soon"`},
		{"kill_grace = 0s", `:1: kill_grace: must be more than 0, got "0s"`},
		{"http_allow_remote = t", `:1: http_allow_remote: must be true or false, got "t"`},
		{"max-concurrent-runs = 2", ":1: max-concurrent-runs: unknown setting (did you mean max_concurrent_runs?)"},
		{"log_levle = info", ":1: log_levle: unknown setting (did you mean log_level?)"},
		{"socket = /tmp/x.sock", ":1: socket: not a daemon.conf setting: loopctl finds the daemon through LOOPD_HOME and LOOPD_SOCKET"},
		{"colour = blue", ":1: colour: unknown setting; the settings are http, http_allow_remote,"},
		{"http", ":1:"}, // a syntax error, from the config parser
	} {
		t.Run(tc.line, func(t *testing.T) {
			dir := home(t, tc.line)
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), Path(dir)+tc.want) {
				t.Errorf("Load(%q) = %v\nwant an error with %q", tc.line, err, Path(dir)+tc.want)
			}
		})
	}
	// Every problem at once.
	dir := home(t, "max_concurrent_runs = x", "log_level = y")
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), ":1: max_concurrent_runs") || !strings.Contains(err.Error(), ":2: log_level") {
		t.Errorf("Load = %v; want both lines", err)
	}
	// A non-loopback address the file allows.
	if _, err := Load(home(t, "http = 10.0.0.5:7777", "http_allow_remote = true")); err != nil {
		t.Errorf("http on 10.0.0.5 with http_allow_remote: %v", err)
	}
}

func TestLoadRefusesAFileOthersCanChange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(dir string) error
		want  string
	}{
		{"file writable by others", func(d string) error { return os.Chmod(Path(d), 0o606) }, "the file is writable by other users (mode 0606)"},
		{"home writable by others", func(d string) error { return os.Chmod(d, 0o777) }, "its directory " /* then the dir */},
		{"symlink to a file writable by others", func(d string) error {
			target := filepath.Join(t.TempDir(), "conf")
			if err := os.WriteFile(target, []byte("http = 127.0.0.1:0\n"), 0o666); err != nil {
				return err
			}
			if err := os.Chmod(target, 0o666); err != nil {
				return err
			}
			if err := os.Remove(Path(d)); err != nil {
				return err
			}
			return os.Symlink(target, Path(d))
		}, "the file it links to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := home(t, "http = 127.0.0.1:0")
			if err := tc.setup(dir); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "refusing it") {
				t.Errorf("Load = %v; want a refusal saying %q", err, tc.want)
			}
		})
	}
	if os.Geteuid() == 0 {
		dir := home(t, "http = 127.0.0.1:0")
		if err := os.Chown(Path(dir), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534, not to uid 0") {
			t.Errorf("Load of another user's file = %v", err)
		}
	}
}

// docs/service.md lists every setting with its flag and variable: a key
// added here and not there would be one users cannot find.
func TestServiceDocListsEverySetting(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "service.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Settings {
		row := "| `" + s.Key + "` | `--" + s.Flag + "` | |"
		if s.Env != "" {
			row = "| `" + s.Key + "` | `--" + s.Flag + "` | `" + s.Env + "` |"
		}
		if !strings.Contains(string(b), row) {
			t.Errorf("docs/service.md lacks the row %q", row)
		}
	}
}

// The fleet keys: a store URL is kept as given but shown without its
// password; bad values and a margin or heartbeat that does not fit the
// lease are refused naming file, line and key, and never quote the
// password.
func TestFleetSettings(t *testing.T) {
	dir := home(t,
		"store = postgres://loopd:s3cret@db.internal:5432/loopd?sslmode=verify-full",
		"worker = yes",
		"worker_id = pod-0",
		"lease_ttl = 15s",
		"heartbeat = 2s",
		"fence_margin = 5s",
		"drain_timeout = 2m")
	f, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := f.Get("store"); v != "postgres://loopd:s3cret@db.internal:5432/loopd?sslmode=verify-full" {
		t.Errorf("store = %q, want the URL as given", v)
	}
	want := "store=postgres://loopd:xxxxx@db.internal:5432/loopd?sslmode=verify-full worker=true worker_id=pod-0 " +
		"lease_ttl=15s heartbeat=2s fence_margin=5s drain_timeout=2m0s"
	if got := f.Summary(); got != want {
		t.Errorf("Summary = %q\nwant      %q", got, want)
	}
	if got := RedactStore("host=db password='a b' dbname=loopd"); got != "host=db password=xxxxx dbname=loopd" {
		t.Errorf("RedactStore of a key=value string = %q", got)
	}

	for _, c := range []struct {
		lines []string
		want  string
	}{
		{[]string{"store = mysql://root:s3cret@db/x"}, ":1: store: must be a PostgreSQL URL"},
		{[]string{"store = postgres://u:s3cret@/db"}, ":1: store: the URL names no host"},
		{[]string{"worker = sometimes"}, `:1: worker: must be true or false, got "sometimes"`},
		{[]string{"worker_id = pod 0"}, ":1: worker_id: must be a name without spaces"},
		{[]string{"lease_ttl = 500ms"}, `:1: lease_ttl: must be at least 1s, got "500ms"`},
		{[]string{"heartbeat = soon"}, ":1: heartbeat: must be a duration"},
		{[]string{"drain_timeout = 0s"}, ":1: drain_timeout: must be more than 0"},
		{[]string{"lease_ttl = 10s", "fence_margin = 10s"}, ":2: fence_margin: must be less than the lease TTL (10s), got 10s"},
		{[]string{"lease_ttl = 15s", "heartbeat = 6s"}, ":2: heartbeat: must be at most half of the lease TTL minus the fence margin (5s), got 6s"},
		{[]string{"leasettl = 15s"}, "unknown setting (did you mean lease_ttl?)"},
		{[]string{"notify_claim_ttl = 1m"}, ":1: notify_claim_ttl: must be at least 1m20s: a delivery is cut off a quarter of the claim before it expires"},
		{[]string{"notify_command_timeout = 5s", "notify_claim_ttl = 19s"}, ":2: notify_claim_ttl: must be at least 20s"},
		{[]string{"notify_command_timeout = 0s"}, ":1: notify_command_timeout: must be more than 0"},
	} {
		_, err := Load(home(t, c.lines...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load of %q = %v; want %q", c.lines, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Load of %q quotes the password: %v", c.lines, err)
		}
	}
}

// A notification claim long enough for the longest delivery is taken; the
// minimum is notify's own (this package keeps a copy of the rule, as
// loopctl reads it and must not link notify's store drivers).
func TestNotifyClaimTTL(t *testing.T) {
	f, err := Load(home(t, "notify_command_timeout = 5s", "notify_claim_ttl = 20s"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Summary(); got != "notify_command_timeout=5s notify_claim_ttl=20s" {
		t.Errorf("Summary = %q", got)
	}
	if _, err := Load(home(t, "notify_claim_ttl = 80s")); err != nil {
		t.Errorf("the minimum with the default command timeout: %v", err)
	}
	for _, d := range []time.Duration{0, time.Second, 5 * time.Second, 15 * time.Second, time.Minute, 7 * time.Minute, 61 * time.Second} {
		cmd := d
		if cmd == 0 {
			cmd = notifyCommandTimeout
		}
		if got, want := minNotifyClaimTTL(cmd), notify.MinClaimTTL(d); got != want {
			t.Errorf("command timeout %s: daemonconf's minimum claim %s, notify's %s", d, got, want)
		}
	}
	if notifyCommandTimeout != notify.DefaultCommandTimeout || notifyWebhookTimeout != notify.WebhookTimeout || notifyDesktopTimeout != notify.DesktopTimeout {
		t.Error("daemonconf's delivery bounds differ from notify's")
	}
}
