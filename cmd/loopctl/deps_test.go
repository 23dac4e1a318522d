package main

import (
	"os/exec"
	"strings"
	"testing"
)

// notLinked are what loopctl must never link: the daemon's storage and
// anything that opens a database, SQLite or Postgres (as tailscale checks
// for its CLI). A module path bans its packages too; "database/sql" is
// banned alone, not database/sql/driver, which is only interfaces
// (terminal libraries such as go-colorful implement its Valuer) and opens
// nothing.
var notLinked = []struct {
	path    string
	subpkgs bool // also every package under path
}{
	{"database/sql", false},               // a database handle: the daemon's alone
	{"modernc.org/sqlite", true},          // the SQLite driver the daemon uses
	{"modernc.org/libc", true},            // what that driver is built on (megabytes)
	{"github.com/mattn/go-sqlite3", true}, // any other SQLite driver (cgo)
	{"github.com/jmoiron/sqlx", true},     //
	{"github.com/jackc/pgx", true},        // Postgres, any major version: pgx/v5 is under it
	{"github.com/jackc/pgconn", true},     // pgx's connection layer (v4)
	{"github.com/jackc/puddle", true},     // pgx's pool
	{"github.com/lib/pq", true},           // the other Postgres driver
	{"go.uber.org/zap", true},             // the daemon's logger: its arrival means a daemon package came with it
	{"github.com/loopd/loopd/internal/storage", true},
	{"github.com/loopd/loopd/internal/scheduler", true},
	{"github.com/loopd/loopd/internal/daemon", true},
}

// banned reports the entry of notLinked that pkg falls under.
func banned(pkg string) (string, bool) {
	for _, b := range notLinked {
		if pkg == b.path || b.subpkgs && strings.HasPrefix(pkg, b.path+"/") {
			return b.path, true
		}
	}
	return "", false
}

func TestBanned(t *testing.T) {
	for pkg, want := range map[string]bool{
		"database/sql": true, "database/sql/driver": false, "modernc.org/sqlite/lib": true, "modernc.org/sqlitex": false,
		"github.com/jackc/pgx/v5/pgxpool": true, "github.com/jackc/pgx": true, "github.com/jackc/pgxlisten": false,
		"go.uber.org/zap/zapcore": true, "go.uber.org/multierr": false, "github.com/loopd/loopd/internal/api": false,
		"github.com/loopd/loopd/internal/storage": true, "github.com/loopd/loopd/internal/daemonx": false,
		"github.com/jackc/puddle/v2": true, "github.com/lib/pq": true, "github.com/jackc/pgconn": true,
	} {
		if _, got := banned(pkg); got != want {
			t.Errorf("banned(%q) = %v, want %v", pkg, got, want)
		}
	}
}

// loopctl must stay small and free of the daemon's storage.
func TestLoopctlDoesNotLinkSQLite(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/loopd/loopd/cmd/loopctl").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("suspiciously short dependency list: %v", deps)
	}
	for _, d := range deps {
		if b, ok := banned(d); ok {
			t.Errorf("loopctl depends on %s (%s must not be linked)", d, b)
		}
	}
}
