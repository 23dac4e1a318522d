package storage

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/jmoiron/sqlx"
)

// stmts holds prepared statements by their SQL text. modernc.org/sqlite
// parses a statement on every call otherwise, which costs more than
// running most of loopd's queries.
//
// The writer pool has a single connection, which a transaction holds: a
// statement cannot be prepared on the pool from inside one. So the
// writer's statements are the hot ones of the step path, prepared when the
// store opens (hotWrites, and hotNamed for those with :name parameters,
// whose parameter list is compiled then too); any other write is prepared
// on the spot. The reader pool prepares lazily, once per statement and
// connection.
//
// On PostgreSQL nothing is prepared here: pgx prepares and caches every
// statement per connection by itself. stmts then only rewrites each
// statement's ? placeholders to $n, once per text (sql).
type stmts struct {
	db    *sqlx.DB
	lazy  bool
	pg    bool
	bound sync.Map // PostgreSQL: statement text with ? → with $n
	mu    sync.Mutex
	m     map[string]*sqlx.Stmt
	named map[string]*sqlx.NamedStmt // by their :name text; filled before any use, read-only after
}

func newStmts(db *sqlx.DB, lazy, pg bool) *stmts {
	return &stmts{db: db, lazy: lazy, pg: pg, m: map[string]*sqlx.Stmt{}, named: map[string]*sqlx.NamedStmt{}}
}

// sql is q in the dialect's placeholder syntax.
func (c *stmts) sql(q string) string {
	if !c.pg {
		return q
	}
	if b, ok := c.bound.Load(q); ok {
		return b.(string)
	}
	b := sqlx.Rebind(sqlx.DOLLAR, q)
	c.bound.Store(q, b)
	return b
}

// args converts the arguments for the dialect: PostgreSQL keeps SQLite's
// 0/1 integer flags (BIGINT with CHECK constraints), and pgx does not
// encode a Go bool into an integer column.
func (c *stmts) args(args []any) []any {
	if !c.pg {
		return args
	}
	for i, a := range args {
		if b, ok := a.(bool); ok {
			if b {
				args[i] = int64(1)
			} else {
				args[i] = int64(0)
			}
		}
	}
	return args
}

// hotWrites and hotNamed are the statements every step executes.
var (
	hotWrites = []string{qFlags, qInsertEvent, qSetStepProcess, qSetCancelCause, qInsertEvaluation, qPruneEvaluations, qSetRunStats}
	hotNamed  = []string{qInsertStep, qFinishStep}
)

// prepare prepares qs and the :name queries named now; called before any
// transaction.
func (c *stmts) prepare(ctx context.Context, qs, named []string) error {
	for _, q := range qs {
		st, err := c.db.PreparexContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		c.m[q] = st
	}
	for _, q := range named {
		st, err := c.db.PrepareNamedContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		c.named[q] = st
	}
	return nil
}

// get returns q's statement, or nil when it is not prepared and may not
// be prepared now.
func (c *stmts) get(ctx context.Context, q string) (*sqlx.Stmt, error) {
	if c.pg {
		return nil, nil
	}
	c.mu.Lock()
	st, ok := c.m[q]
	c.mu.Unlock()
	if ok || !c.lazy {
		return st, nil
	}
	// Prepared outside the lock: preparing may wait for a free connection.
	st, err := c.db.PreparexContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[q]; ok {
		st.Close() // another caller prepared it meanwhile
		return prev, nil
	}
	c.m[q] = st
	return st, nil
}

func (c *stmts) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	for _, st := range c.named {
		st.Close()
	}
}

// exec runs a write statement in the transaction, prepared once on the
// writer connection (the transaction's own).
func (t *Tx) exec(q string, args ...any) (sql.Result, error) {
	st, err := t.writes.get(t.ctx, q)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return t.tx.ExecContext(t.ctx, t.writes.sql(q), t.writes.args(args)...)
	}
	return t.tx.StmtxContext(t.ctx, st).ExecContext(t.ctx, args...)
}

// namedExec is exec with :name parameters bound from arg's db tags.
func (t *Tx) namedExec(q string, arg any) (sql.Result, error) {
	if st := t.writes.named[q]; st != nil {
		return t.tx.NamedStmtContext(t.ctx, st).ExecContext(t.ctx, arg)
	}
	bound, args, err := sqlx.Named(q, arg)
	if err != nil {
		return nil, fmt.Errorf("bind %q: %w", q, err)
	}
	return t.exec(bound, args...)
}

// get reads one row with a cached statement of the reader pool.
func (s *Store) get(ctx context.Context, dest any, q string, args ...any) error {
	st, err := s.reads.get(ctx, q)
	if err != nil {
		return err
	}
	if st == nil {
		return s.r.GetContext(ctx, dest, s.reads.sql(q), s.reads.args(args)...)
	}
	return st.GetContext(ctx, dest, args...)
}

// sel reads rows with a cached statement of the reader pool.
func (s *Store) sel(ctx context.Context, dest any, q string, args ...any) error {
	st, err := s.reads.get(ctx, q)
	if err != nil {
		return err
	}
	if st == nil {
		return s.r.SelectContext(ctx, dest, s.reads.sql(q), s.reads.args(args)...)
	}
	return st.SelectContext(ctx, dest, args...)
}

// get reads one row in the transaction.
func (t *Tx) get(dest any, q string, args ...any) error {
	st, err := t.writes.get(t.ctx, q)
	if err != nil {
		return err
	}
	if st == nil {
		return t.tx.GetContext(t.ctx, dest, t.writes.sql(q), t.writes.args(args)...)
	}
	return t.tx.StmtxContext(t.ctx, st).GetContext(t.ctx, dest, args...)
}

// sel reads rows in the transaction, unprepared.
func (t *Tx) sel(dest any, q string, args ...any) error {
	return t.tx.SelectContext(t.ctx, dest, t.writes.sql(q), t.writes.args(args)...)
}
