// Package tokens makes, finds and revokes users' bearer tokens for a
// fleet's API nodes (`loopctl token`, docs/fleet.md). A token is
// "loopd_" and 64 hex digits; the store keeps only its SHA-256
// (storage.TokenHash), so the secret appears once, in the answer that
// made it. Who may manage tokens (the node's owner) is the daemon's
// decision; what a token is and how it is looked up is decided here.
package tokens

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// Prefix starts every token Create makes, so that a leaked one is
// recognizable (secret scanners, logs).
const Prefix = "loopd_"

// maxLen bounds what is hashed and looked up per request: a header of a
// megabyte costs one comparison, not a hash.
const maxLen = 256

// name is a user's name as tokens carry it.
var name = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$`)

// Service reads and writes the tokens in the store.
type Service struct {
	store *storage.Store
	log   *zap.Logger
}

// New returns the tokens of store; log receives a line per token made or
// revoked, and a failed lookup that was not a plain miss.
func New(store *storage.Store, log *zap.Logger) *Service {
	return &Service{store: store, log: log}
}

// Bearer returns the token an Authorization header carries, if it looks
// like one of a user's: scheme Bearer, the prefix, at most maxLen bytes.
// The node's own http.token is not one (tcpguard checks it).
func Bearer(header string) (string, bool) {
	scheme, got, ok := strings.Cut(header, " ")
	got = strings.TrimLeft(got, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(got, Prefix) || len(got) > maxLen {
		return "", false
	}
	return got, true
}

// InUse returns the row of the token an Authorization header carries, if
// it is one in use. Whoever knocks with a wrong token learns nothing
// else: every failure is a plain false.
func (s *Service) InUse(ctx context.Context, header string) (storage.APIToken, bool) {
	secret, ok := Bearer(header)
	if !ok {
		return storage.APIToken{}, false
	}
	tok, err := s.store.TokenInUse(ctx, storage.TokenHash(secret))
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			s.log.Warn("could not look up a bearer token", zap.String("error", storage.Explain(err)))
		}
		return storage.APIToken{}, false
	}
	return tok, true
}

// Create makes a token for the user user: the answer is the only place
// its secret appears. A bad name is a CodeBadRequest, a user with a token
// in use a CodeConflict; neither changes anything.
func (s *Service) Create(ctx context.Context, user string) (api.Token, error) {
	if !name.MatchString(user) {
		return api.Token{}, api.Errorf(api.CodeBadRequest, "token name %q: use 1 to 64 letters, digits and . _ @ + - (a user's name), starting with a letter or digit", user)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return api.Token{}, err
	}
	secret := Prefix + hex.EncodeToString(raw)
	var tok storage.APIToken
	err := s.store.Write(ctx, func(tx *storage.Tx) error {
		var err error
		tok, err = tx.InsertToken(user, storage.TokenHash(secret))
		return err
	})
	if errors.Is(err, storage.ErrConflict) {
		return api.Token{}, api.Errorf(api.CodeConflict, "%s already has a token in use; revoke it first (loopctl token revoke %s)", user, user)
	}
	if err != nil {
		return api.Token{}, err
	}
	s.log.Info("token created", zap.String("name", tok.Name), zap.String("id", tok.ID))
	out := Wire(tok)
	out.Secret = secret
	return out, nil
}

// List returns the tokens, in use and revoked, without their secrets.
func (s *Service) List(ctx context.Context) ([]api.Token, error) {
	toks, err := s.store.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.Token{}
	for _, t := range toks {
		out = append(out, Wire(t))
	}
	return out, nil
}

// Revoke revokes user's token in use: from the next request on, no API
// node of the fleet accepts it. A user without one is a CodeNotFound.
func (s *Service) Revoke(ctx context.Context, user string) (api.Token, error) {
	var tok storage.APIToken
	err := s.store.Write(ctx, func(tx *storage.Tx) error {
		var err error
		tok, err = tx.RevokeToken(user)
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return api.Token{}, api.Errorf(api.CodeNotFound, "%s has no token in use (loopctl token list)", user)
	}
	if err != nil {
		return api.Token{}, err
	}
	s.log.Info("token revoked", zap.String("name", tok.Name), zap.String("id", tok.ID))
	return Wire(tok), nil
}

// Wire is a token row as the API shows it, without its secret.
func Wire(t storage.APIToken) api.Token {
	out := api.Token{ID: t.ID, Name: t.Name, CreatedAt: api.Millis(t.CreatedAt)}
	if t.RevokedAt != nil {
		at := api.Millis(*t.RevokedAt)
		out.RevokedAt = &at
	}
	return out
}
