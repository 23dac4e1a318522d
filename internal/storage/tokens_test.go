package storage

import (
	"errors"
	"testing"
)

// A token is found by its hash while in use, never after it is revoked;
// a name has one token in use at a time, and a new one after a revoke.
func TestTokens(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		s := openDialect(t, d, Options{})
		ctx := t.Context()
		create := func(name, token string) (APIToken, error) {
			var tok APIToken
			err := s.Write(ctx, func(tx *Tx) error {
				var err error
				tok, err = tx.InsertToken(name, TokenHash(token))
				return err
			})
			return tok, err
		}
		alice, err := create("alice", "secret-a")
		if err != nil {
			t.Fatal(err)
		}
		if alice.SHA256 == "secret-a" || len(alice.SHA256) != 64 || alice.ID != alice.SHA256[:12] {
			t.Fatalf("stored %+v: want the SHA-256 only", alice)
		}
		if _, err := create("alice", "secret-a2"); !errors.Is(err, ErrConflict) {
			t.Fatalf("a second token in use for alice: %v, want ErrConflict", err)
		}
		if got, err := s.TokenInUse(ctx, TokenHash("secret-a")); err != nil || got.Name != "alice" {
			t.Fatalf("lookup: %+v, %v", got, err)
		}
		if _, err := s.TokenInUse(ctx, TokenHash("secret-b")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown token: %v, want ErrNotFound", err)
		}
		if err := s.Write(ctx, func(tx *Tx) error { _, err := tx.RevokeToken("alice"); return err }); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TokenInUse(ctx, TokenHash("secret-a")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("revoked token still in use: %v", err)
		}
		if err := s.Write(ctx, func(tx *Tx) error { _, err := tx.RevokeToken("alice"); return err }); !errors.Is(err, ErrNotFound) {
			t.Fatalf("revoking again: %v, want ErrNotFound", err)
		}
		if _, err := create("alice", "secret-a2"); err != nil {
			t.Fatalf("a new token after the revoke: %v", err)
		}
		toks, err := s.Tokens(ctx)
		if err != nil || len(toks) != 2 || toks[0].RevokedAt == nil || toks[1].RevokedAt != nil {
			t.Fatalf("list: %+v, %v", toks, err)
		}
	})
}
