package daemon

import (
	"net/http"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/tcpguard"
)

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
// in use.
func (d *Daemon) userToken(r *http.Request) (storage.APIToken, bool) {
	return d.tokens.InUse(r.Context(), r.Header.Get("Authorization"))
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
	tok, err := d.tokens.Create(r.Context(), req.Name)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, tok)
}

// handleTokens lists the tokens without their secrets.
func (d *Daemon) handleTokens(w http.ResponseWriter, r *http.Request) {
	if !d.tokenAdmin(w, r) {
		return
	}
	toks, err := d.tokens.List(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toks)
}

// handleRevokeToken revokes a user's token in use: from the next request
// on, no API node of the fleet accepts it.
func (d *Daemon) handleRevokeToken(w http.ResponseWriter, r *http.Request) {
	if !d.tokenAdmin(w, r) {
		return
	}
	tok, err := d.tokens.Revoke(r.Context(), r.PathValue("name"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, tok)
}
