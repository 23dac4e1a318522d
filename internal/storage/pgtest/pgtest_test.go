package pgtest

import (
	"context"
	"database/sql"
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// Two tests' databases are separate: a table made in one is absent from
// the other, and both come from the template prepared once.
func TestDatabasesAreIsolated(t *testing.T) {
	inits := 0
	init := func(ctx context.Context, url string) error {
		inits++
		db, err := sql.Open("pgx", url)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, `CREATE TABLE marker (v int); INSERT INTO marker VALUES (7)`)
		return err
	}
	open := func(url string) *sql.DB {
		db, err := sql.Open("pgx", url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a := open(Database(t, "tmpl_isolated", init))
	b := open(Database(t, "tmpl_isolated", init))
	if inits != 1 {
		t.Fatalf("template initialised %d times, want 1", inits)
	}
	if _, err := a.Exec(`CREATE TABLE only_in_a (x int)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(`SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("b sees a's table: n=%d err=%v", n, err)
	}
	if err := b.QueryRow(`SELECT v FROM marker`).Scan(&n); err != nil || n != 7 {
		t.Fatalf("clone lacks the template's rows: v=%d err=%v", n, err)
	}
	// The server never runs as root (it refuses to), and listens on no TCP port.
	var listen string
	if err := a.QueryRow(`SHOW listen_addresses`).Scan(&listen); err != nil || listen != "" {
		t.Fatalf("listen_addresses = %q (%v), want none", listen, err)
	}
}
