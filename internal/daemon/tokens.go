package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/tcpguard"
)

// tokenPrefix starts every token `loopctl token create` makes, so that a
// leaked one is recognizable (secret scanners, logs).
const tokenPrefix = "loopd_"

// maxTokenLen bounds what is hashed and looked up per request.
const maxTokenLen = 256

// tokenName is a user's name as tokens carry it.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$`)

// bearerOK reports whether r carries a bearer token this node accepts:
// the node's own LOOPD_HOME/http.token (compared in constant time), or a
// user's token in use from api_tokens (looked up by its SHA-256). It is
// not a dashboard session and does not make one.
func (d *Daemon) bearerOK(r *http.Request) bool {
	if tcpguard.TokenOK(r, d.token) {
		return true
	}
	_, ok := d.userToken(r)
	return ok
}

// userToken returns the api_tokens row of r's bearer token, if it is one
// in use. Whoever knocks with a wrong token learns nothing else.
func (d *Daemon) userToken(r *http.Request) (storage.APIToken, bool) {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	got = strings.TrimLeft(got, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(got, tokenPrefix) || len(got) > maxTokenLen {
		return storage.APIToken{}, false
	}
	tok, err := d.store.TokenInUse(r.Context(), storage.TokenHash(got))
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			d.log.Warn("could not look up a bearer token", zap.String("error", storage.Explain(err)))
		}
		return storage.APIToken{}, false
	}
	return tok, true
}

// createdBy is who a run created by r belongs to: the name of its user
// token, "" for the owner (the socket, http.token, a dashboard session).
func (d *Daemon) createdBy(r *http.Request) string {
	if d.nodeOwner(r) {
		return ""
	}
	tok, _ := d.userToken(r)
	return tok.Name
}

// nodeOwner reports whether r comes from the node's owner: its socket, or
// its own http.token, not a user's token or a dashboard session.
func (d *Daemon) nodeOwner(r *http.Request) bool {
	return !peerFrom(r.Context()).tcp || tcpguard.TokenOK(r, d.token)
}

// tokenAdmin refuses a token request from anyone but the node's owner
// (nodeOwner): a user's token cannot make or revoke tokens.
func (d *Daemon) tokenAdmin(w http.ResponseWriter, r *http.Request) bool {
	if d.nodeOwner(r) {
		return true
	}
	d.fail(w, r, api.Errorf(api.CodeForbidden, "tokens are made and revoked only on the API node's socket or with its own "+
		"LOOPD_HOME/http.token; a user's token cannot manage tokens"))
	return false
}

func wireToken(t storage.APIToken) api.Token {
	out := api.Token{ID: t.ID, Name: t.Name, CreatedAt: api.Millis(t.CreatedAt)}
	if t.RevokedAt != nil {
		at := api.Millis(*t.RevokedAt)
		out.RevokedAt = &at
	}
	return out
}

// handleCreateToken makes a token for a user (`loopctl token create
// NAME`): the answer is the only place its secret appears.
func (d *Daemon) handleCreateToken(w http.ResponseWriter, r *http.Request) {
	if !d.tokenAdmin(w, r) {
		return
	}
	var req api.TokenRequest
	if err := decode(w, r, &req); err != nil {
		d.fail(w, r, err)
		return
	}
	if !tokenName.MatchString(req.Name) {
		d.fail(w, r, api.Errorf(api.CodeBadRequest, "token name %q: use 1 to 64 letters, digits and . _ @ + - (a user's name), starting with a letter or digit", req.Name))
		return
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		d.fail(w, r, err)
		return
	}
	secret := tokenPrefix + hex.EncodeToString(raw)
	var tok storage.APIToken
	err := d.store.Write(r.Context(), func(tx *storage.Tx) error {
		var err error
		tok, err = tx.InsertToken(req.Name, storage.TokenHash(secret))
		return err
	})
	if errors.Is(err, storage.ErrConflict) {
		d.fail(w, r, api.Errorf(api.CodeConflict, "%s already has a token in use; revoke it first (loopctl token revoke %s)", req.Name, req.Name))
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.log.Info("token created", zap.String("name", tok.Name), zap.String("id", tok.ID))
	out := wireToken(tok)
	out.Secret = secret
	writeJSON(w, http.StatusCreated, out)
}

// handleTokens lists the tokens without their secrets.
func (d *Daemon) handleTokens(w http.ResponseWriter, r *http.Request) {
	if !d.tokenAdmin(w, r) {
		return
	}
	toks, err := d.store.Tokens(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	out := []api.Token{}
	for _, t := range toks {
		out = append(out, wireToken(t))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleRevokeToken revokes a user's token in use: from the next request
// on, no API node of the fleet accepts it.
func (d *Daemon) handleRevokeToken(w http.ResponseWriter, r *http.Request) {
	if !d.tokenAdmin(w, r) {
		return
	}
	name := r.PathValue("name")
	var tok storage.APIToken
	err := d.store.Write(r.Context(), func(tx *storage.Tx) error {
		var err error
		tok, err = tx.RevokeToken(name)
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		d.fail(w, r, api.Errorf(api.CodeNotFound, "%s has no token in use (loopctl token list)", name))
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.log.Info("token revoked", zap.String("name", tok.Name), zap.String("id", tok.ID))
	writeJSON(w, http.StatusOK, wireToken(tok))
}
