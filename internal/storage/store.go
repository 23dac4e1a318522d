// Package storage is loopd's persistence: runs, steps, events and
// stop-condition evaluations. It is the only package that writes SQL.
//
// Two dialects share one API and one set of statements. SQLite (Open) is
// the embedded store: one database file is opened three times, a writer
// pool with exactly one connection (WAL, immediate transactions, busy
// timeout), a reader pool whose connections are query_only, and the
// checkpointer's connection (checkpoint.go). PostgreSQL (OpenPostgres,
// postgres.go) opens a one-connection writer pool and a read-only reader
// pool over pgx's database/sql adapter, migrates from migrations/postgres
// (schema_migrations, under an advisory lock), rewrites ? placeholders to
// $n, and numbers events from a one-row counter held to commit, so that in
// both dialects events commit in seq order without gaps. The few
// statements SQLite and PostgreSQL spell differently (JSON functions,
// RETURNING instead of LastInsertId, sums of booleans) choose their form
// by Store.pg, fixed at open. Every state change is written together with
// its event row in one transaction (see Store.Write), and followers are
// woken through the Notify hook after the commit.
//
// PostgreSQL is the store of a fleet of workers (loopd --store): runs are
// leased (leases.go: lease_owner, lease_epoch, lease_expires_at on the
// database clock; a FOR UPDATE SKIP LOCKED claim, one-statement renewals on
// a connection of their own), every runner transaction begins with the
// fenced update of its run (WithFence), and the writing sessions are
// bounded (Options.Session). Every event's insert also queues NOTIFY
// loopd_events, delivered at its commit, and FollowCommits (listen.go)
// turns those into the same wake-ups Notify gives for this process's own
// commits, re-reading seq > last from the table, with a poll as fallback.
// Still to come: events numbered as the last statement before COMMIT
// (shorter counter lock), and a writer pool of more than one connection
// now that leases, not the single writer, keep runs apart.
package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

const driverName = "sqlite"

func init() {
	// modernc.org/sqlite uses ? placeholders; tell sqlx so Rebind and
	// named queries work.
	sqlx.BindDriver(driverName, sqlx.QUESTION)
}

// ErrNotFound is returned when a run, step or event does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned by compare-and-set updates whose expected state
// no longer holds.
var ErrConflict = errors.New("state changed concurrently")

// AmbiguousError is returned when a run id prefix matches several runs.
type AmbiguousError struct {
	Prefix  string
	Matches []string // a few of the matching ids
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("run id prefix %q is ambiguous: it matches %s", e.Prefix, strings.Join(e.Matches, ", "))
}

// Options configure a Store.
type Options struct {
	// Notify is called after every commit that added events, with the
	// newest event seq. It must not block.
	Notify func(seq int64)
	// Now returns the current time; defaults to time.Now.
	Now func() time.Time
	// Readers is the size of the reader pool; default 8.
	Readers int
	// CheckpointEvery is how many commits the WAL collects before the
	// background checkpointer copies them into the database file (and at
	// most CheckpointPeriod passes); defaults 200 and 2s.
	CheckpointEvery  int
	CheckpointPeriod time.Duration
	// Session bounds the PostgreSQL sessions that write (a fleet
	// worker's); zero values leave the server's defaults. Ignored by
	// SQLite.
	Session Session
}

// Store is the loopd database.
type Store struct {
	w      *sqlx.DB // exactly one connection: SQLite has one writer anyway
	r      *sqlx.DB // query_only connections
	writes *stmts   // prepared on w
	reads  *stmts   // prepared on r
	ckpt   *checkpointer
	notify func(int64)
	// notifyRuns, when set, is called with the runs whose events a
	// commit wrote, after notify.
	notifyRuns func(seq int64, runs []string)
	now        func() time.Time
	hook       EventHook // called in the transaction of every event; nil for none
	pg         bool      // the PostgreSQL dialect (OpenPostgres); SQLite otherwise
	// lease is PostgreSQL's one connection for lease renewals and reads
	// (leases.go), apart from the writer so that a runner's transaction
	// never delays a heartbeat; nil for SQLite.
	lease *sqlx.DB
	// pgcfg is the PostgreSQL connection's configuration, for the
	// LISTEN connection of FollowCommits; nil for SQLite.
	pgcfg       *pgx.ConnConfig
	onFollowErr func(error) // FollowCommits' failed reads (SetFollowErrors)
	// flags counts the commits that changed a run's Flags (FlagsVersion).
	flags atomic.Uint64
}

// Open opens (creating if needed) and migrates the database at path.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("open db: path %q must not contain '?'", path)
	}
	if err := ownerOnly(path); err != nil {
		return nil, err
	}
	// synchronous=NORMAL in WAL mode: a commit survives any crash of loopd
	// (kill -9 included); only a power loss may drop the last commits, never
	// corrupt the file. FULL would fsync on every step.
	common := "_busy_timeout=10000&_foreign_keys=1&_journal_mode=WAL&_synchronous=NORMAL"
	// The writer never checkpoints: the checkpointer does, beside it.
	w, err := sqlx.Open(driverName, path+"?"+common+"&_txlock=immediate&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		return nil, fmt.Errorf("open db: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open db %s: %w", path, err)
	}
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sqlx.Open(driverName, path+"?"+common+"&_query_only=1")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open db readers: %w", err)
	}
	n := opts.Readers
	if n <= 0 {
		n = 8
	}
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	every, period := opts.CheckpointEvery, opts.CheckpointPeriod
	if every <= 0 {
		every = checkpointEvery
	}
	if period <= 0 {
		period = checkpointPeriod
	}
	ckpt, err := newCheckpointer(path, common, every, period)
	if err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	s := &Store{w: w, r: r, writes: newStmts(w, false, false), reads: newStmts(r, true, false), ckpt: ckpt, notify: opts.Notify, now: opts.Now}
	if err := s.writes.prepare(ctx, hotWrites, hotNamed); err != nil {
		s.Close()
		return nil, err
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.notify == nil {
		s.notify = func(int64) {}
	}
	return s, nil
}

// SetNotify replaces the commit hook; used once at daemon start, before any
// write, when the bus is created after the store.
func (s *Store) SetNotify(fn func(seq int64)) { s.notify = fn }

// SetNotifyRuns sets a second commit hook that is also told which runs'
// events the commit wrote (see events.Bus.PublishRuns); like SetNotify,
// once, before any write.
func (s *Store) SetNotifyRuns(fn func(seq int64, runs []string)) { s.notifyRuns = fn }

// Close stops the checkpointer and closes the pools.
func (s *Store) Close() error {
	var err error
	if s.ckpt != nil {
		err = s.ckpt.close()
	}
	s.reads.close()
	s.writes.close()
	if s.lease != nil {
		err = errors.Join(err, s.lease.Close())
	}
	return errors.Join(err, s.r.Close(), s.w.Close())
}

// Now is the store's clock in Unix milliseconds.
func (s *Store) Now() int64 { return s.now().UnixMilli() }

// IntegrityCheck runs PRAGMA integrity_check and returns its verdict ("ok"
// when healthy).
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	if s.pg {
		return "", errors.New("integrity check: PRAGMA integrity_check is SQLite's; PostgreSQL checks its own pages (data checksums, amcheck)")
	}
	var res string
	err := s.r.GetContext(ctx, &res, "PRAGMA integrity_check")
	return res, err
}

// Tx is a write transaction. Its methods are the only way state changes.
type Tx struct {
	tx      *sqlx.Tx
	writes  *stmts
	ctx     context.Context
	now     int64
	lastSeq int64
	runs    []string // the runs whose events this transaction wrote
	hook    EventHook
	pg      bool
	// flags is set by the statements that change a run's Flags.
	flags bool
}

// Now is the transaction's timestamp in Unix milliseconds: every row a
// transaction writes carries the same time.
func (t *Tx) Now() int64 { return t.now }

// Write runs fn in one immediate transaction on the writer connection and
// commits it. Events added with Tx.Event become visible to followers only
// after the commit, and Notify is called then.
func (s *Store) Write(ctx context.Context, fn func(tx *Tx) error) error {
	sqlTx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	tx := &Tx{tx: sqlTx, writes: s.writes, ctx: ctx, now: s.Now(), hook: s.hook, pg: s.pg}
	if s.pg {
		// A fleet runner's transaction begins with its run's fence
		// (leases.go); the embedded store has no lease to check.
		if err := s.fence(ctx, tx); err != nil {
			_ = sqlTx.Rollback()
			return err
		}
	}
	if err := fn(tx); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if tx.flags {
		// Before the commit, so that a transaction that begins after it
		// sees a new version (the writer connection is free again before
		// Commit returns), and after it, so that a reader that read the
		// old flags after the first count reads again. After a failed
		// commit too: it costs a read.
		s.flags.Add(1)
	}
	err = sqlTx.Commit()
	if tx.flags {
		s.flags.Add(1)
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if s.ckpt != nil {
		s.ckpt.committed()
	}
	if tx.lastSeq > 0 {
		s.notify(tx.lastSeq)
		if s.notifyRuns != nil {
			s.notifyRuns(tx.lastSeq, tx.runs)
		}
	}
	return nil
}

// FlagsVersion returns a number that changes after every commit that
// changes a run's Flags (its status or a user's request), and whether it
// covers every writer of the database. A runner reads its run's Flags
// between every two steps; while the version stays the same, what it read
// last is still what the database holds, and the read (a statement, some
// 60 µs of the daemon's CPU per step) can be skipped, also inside a
// transaction that began after the version was read. It covers every
// writer of SQLite: one daemon holds the database (its home's lock) and
// every write goes through its Store. Not PostgreSQL's: other workers and
// their clients write to it.
func (s *Store) FlagsVersion() (uint64, bool) {
	return s.flags.Load(), !s.pg
}

// Result codes of SQLite errors that go away by themselves (the disk has
// space again, a lock is released, the file system is writable again).
// Extended codes carry the primary code in their low byte.
const (
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteReadonly = 8
	sqliteIOErr    = 10
	sqliteFull     = 13
	sqliteCantOpen = 14
)

// Transient reports whether a failed write may succeed if retried later
// unchanged: the disk is full, the file system is read-only or failing, or
// the database is locked. Constraint violations and bugs are not transient.
func Transient(err error) bool {
	if pgTransient(err) {
		return true
	}
	var se interface{ Code() int }
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteBusy, sqliteLocked, sqliteReadonly, sqliteIOErr, sqliteFull, sqliteCantOpen:
			return true
		}
	}
	return false
}

// Explain rewrites a storage error for a user: a full disk or a read-only
// LOOPD_HOME are named as such, with what to do.
func Explain(err error) string {
	if msg, ok := pgExplain(err); ok {
		return msg
	}
	var se interface{ Code() int }
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteFull:
			return "LOOPD_HOME is out of disk space; free some space: runs continue by themselves, nothing committed is lost (" + err.Error() + ")"
		case sqliteReadonly, sqliteCantOpen:
			return "LOOPD_HOME is not writable; make it writable again: runs continue by themselves, nothing committed is lost (" + err.Error() + ")"
		case sqliteIOErr:
			return "I/O error on LOOPD_HOME's database; check the disk (" + err.Error() + ")"
		}
	}
	return err.Error()
}
