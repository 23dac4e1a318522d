package main

import (
	"os/exec"
	"strings"
	"testing"
)

// loopctl must stay small and free of the daemon's storage: it must not
// link SQLite or a Postgres driver (as tailscale checks for its CLI).
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
		for _, banned := range []string{"modernc.org/sqlite", "modernc.org/libc", "github.com/jmoiron/sqlx", "database/sql",
			"github.com/loopd/loopd/internal/storage", "github.com/loopd/loopd/internal/scheduler", "go.uber.org/zap",
			"github.com/jackc/pgx", "github.com/jackc/pgconn", "github.com/jackc/puddle", "github.com/lib/pq"} {
			if d == banned || strings.HasPrefix(d, banned+"/") {
				t.Errorf("loopctl depends on %s", d)
			}
		}
	}
}
