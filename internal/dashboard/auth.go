package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Lifetimes of the dashboard's credentials.
const (
	// CodeTTL is how long a login code printed by `loopctl dashboard`
	// stays valid by default (loopd --dashboard-code-ttl). Short: it travels in a URL (terminal scrollback,
	// browser history), so it must be worthless soon after.
	CodeTTL = time.Minute
	// SessionTTL is how long a session lasts after its login.
	SessionTTL = 12 * time.Hour
	// maxSessions bounds the session table: each login adds one, and a
	// script minting codes in a loop must not grow the daemon's memory.
	maxSessions = 256
	maxCodes    = 64
)

// CSRFHeader carries the page's CSRF token on every state-changing request
// made with the session cookie.
const CSRFHeader = "X-CSRF-Token"

// LoginPath is the page a login URL opens; it is the only page served
// without a session, and it admits only a valid, unused login code.
const LoginPath = "/login"

// Errors of Authorize, each saying what the user can do about it.
var (
	ErrNoSession = errors.New("not logged in: run `loopctl dashboard` for a login link, or send the bearer token")
	ErrCSRF      = errors.New("refused: a state change from the dashboard needs the page's CSRF token and a same-origin Origin header; reload the page")
)

// Auth holds the dashboard's one-time login codes and its sessions, in
// memory: a daemon restart logs every browser out, and `loopctl dashboard`
// logs it in again.
type Auth struct {
	now     func() time.Time
	codeTTL time.Duration

	mu       sync.Mutex
	codes    map[string]loginCode
	sessions map[string]session
}

type loginCode struct {
	next    string // the page to open after login
	expires time.Time
}

type session struct {
	csrf    string
	expires time.Time
}

// NewAuth returns an empty Auth; now is the clock (time.Now when nil),
// codeTTL the life of a login code (CodeTTL when 0).
func NewAuth(now func() time.Time, codeTTL time.Duration) *Auth {
	if now == nil {
		now = time.Now
	}
	if codeTTL <= 0 {
		codeTTL = CodeTTL
	}
	return &Auth{now: now, codeTTL: codeTTL, codes: map[string]loginCode{}, sessions: map[string]session{}}
}

// NewCode mints a single-use login code that opens next (a path such as
// "/" or "/runs/<id>") and expires after the code TTL.
func (a *Auth) NewCode(next string) (code string, expires time.Time) {
	if !safeNext(next) {
		next = "/"
	}
	code = randomHex(16)
	now := a.now()
	expires = now.Add(a.codeTTL)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pruneLocked(now)
	for len(a.codes) >= maxCodes { // drop the oldest first
		var oldest string
		for c, lc := range a.codes {
			if oldest == "" || lc.expires.Before(a.codes[oldest].expires) {
				oldest = c
			}
		}
		delete(a.codes, oldest)
	}
	a.codes[code] = loginCode{next: next, expires: expires}
	return code, expires
}

// redeem consumes a login code: a code works once, and never after it
// expired. On success it opens a session and returns its id and the page
// to open.
func (a *Auth) redeem(code string) (sid, next string, err error) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	lc, ok := a.codes[code]
	delete(a.codes, code) // single use, whatever happens next
	switch {
	case code == "" || !ok:
		return "", "", errors.New("this login link is not valid: it was already used, or the daemon restarted since it was printed; run `loopctl dashboard` for a new one")
	case !now.Before(lc.expires):
		return "", "", fmt.Errorf("this login link expired %s after it was printed; run `loopctl dashboard` for a new one", a.codeTTL)
	}
	a.pruneLocked(now)
	for len(a.sessions) >= maxSessions {
		var oldest string
		for s, ss := range a.sessions {
			if oldest == "" || ss.expires.Before(a.sessions[oldest].expires) {
				oldest = s
			}
		}
		delete(a.sessions, oldest)
	}
	sid = randomHex(32)
	a.sessions[sid] = session{csrf: randomHex(32), expires: now.Add(SessionTTL)}
	return sid, lc.next, nil
}

func (a *Auth) pruneLocked(now time.Time) {
	for c, lc := range a.codes {
		if !now.Before(lc.expires) {
			delete(a.codes, c)
		}
	}
	for s, ss := range a.sessions {
		if !now.Before(ss.expires) {
			delete(a.sessions, s)
		}
	}
}

// session returns the request's live session, if its cookie names one.
func (a *Auth) session(r *http.Request) (session, bool) {
	c, err := r.Cookie(CookieName(r.Host))
	if err != nil || c.Value == "" {
		return session{}, false
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[c.Value]
	if !ok || !now.Before(s.expires) {
		return session{}, false
	}
	return s, true
}

// CSRFToken is the CSRF token of the request's session ("" without one),
// for the page to carry.
func (a *Auth) CSRFToken(r *http.Request) string {
	s, _ := a.session(r)
	return s.csrf
}

// Authorize is the one place the TCP listener decides who is served; the
// JSON API, /metrics and every dashboard page and asset pass through it.
// bearer says the request carried the daemon's bearer token. Without it
// the request needs a live session cookie, and a state change (any method
// but GET and HEAD) also needs the session's CSRF token in the
// X-CSRF-Token header and an Origin header naming this very host: the
// cookie is sent by the browser whatever page asks, the token and the
// origin only by our own pages. The login page itself is let through: it
// admits only a valid login code.
func (a *Auth) Authorize(r *http.Request, bearer bool) error {
	if bearer {
		return nil
	}
	if r.URL.Path == LoginPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		return nil
	}
	s, ok := a.session(r)
	if !ok {
		return ErrNoSession
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
		return ErrCSRF
	}
	if origin := r.Header.Get("Origin"); origin != "http://"+r.Host && origin != "https://"+r.Host {
		return ErrCSRF
	}
	return nil
}

// CookieName is the session cookie's name for a dashboard served at host
// (host:port). Browsers send a cookie of 127.0.0.1 to every port of it, so
// the port is part of the name: a session for one daemon is never offered
// to another daemon on the same machine.
func CookieName(host string) string {
	_, port, err := net.SplitHostPort(host)
	if err != nil || port == "" {
		return "loopd_session"
	}
	return "loopd_session_" + port
}

// handleLogin redeems the code in ?code=, sets the session cookie and
// opens the code's page. It answers with a page that navigates by itself
// rather than a redirect: a SameSite=Strict cookie set during a redirect
// chain that began outside the site (a link clicked in a chat or a mail)
// would not be sent on the redirected request.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	sid, next, err := s.auth.redeem(r.URL.Query().Get("code"))
	if err != nil {
		s.log.Info("dashboard login refused", zap.String("remote", r.RemoteAddr), zap.String("why", err.Error()))
		s.refusePage(w, http.StatusForbidden, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     CookieName(r.Host),
		Value:    sid,
		Path:     "/",
		MaxAge:   int(SessionTTL / time.Second),
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
	s.render(w, r, http.StatusOK, "login.html", map[string]any{"Next": next})
}

// RefusePage answers a refused page or asset request with a short HTML
// page saying how to log in.
func (s *Server) RefusePage(w http.ResponseWriter, err error) {
	s.refusePage(w, http.StatusForbidden, err)
}

func (s *Server) refusePage(w http.ResponseWriter, status int, err error) {
	setSecurityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = s.tmpl.ExecuteTemplate(w, "refused.html", map[string]any{"Message": err.Error()})
}

// safeNext admits only a local absolute path, so a login link can never
// send the browser to another site.
func safeNext(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "/\\") &&
		!strings.ContainsAny(p, "\r\n")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
