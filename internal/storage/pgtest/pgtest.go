// Package pgtest starts a throwaway PostgreSQL cluster for tests: initdb
// and pg_ctl in a temporary directory, reachable only through a Unix socket
// in that directory (no TCP port), one cluster per test binary, and a fresh
// database per test cloned from a migrated template. Only tests import it.
//
// A test binary that uses it calls Main from TestMain, so that the cluster
// is stopped and its directory removed when the tests end:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// The cluster starts on the first call to Database; a binary whose tests
// never ask for one never pays for initdb. When initdb and pg_ctl cannot be
// found (scripts/install-postgres installs them) the test is skipped with a
// message saying so; any other failure to start the cluster fails it.
//
// PostgreSQL refuses to run as root. When the tests run as root, the
// cluster's processes run as the "postgres" user when it exists (Debian's
// package creates it), else as nobody (65534), in a directory they own.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// ErrUnavailable is wrapped by the error of a cluster that could not start
// because PostgreSQL's server programs are not installed.
var ErrUnavailable = errors.New("PostgreSQL server programs (initdb, pg_ctl) not found; run ./scripts/install-postgres")

// Cluster is a running throwaway cluster.
type Cluster struct {
	dir  string // owned by the cluster's user: data/, the socket, the log
	bin  string // where initdb and pg_ctl are
	cred *syscall.Credential
}

// BinDir finds the directory holding initdb and pg_ctl: $LOOPD_PG_BIN, PATH,
// or Debian's /usr/lib/postgresql/<version>/bin (newest first).
func BinDir() (string, error) {
	if d := os.Getenv("LOOPD_PG_BIN"); d != "" {
		return d, nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				p = real
			}
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", ErrUnavailable
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// serverUser is who the cluster runs as: nil (ourselves) unless we are root.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if u, err := user.Lookup("postgres"); err == nil {
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return &syscall.Credential{Uid: 65534, Gid: 65534}, nil
}

// Start initialises and starts a cluster in a new temporary directory.
func Start(ctx context.Context) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	// The socket path must fit in sun_path (107 bytes): a long TMPDIR
	// falls back to /tmp.
	parent := os.TempDir()
	if len(parent) > 60 {
		parent = "/tmp"
	}
	sweep(ctx, parent, bin, cred)
	dir, err := os.MkdirTemp(parent, "loopd-pg-")
	if err != nil {
		return nil, err
	}
	// Written before the directory is handed over: sweep reads it.
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &Cluster{dir: dir, bin: bin, cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: give %s to uid %d: %w", dir, cred.Uid, err)
		}
	}
	// C locale: text compares and sorts bytewise, as in SQLite.
	if err := c.run(ctx, "initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8",
		"--locale=C", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	opts := fmt.Sprintf("-c listen_addresses='' -c unix_socket_directories='%s' -c max_connections=200", dir)
	if err := c.run(ctx, "pg_ctl", "-D", c.data(), "-l", filepath.Join(dir, "server.log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\nserver log:\n%s", err, log)
	}
	return c, nil
}

// sweep stops and removes the clusters that test binaries killed before
// Main ran (a -timeout panic, kill -9) left in parent: a postmaster whose
// test binary is gone would otherwise hold its memory until reboot.
func sweep(ctx context.Context, parent, bin string, cred *syscall.Credential) {
	dirs, _ := filepath.Glob(filepath.Join(parent, "loopd-pg-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // its test binary is alive (or not ours to judge)
		}
		old := &Cluster{dir: dir, bin: bin, cred: cred}
		if _, err := os.Stat(filepath.Join(old.data(), "postmaster.pid")); err == nil {
			_ = old.run(ctx, "pg_ctl", "-D", old.data(), "-m", "immediate", "-w", "stop")
		}
		os.RemoveAll(dir)
	}
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) run(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, prog), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: %s %s: %w\n%s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}

// URL is the connection URL of database name, over the cluster's socket.
func (c *Cluster) URL(name string) string {
	return "postgres://postgres@/" + name + "?host=" + c.dir + "&sslmode=disable"
}

// Stop stops the server (fast: open sessions are ended) and removes its
// directory.
func (c *Cluster) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.run(ctx, "pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop")
	return errors.Join(err, os.RemoveAll(c.dir))
}

// Exec runs statements on database name.
func (c *Cluster) Exec(ctx context.Context, name string, stmts ...string) error {
	db, err := sql.Open("pgx", c.URL(name))
	if err != nil {
		return err
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("pgtest: %s: %w", s, err)
		}
	}
	return nil
}

var (
	mu       sync.Mutex
	shared   *Cluster
	startErr error
	started  bool
	template sync.Map // template name → error of its init (nil: ready)
	dbs      atomic.Int64
)

// Main runs the tests and stops the shared cluster afterwards.
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop the cluster:", err)
			if code == 0 {
				code = 1
			}
		}
		shared = nil
	}
	return code
}

// Shared returns the binary's cluster, starting it on first use; it skips
// tb when PostgreSQL is not installed and fails it when the cluster does
// not start.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		shared, startErr = Start(ctx)
		cancel()
	}
	if errors.Is(startErr, ErrUnavailable) {
		tb.Skipf("skipping the PostgreSQL dialect: %v", startErr)
	}
	if startErr != nil {
		tb.Fatalf("start a throwaway PostgreSQL cluster: %v", startErr)
	}
	return shared
}

// Database creates a database of its own for tb, cloned from template
// (created once per binary by init, which gets its URL and must close its
// connections before returning; init may be nil once the template exists),
// dropped when tb ends. It returns the
// database's URL.
func Database(tb testing.TB, tmpl string, init func(ctx context.Context, url string) error) string {
	tb.Helper()
	c := Shared(tb)
	ctx := context.Background()
	mu.Lock()
	errv, ok := template.Load(tmpl)
	if !ok && init == nil {
		mu.Unlock()
		tb.Fatalf("template database %s is not prepared yet: the first call must pass its init", tmpl)
	}
	if !ok {
		err := c.Exec(ctx, "postgres", "CREATE DATABASE "+quote(tmpl))
		if err == nil {
			err = init(ctx, c.URL(tmpl))
		}
		template.Store(tmpl, err)
		errv = err
	}
	mu.Unlock()
	if err, _ := errv.(error); err != nil {
		tb.Fatalf("prepare template database %s: %v", tmpl, err)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbs.Add(1))
	// CREATE DATABASE … TEMPLATE fails while another session uses the
	// template; clones are made one at a time.
	mu.Lock()
	err := c.Exec(ctx, "postgres", "CREATE DATABASE "+quote(name)+" TEMPLATE "+quote(tmpl))
	mu.Unlock()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Exec(context.Background(), "postgres", "DROP DATABASE "+quote(name)+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop test database: %v", err)
		}
	})
	return c.URL(name)
}

func quote(ident string) string { return `"` + strings.ReplaceAll(ident, `"`, `""`) + `"` }
