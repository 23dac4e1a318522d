// Package migrations holds loopd's forward-only schema migrations, one
// series per storage dialect.
//
// Each file is named NNNN_name.sql and is applied once, in order, in its own
// transaction. The SQLite series is at the top of this directory and keeps
// the number of the last applied file in PRAGMA user_version; the
// PostgreSQL series is in postgres/ and records applied files in the
// schema_migrations table. Both series must describe the same tables and
// columns (a storage test compares them). Never edit a file that has
// shipped: add a new one, to both series.
package migrations

import "embed"

// FS holds every SQLite migration file.
//
//go:embed *.sql
var FS embed.FS

// Postgres holds every PostgreSQL migration file, under postgres/.
//
//go:embed postgres/*.sql
var Postgres embed.FS
