package tokens

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

func testService(t *testing.T) *Service {
	t.Helper()
	st, err := storage.Open(context.Background(), filepath.Join(t.TempDir(), "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return New(st, zap.NewNop())
}

func code(err error) api.ErrorCode {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// A token is made once, found by its header while in use, and refused
// after its revocation; the store never shows its secret again.
func TestCreateFindRevoke(t *testing.T) {
	ctx := context.Background()
	s := testService(t)
	tok, err := s.Create(ctx, "ana@example.org")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.Secret, Prefix) || len(tok.Secret) != len(Prefix)+64 {
		t.Fatalf("secret %q: want %s and 64 hex digits", tok.Secret, Prefix)
	}
	if tok.ID != storage.TokenHash(tok.Secret)[:12] || tok.Name != "ana@example.org" || tok.RevokedAt != nil {
		t.Fatalf("token %+v: want the hash's first 12 digits as id, the name, not revoked", tok)
	}
	row, ok := s.InUse(ctx, "Bearer "+tok.Secret)
	if !ok || row.Name != "ana@example.org" {
		t.Fatalf("InUse(its header) = %+v, %v; want ana's row", row, ok)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Secret != "" || list[0].ID != tok.ID {
		t.Fatalf("List = %+v, %v; want the one token without its secret", list, err)
	}
	if _, err := s.Create(ctx, "ana@example.org"); code(err) != api.CodeConflict {
		t.Fatalf("a second token for ana = %v; want a conflict", err)
	}
	rev, err := s.Revoke(ctx, "ana@example.org")
	if err != nil || rev.RevokedAt == nil || rev.Secret != "" {
		t.Fatalf("Revoke = %+v, %v; want the token, revoked, no secret", rev, err)
	}
	if _, ok := s.InUse(ctx, "Bearer "+tok.Secret); ok {
		t.Fatal("a revoked token is still in use")
	}
	if _, err := s.Revoke(ctx, "ana@example.org"); code(err) != api.CodeNotFound {
		t.Fatalf("revoking again = %v; want not found", err)
	}
	if again, err := s.Create(ctx, "ana@example.org"); err != nil || again.Secret == tok.Secret {
		t.Fatalf("a new token after the revocation = %+v, %v; want a new secret", again, err)
	}
}

// A bad name is refused before anything is written.
func TestCreateRefusesBadNames(t *testing.T) {
	ctx := context.Background()
	s := testService(t)
	for _, n := range []string{"", "-ana", "ana bob", strings.Repeat("a", 65), "ana\x1b[31m", "ana/bob"} {
		if _, err := s.Create(ctx, n); code(err) != api.CodeBadRequest || !strings.Contains(err.Error(), "token name") {
			t.Errorf("Create(%q) = %v; want a bad request naming the token name", n, err)
		}
	}
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List after refusals = %+v, %v; want none", list, err)
	}
}

// Only a Bearer header with a token of the form is looked up.
func TestBearer(t *testing.T) {
	secret := Prefix + strings.Repeat("ab", 32)
	for _, tt := range []struct {
		header string
		ok     bool
	}{
		{"Bearer " + secret, true},
		{"bearer   " + secret, true},
		{"Basic " + secret, false},
		{"Bearer", false},
		{secret, false},
		{"Bearer other_" + secret, false},
		{"Bearer " + Prefix + strings.Repeat("a", maxLen), false},
	} {
		got, ok := Bearer(tt.header)
		if ok != tt.ok || ok && got != secret {
			t.Errorf("Bearer(%.40q) = %q, %v; want ok %v", tt.header, got, ok, tt.ok)
		}
	}
}
