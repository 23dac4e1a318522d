package storage

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"github.com/jmoiron/sqlx"

	"github.com/loopd/loopd/migrations"
)

// pgDriverName is pgx's database/sql driver; sqlx knows it binds $n.
const pgDriverName = "pgx"

// OpenPostgres opens the PostgreSQL database at store (postgres://… or a
// key=value connection string) and migrates it. The Store has the same API
// and the same guarantees as Open's: writes are serialized through one
// connection, events are numbered in commit order without gaps, the reader
// pool cannot write (default_transaction_read_only). Options.
// CheckpointEvery and CheckpointPeriod do not apply.
func OpenPostgres(ctx context.Context, store string, opts Options) (*Store, error) {
	cfg, err := pgx.ParseConfig(store)
	if err != nil {
		// pgx's message may quote the URL; a password must not reach a log.
		return nil, fmt.Errorf("open postgres: the store URL does not parse (postgres://user@host/db?…): %s", redact(err.Error(), store))
	}
	// Migrations run unbounded (a long one must not hit the statement
	// timeout of a worker's session), on a connection of their own when
	// the sessions are bounded.
	mcfg := cfg.Copy()
	opts.Session.apply(cfg)
	// One writer connection: the callers rely on the serialization SQLite's
	// single writer gives (read, decide, write in one transaction without
	// another writer in between, within this process). Writers on other
	// machines are fenced by leases (leases.go).
	w := sqlx.NewDb(stdlib.OpenDB(*cfg.Copy()), pgDriverName)
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	m := w
	if opts.Session != (Session{}) {
		m = sqlx.NewDb(stdlib.OpenDB(*mcfg), pgDriverName)
		m.SetMaxOpenConns(1)
		defer m.Close()
	}
	if err := m.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open postgres %s: %w", redactURL(store), err) // pgx names only user and database
	}
	if err := migratePostgres(ctx, m, migrations.Postgres); err != nil {
		w.Close()
		return nil, err
	}
	rcfg := cfg.Copy()
	rcfg.RuntimeParams["default_transaction_read_only"] = "on"
	r := sqlx.NewDb(stdlib.OpenDB(*rcfg), pgDriverName)
	n := opts.Readers
	if n <= 0 {
		n = 8
	}
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	l := sqlx.NewDb(stdlib.OpenDB(*cfg.Copy()), pgDriverName)
	l.SetMaxOpenConns(1)
	l.SetMaxIdleConns(1)
	s := &Store{w: w, r: r, writes: newStmts(w, false, true), reads: newStmts(r, true, true),
		notify: opts.Notify, now: opts.Now, pg: true, lease: l, pgcfg: cfg.Copy()}
	if s.now == nil {
		s.now = time.Now
	}
	if s.notify == nil {
		s.notify = func(int64) {}
	}
	return s, nil
}

// PostgresSchemaVersion is the number of PostgreSQL migrations this
// binary knows.
func PostgresSchemaVersion() int {
	sub, err := fs.Sub(migrations.Postgres, "postgres")
	if err != nil {
		return 0
	}
	ms, err := loadMigrations(sub)
	if err != nil {
		return 0
	}
	return len(ms)
}

// MigratePostgres brings the PostgreSQL database at store to this
// binary's schema (the migrations it lacks, under the advisory lock) and
// does nothing else: `loopd migrate`.
func MigratePostgres(ctx context.Context, store string) error {
	s, err := OpenPostgres(ctx, store, Options{Readers: 1})
	if err != nil {
		return err
	}
	return s.Close()
}

// Session bounds a PostgreSQL session that writes. A worker cut off in
// the middle of a transaction otherwise keeps its backend, and the row
// locks it holds, until TCP gives up (hours): its run would be skipped by
// every claim (SKIP LOCKED) long after its lease expired.
type Session struct {
	// IdleInTransaction ends a session idle inside a transaction
	// (idle_in_transaction_session_timeout); keep it well under the
	// lease TTL (a third of it).
	IdleInTransaction time.Duration
	// Statement bounds every statement (statement_timeout).
	Statement time.Duration
	// Lock bounds every wait for a lock (lock_timeout).
	Lock time.Duration
}

// apply sets the session's bounds as run-time parameters of cfg's
// connections.
func (s Session) apply(cfg *pgx.ConnConfig) {
	for name, d := range map[string]time.Duration{"idle_in_transaction_session_timeout": s.IdleInTransaction,
		"statement_timeout": s.Statement, "lock_timeout": s.Lock} {
		if d > 0 {
			cfg.RuntimeParams[name] = fmt.Sprint(d.Milliseconds())
		}
	}
}

// Dialect names the store's SQL dialect: "sqlite" or "postgres".
func (s *Store) Dialect() string {
	if s.pg {
		return "postgres"
	}
	return "sqlite"
}

// RedactStore is a store URL (or connection string) with its password
// hidden, to show or log.
func RedactStore(store string) string { return redactURL(store) }

// redactURL hides the password of a store URL: postgres://user:pw@… (as
// url.URL.Redacted does) or a key=value connection string's password=….
func redactURL(store string) string {
	if u, err := url.Parse(store); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return passwordKV.ReplaceAllString(store, "${1}xxxxx")
}

var passwordKV = regexp.MustCompile(`(?i)(password\s*=\s*)('[^']*'|\S+)`)

// redact hides store's password, raw or percent-encoded, wherever msg
// quotes it.
func redact(msg, store string) string {
	msg = passwordKV.ReplaceAllString(msg, "${1}xxxxx")
	u, err := url.Parse(store)
	if err != nil || u.User == nil {
		return msg
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
		msg = strings.ReplaceAll(msg, url.UserPassword("", pw).String()[1:], "xxxxx")
	}
	return msg
}

// migrationLock is the advisory lock key migrations hold, so that workers
// starting together against an empty database migrate one at a time.
const migrationLock = 0x6c6f6f7064 // "loopd"

// migratePostgres applies every migration of fsys's postgres/ newer than
// those recorded in schema_migrations, each in its own transaction under
// the advisory lock, and refuses a database newer than the binary.
func migratePostgres(ctx context.Context, db *sqlx.DB, fsys fs.FS) error {
	sub, err := fs.Sub(fsys, "postgres")
	if err != nil {
		return err
	}
	ms, err := loadMigrations(sub)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	for {
		done, err := migrateOne(ctx, db, ms)
		if err != nil || done {
			return err
		}
	}
}

// migrateOne applies the next migration, if any, in one transaction.
func migrateOne(ctx context.Context, db *sqlx.DB, ms []migration) (done bool, err error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() {
		if err != nil || done {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return false, fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at BIGINT  NOT NULL)`); err != nil {
		return false, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	var current int
	if err := tx.GetContext(ctx, &current, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	if current > len(ms) {
		return false, fmt.Errorf("database schema version %d is newer than this loopd understands (%d): run the newer loopd", current, len(ms))
	}
	if current == len(ms) {
		return true, nil
	}
	m := ms[current]
	// No arguments: pgx sends the file with the simple protocol, several
	// statements at once.
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, fmt.Errorf("migration postgres/%s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.version, m.name, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("migration postgres/%s: record it: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration postgres/%s: commit: %w", m.name, err)
	}
	return false, nil
}

// pgTransient reports PostgreSQL failures that go away by themselves: the
// connection is lost or refused, the server shuts down, restarts or fails
// over (a read-only standby), it is out of disk, memory or connections, or
// a lock wait or serialization failed.
func pgTransient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"),       // insufficient resources (disk full, out of memory, too many connections)
			pe.Code == "40001", pe.Code == "40P01", // serialization failure, deadlock
			pe.Code == "55P03",                                         // lock_not_available (lock_timeout)
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // shutting down, cannot connect now
			pe.Code == "25006": // read-only transaction: a standby after a failover
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || errors.Is(err, driver.ErrBadConn) || pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}

// pgExplain names the PostgreSQL failures a user can act on.
func pgExplain(err error) (string, bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "53100" {
		return "the PostgreSQL server is out of disk space; free some space: runs continue by themselves, nothing committed is lost (" + err.Error() + ")", true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return "cannot reach the PostgreSQL server; runs continue by themselves once it is back, nothing committed is lost (" + err.Error() + ")", true
	}
	return "", false
}
