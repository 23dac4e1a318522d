package daemon

import (
	"net/http"

	"github.com/loopd/loopd/internal/tcpguard"
)

// TokenFile is the name, inside LOOPD_HOME, of the bearer token that the
// optional TCP listener requires.
const TokenFile = tcpguard.TokenFile

// authorizeTCP is the one place a request on the TCP listener is
// authorized, for the JSON API, /metrics and the dashboard alike: the
// bearer token in LOOPD_HOME/http.token or a user's token in use
// (bearerOK), or a dashboard session cookie
// (with the page's CSRF token and a same-origin Origin for a state
// change). A nil error admits the request.
func (d *Daemon) authorizeTCP(r *http.Request) error {
	return d.dash.Auth().Authorize(r, d.bearerOK(r))
}
