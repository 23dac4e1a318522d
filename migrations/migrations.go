// Package migrations holds loopd's forward-only SQLite schema migrations.
//
// Each file is named NNNN_name.sql and is applied once, in order, in its own
// transaction; the number of the last applied file is kept in
// PRAGMA user_version. Never edit a file that has shipped: add a new one.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
