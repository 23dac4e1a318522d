package storage

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/loopd/loopd/migrations"
)

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var ms []migration
	for i, name := range names {
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", name)
		}
		if v != i+1 {
			return nil, fmt.Errorf("migration %s: expected number %04d (no gaps, no duplicates)", name, i+1)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	return ms, nil
}

// SchemaVersion is the number of migrations this binary knows.
func SchemaVersion() int {
	ms, err := loadMigrations(migrations.FS)
	if err != nil {
		return 0
	}
	return len(ms)
}

// migrate applies every migration newer than the database's user_version,
// each in its own transaction, and refuses a database newer than the binary.
func migrate(ctx context.Context, db *sqlx.DB) error {
	return migrateFS(ctx, db, migrations.FS)
}

func migrateFS(ctx context.Context, db *sqlx.DB, fsys fs.FS) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	var current int
	if err := db.GetContext(ctx, &current, "PRAGMA user_version"); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > len(ms) {
		return fmt.Errorf("database schema version %d is newer than this loopd understands (%d): "+
			"run the newer loopd, or point LOOPD_HOME elsewhere", current, len(ms))
	}
	for _, m := range ms[current:] {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migration %s: begin: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		// user_version lives in the database header and is written inside
		// the transaction, so a migration and its version commit together.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version)); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migration %s: set version: %w", m.name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: commit: %w", m.name, err)
		}
	}
	return nil
}
