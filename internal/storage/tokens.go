package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
)

// APIToken is a row of api_tokens: a user's bearer token for a fleet's
// API nodes, known only by its SHA-256.
type APIToken struct {
	ID        string `db:"id"`   // the first 12 hex digits of the hash: safe to show
	Name      string `db:"name"` // whose token it is
	SHA256    string `db:"sha256"`
	CreatedAt int64  `db:"created_at"`
	RevokedAt *int64 `db:"revoked_at"`
}

const tokenColumns = `id, name, sha256, created_at, revoked_at`

// TokenHash is the hex SHA-256 a token is stored and looked up by.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// InsertToken records the token whose hash is hash for name: ErrConflict
// when name already has a token in use.
func (t *Tx) InsertToken(name, hash string) (APIToken, error) {
	var n int
	if err := t.get(&n, `SELECT COUNT(*) FROM api_tokens WHERE name = ? AND revoked_at IS NULL`, name); err != nil {
		return APIToken{}, err
	}
	if n > 0 {
		return APIToken{}, fmt.Errorf("%w: %s already has a token in use", ErrConflict, name)
	}
	tok := APIToken{ID: hash[:12], Name: name, SHA256: hash, CreatedAt: t.now}
	if _, err := t.exec(`INSERT INTO api_tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, NULL)`,
		tok.ID, tok.Name, tok.SHA256, tok.CreatedAt); err != nil {
		return APIToken{}, fmt.Errorf("insert token: %w", err)
	}
	return tok, nil
}

// RevokeToken revokes name's token in use: ErrNotFound when it has none.
func (t *Tx) RevokeToken(name string) (APIToken, error) {
	var tok APIToken
	err := t.get(&tok, `SELECT `+tokenColumns+` FROM api_tokens WHERE name = ? AND revoked_at IS NULL`, name)
	if errors.Is(err, sql.ErrNoRows) {
		return tok, ErrNotFound
	}
	if err != nil {
		return tok, err
	}
	if _, err := t.exec(`UPDATE api_tokens SET revoked_at = ? WHERE id = ?`, t.now, tok.ID); err != nil {
		return tok, fmt.Errorf("revoke token: %w", err)
	}
	tok.RevokedAt = &t.now
	return tok, nil
}

// TokenInUse returns the token in use whose hash is hash: ErrNotFound for
// an unknown or revoked one.
func (s *Store) TokenInUse(ctx context.Context, hash string) (APIToken, error) {
	var tok APIToken
	err := s.get(ctx, &tok, `SELECT `+tokenColumns+` FROM api_tokens WHERE sha256 = ? AND revoked_at IS NULL`, hash)
	if errors.Is(err, sql.ErrNoRows) {
		return tok, ErrNotFound
	}
	return tok, err
}

// Tokens lists every token, in use or revoked, oldest first.
func (s *Store) Tokens(ctx context.Context) ([]APIToken, error) {
	var toks []APIToken
	err := s.sel(ctx, &toks, `SELECT `+tokenColumns+` FROM api_tokens ORDER BY created_at, id`)
	return toks, err
}
