package storage

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage/pgtest"
	"github.com/loopd/loopd/migrations"
)

// emptyDatabase is a PostgreSQL database with no loopd schema yet.
func emptyDatabase(tb testing.TB) string {
	return pgtest.Database(tb, "loopd_empty", func(context.Context, string) error { return nil })
}

// Both migration series describe the same tables and columns: a SQLite
// migration without its PostgreSQL twin (or the reverse) fails here.
func TestPostgresSchemaMatchesSQLite(t *testing.T) {
	lite := openDialect(t, sqliteDialect, Options{})
	pg := openDialect(t, postgresDialect, Options{})
	columns := func(db *sqlx.DB, q string) map[string][]string {
		t.Helper()
		var rows []struct {
			Table  string `db:"t"`
			Column string `db:"c"`
		}
		if err := db.Select(&rows, q); err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, r := range rows {
			out[r.Table] = append(out[r.Table], r.Column)
		}
		for _, cs := range out {
			slices.Sort(cs)
		}
		return out
	}
	want := columns(lite.r, `SELECT m.name AS t, p.name AS c FROM sqlite_master m, pragma_table_info(m.name) p
		WHERE m.type = 'table'`)
	// PostgreSQL's own bookkeeping: the migration record, the event counter,
	// and the rowid SQLite has implicitly.
	got := columns(pg.r, `SELECT table_name AS t, column_name AS c FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name NOT IN ('schema_migrations', 'event_counter')
		AND NOT (table_name = 'runs' AND column_name = 'rowid')`)
	for table, cs := range want {
		if !slices.Equal(got[table], cs) {
			t.Errorf("table %s:\n sqlite   %v\n postgres %v", table, cs, got[table])
		}
	}
	for table := range got {
		if _, ok := want[table]; !ok {
			t.Errorf("table %s exists only in PostgreSQL", table)
		}
	}
	if len(want) < 9 {
		t.Fatalf("suspiciously few SQLite tables: %v", want)
	}
}

func TestPostgresReopenAndRefuseNewer(t *testing.T) {
	url := emptyDatabase(t)
	for i := range 2 {
		s, err := OpenPostgres(t.Context(), url, Options{})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		var n int
		if err := s.r.Get(&n, `SELECT COUNT(*) FROM schema_migrations`); err != nil || n != len(postgresMigrations(t)) {
			t.Fatalf("open %d: %d migrations recorded (%v), want %d", i, n, err, len(postgresMigrations(t)))
		}
		if i == 1 {
			if _, err := s.w.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, '0099_future.sql', 0)`); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
	}
	_, err := OpenPostgres(t.Context(), url, Options{})
	if err == nil || !strings.Contains(err.Error(), "newer than this loopd") {
		t.Fatalf("open a database from a newer loopd = %v, want a refusal", err)
	}
}

// Workers started together against an empty database migrate one at a
// time (the advisory lock): every open succeeds and each migration is
// applied once.
func TestPostgresConcurrentMigrators(t *testing.T) {
	url := emptyDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := OpenPostgres(t.Context(), url, Options{})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	s := openURL(t, url)
	var versions []int
	if err := s.r.Select(&versions, `SELECT version FROM schema_migrations ORDER BY version`); err != nil {
		t.Fatal(err)
	}
	want := make([]int, len(postgresMigrations(t)))
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(versions, want) {
		t.Errorf("schema_migrations = %v, want %v", versions, want)
	}
}

// postgresMigrations lists the PostgreSQL migration files, in order.
func postgresMigrations(t *testing.T) []string {
	t.Helper()
	names, err := fs.Glob(migrations.Postgres, "postgres/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("postgres migrations: %v %v", names, err)
	}
	return names
}

func openURL(t *testing.T, url string) *Store {
	t.Helper()
	s, err := OpenPostgres(t.Context(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Events are numbered in commit order: two stores on one database (as two
// workers will be), each with writers that pause inside their
// transactions, and a follower that reads seq > last as it goes misses
// nothing. With a sequence (numbered at insert, committed in another
// order) such a follower skips events.
func TestPostgresEventSeqIsCommitOrdered(t *testing.T) {
	url := pgDatabase(t)
	a, b := openURL(t, url), openURL(t, url)
	if err := a.Write(t.Context(), func(tx *Tx) error {
		return tx.InsertRun(Run{ID: "r", Workspace: "/ws", Goal: "g", Config: "{}", Conditions: "{}", Status: api.RunRunning}, nil)
	}); err != nil {
		t.Fatal(err)
	}
	var before int64
	if err := a.r.Get(&before, `SELECT COUNT(*) FROM events`); err != nil {
		t.Fatal(err)
	}
	const perWriter = 60
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	for w, s := range []*Store{a, b, a, b} {
		wg.Go(func() {
			for i := range perWriter {
				err := s.Write(ctx, func(tx *Tx) error {
					for k := range 1 + i%3 {
						if _, err := tx.Event("r", nil, events.ConditionProgressed, map[string]int{"w": w, "i": i, "k": k}); err != nil {
							return err
						}
						time.Sleep(time.Duration(i%4) * 100 * time.Microsecond)
					}
					return nil
				})
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var seen []int64
	last := before
	follow := func() {
		evs, err := a.Events(t.Context(), "", last, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			seen = append(seen, e.Seq)
			last = e.Seq
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		follow()
	}
	follow()
	var total, maxSeq int64
	if err := a.r.Get(&total, `SELECT COUNT(*) FROM events`); err != nil {
		t.Fatal(err)
	}
	if err := a.r.Get(&maxSeq, `SELECT MAX(seq) FROM events`); err != nil {
		t.Fatal(err)
	}
	want := before + int64(4*(perWriter/3)*(1+2+3))
	if total != want || maxSeq != total {
		t.Errorf("count(*) = %d, max(seq) = %d, want both %d (gap-free)", total, maxSeq, want)
	}
	if int64(len(seen)) != total-before {
		t.Errorf("the seq > last follower saw %d of %d events", len(seen), total-before)
	}
}

// A store's reader pool cannot write, in either dialect.
func TestReadersCannotWrite(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s, _ := openTest(t, d)
		newRun(t, s, "r1")
		if _, err := s.r.Exec(`UPDATE runs SET goal = 'changed'`); err == nil {
			t.Fatal("an UPDATE through the reader pool succeeded")
		}
		if r, err := s.Run(t.Context(), "r1"); err != nil || r.Goal != "goal" {
			t.Fatalf("goal = %q (%v) after a refused write", r.Goal, err)
		}
	})
}

// A server that is not there is a transient failure, explained as such.
func TestPostgresUnreachableIsTransient(t *testing.T) {
	url := fmt.Sprintf("postgres://postgres@/loopd?host=%s&sslmode=disable&connect_timeout=2", t.TempDir())
	_, err := OpenPostgres(t.Context(), url, Options{})
	if err == nil {
		t.Fatal("opened a database with no server")
	}
	if !Transient(err) {
		t.Errorf("Transient(%v) = false", err)
	}
	if msg := Explain(err); !strings.Contains(msg, "cannot reach the PostgreSQL server") {
		t.Errorf("Explain = %q", msg)
	}
}

// A migration that fails leaves nothing of itself behind (PostgreSQL's DDL
// is transactional) and is not recorded; the ones before it stay.
func TestPostgresMigrationsRollBackAsAUnit(t *testing.T) {
	db, err := sqlx.Open(pgDriverName, emptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fsys := fstest.MapFS{
		"postgres/0001_ok.sql":  {Data: []byte(`CREATE TABLE ok_table (a int);`)},
		"postgres/0002_bad.sql": {Data: []byte(`CREATE TABLE half_table (a int); SELEC broken;`)},
	}
	err = migratePostgres(t.Context(), db, fsys)
	if err == nil || !strings.Contains(err.Error(), "0002_bad.sql") {
		t.Fatalf("migrate = %v, want an error naming 0002_bad.sql", err)
	}
	var n int
	if err := db.Get(&n, `SELECT COUNT(*) FROM pg_tables WHERE tablename = 'half_table'`); err != nil || n != 0 {
		t.Errorf("the failed migration's table exists (%d, %v)", n, err)
	}
	if err := db.Get(&n, `SELECT COUNT(*) FROM pg_tables WHERE tablename = 'ok_table'`); err != nil || n != 1 {
		t.Errorf("the good migration's table is missing (%d, %v)", n, err)
	}
	var versions []int
	if err := db.Select(&versions, `SELECT version FROM schema_migrations`); err != nil || !slices.Equal(versions, []int{1}) {
		t.Errorf("schema_migrations = %v (%v), want [1]", versions, err)
	}
}

// A store URL's password never reaches an error message.
func TestPostgresErrorsHideThePassword(t *testing.T) {
	for _, url := range []string{
		fmt.Sprintf("postgres://loopd:s3cretpw@/loopd?host=%s&connect_timeout=2", t.TempDir()),
		"postgres://loopd:s3cretpw@localhost:notaport/loopd",
		fmt.Sprintf("host=%s user=loopd password=s3cretpw connect_timeout=2", t.TempDir()),
		"postgres://loopd:s3cret%40pw@localhost:notaport/loopd",
	} {
		_, err := OpenPostgres(t.Context(), url, Options{})
		if err == nil {
			t.Fatalf("open %s succeeded", url)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}
