package storage

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/loopd/loopd/internal/storage/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// dialect is a SQL dialect the conformance tests run against.
type dialect string

const (
	sqliteDialect   dialect = "sqlite"
	postgresDialect dialect = "postgres"
)

// dialects are run in this order; the PostgreSQL sub-tests skip, saying
// why, where PostgreSQL is not installed (scripts/install-postgres).
var dialects = []dialect{sqliteDialect, postgresDialect}

// eachDialect runs fn as a sub-test per dialect (TestX/sqlite,
// TestX/postgres): the storage conformance suite.
func eachDialect(t *testing.T, fn func(t *testing.T, d dialect)) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) { fn(t, d) })
	}
}

// pgTemplate is the migrated database every PostgreSQL test clones.
const pgTemplate = "loopd_template"

// openDialect opens an empty, migrated store of dialect d for tb, closed
// when tb ends.
func openDialect(tb testing.TB, d dialect, opts Options) *Store {
	tb.Helper()
	var s *Store
	var err error
	switch d {
	case sqliteDialect:
		s, err = Open(tb.Context(), filepath.Join(tb.TempDir(), "loopd.db"), opts)
	case postgresDialect:
		s, err = OpenPostgres(tb.Context(), pgDatabase(tb), opts)
	default:
		tb.Fatalf("unknown dialect %q", d)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// pgDatabase is the URL of a new migrated PostgreSQL database for tb.
func pgDatabase(tb testing.TB) string {
	return pgtest.Database(tb, pgTemplate, func(ctx context.Context, url string) error {
		s, err := OpenPostgres(ctx, url, Options{})
		if err != nil {
			return err
		}
		return s.Close()
	})
}
