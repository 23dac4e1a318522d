package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
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
	// ErrHost refuses a request that names another host than the
	// dashboard's own. It never says which host that is: the name is what
	// keeps the session cookie from every other server on the machine.
	ErrHost = errors.New("refused: this is not the dashboard's address; open the link `loopctl dashboard` prints, or send the bearer token")
	// ErrScope refuses what a dashboard session may not do.
	ErrScope = errors.New("refused: a dashboard session can view runs and stop, pause, resume, signal, answer or land them, and retry a backlog's blocked task; " +
		"starting runs, trust and stopping the daemon need loopctl (or the bearer token)")
)

// Grant says what admitted a request.
type Grant int

// The grants of Check.
const (
	GrantNone    Grant = iota // refused
	GrantToken                // the bearer token: the whole API
	GrantSession              // a dashboard session: its pages, streams, diffs and run actions
	GrantLogin                // the login page, which admits only a valid login code (and the empty favicon)
)

// LocalhostSuffix ends the name of a dashboard served on loopback: browsers
// resolve every name under localhost to loopback themselves, without DNS.
const LocalhostSuffix = ".localhost"

// NewLoopbackHost returns a fresh, unguessable host name for a dashboard
// served on loopback port port: "loopd-<128 random bits>.localhost:PORT".
//
// Browsers key cookies by host name and ignore the port, so a session
// cookie of 127.0.0.1 reaches every server any user runs on 127.0.0.1. A
// host-only cookie of a name only the owner was told is sent to no other
// server: another user would have to make the owner's browser visit that
// very name on their port, and cannot learn it.
func NewLoopbackHost(port string) string {
	return net.JoinHostPort("loopd-"+randomHex(16)+LocalhostSuffix, port)
}

// inSessionScope reports whether a dashboard session may make request r:
// the pages, assets and live streams Register serves, /metrics, a run's
// diff, the run page's buttons and a backlog page's Retry. Everything else of the API (starting
// runs with their commands, trust, stopping the daemon, cleaning
// worktrees, the raw JSON of runs, logs and events) needs the bearer
// token. It is written out rather than matched with a ServeMux: it is on
// every request's path, and allocates nothing.
func inSessionScope(r *http.Request) bool {
	p := r.URL.Path
	if r.URL.RawPath != "" {
		// An escaped path (/v1/runs/<id>%2Fdiff) is checked here decoded
		// but routed by the mux as escaped, to another handler than the
		// one this check meant. No page of the dashboard sends one.
		return false
	}
	if path.Clean(p) != p {
		return false // the mux redirects it; the redirected request is checked
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if p == "/" || p == "/metrics" || p == "/live/runs" || strings.HasPrefix(p, "/assets/") {
			return true
		}
		if id, ok := strings.CutPrefix(p, "/runs/"); ok {
			return segment(id)
		}
		if id, ok := strings.CutPrefix(p, "/live/runs/"); ok {
			return segment(strings.TrimSuffix(id, "/log"))
		}
		if rest, ok := strings.CutPrefix(p, "/v1/runs/"); ok {
			ref, ok := strings.CutSuffix(rest, "/diff")
			return ok && segment(ref)
		}
	case http.MethodPost:
		if rest, ok := strings.CutPrefix(p, "/v1/runs/"); ok {
			ref, action, _ := strings.Cut(rest, "/")
			switch action {
			case "stop", "pause", "resume", "signal", "answer", "land":
				return segment(ref)
			}
			// A backlog page's Retry: re-opening a blocked task acts on an
			// existing backlog as resume does, with its frozen, already
			// trusted config; the daemon lets a session set only what
			// resume allows (ResumeRefusal).
			if task, ok := strings.CutPrefix(action, "tasks/"); ok {
				task, ok = strings.CutSuffix(task, "/retry")
				return ok && segment(ref) && segment(task)
			}
		}
	}
	return false
}

// segment reports whether s is one path segment, as a {wildcard} matches.
func segment(s string) bool { return s != "" && !strings.Contains(s, "/") }

// Auth holds the dashboard's one-time login codes and its sessions, in
// memory: a daemon restart logs every browser out, and `loopctl dashboard`
// logs it in again.
type Auth struct {
	now     func() time.Time
	codeTTL time.Duration
	// host is the dashboard's own Host (name:port), set once before
	// serving; "" refuses every request without the bearer token.
	host string

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

// SetHost sets the dashboard's own host (name:port, as a login URL names
// it). Only requests naming it are served without the bearer token. Call
// it before serving.
func (a *Auth) SetHost(host string) { a.host = host }

// Host is the dashboard's own host:port, "" before SetHost.
func (a *Auth) Host() string { return a.host }

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

// Authorize is Check without the grant.
func (a *Auth) Authorize(r *http.Request, bearer bool) error {
	_, err := a.Check(r, bearer)
	return err
}

// Check is the one place the TCP listener decides who is served and how
// far; the JSON API, /metrics and every dashboard page and asset pass
// through it. bearer says the request carried the daemon's bearer token,
// which opens the whole API whatever host it names.
//
// Without it, the request must name the dashboard's own host (a page of
// another site that a DNS rebinding points at loopback names its own), and
// then needs a live session cookie for a request in the session's scope
// (inSessionScope). A state change (any method but GET and HEAD) also
// needs the session's CSRF token in the X-CSRF-Token header and an Origin
// header naming this very host: the cookie is sent by the browser whatever
// page asks, the token and the origin only by our own pages. The login
// page itself is let through: it admits only a valid login code; so is
// the browser's own favicon request, answered with nothing.
func (a *Auth) Check(r *http.Request, bearer bool) (Grant, error) {
	if bearer {
		return GrantToken, nil
	}
	if a.host == "" || !strings.EqualFold(r.Host, a.host) {
		return GrantNone, ErrHost
	}
	if (r.URL.Path == LoginPath || r.URL.Path == FaviconPath) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		return GrantLogin, nil // the favicon is an empty answer: nothing to protect
	}
	s, ok := a.session(r)
	if !ok {
		return GrantNone, ErrNoSession
	}
	if !inSessionScope(r) {
		return GrantNone, ErrScope
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return GrantSession, nil
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
		return GrantNone, ErrCSRF
	}
	// Origin must be http(s)://<this host>; compared without building that
	// string, which would cost every state change an allocation.
	origin := r.Header.Get("Origin")
	host, ok := strings.CutPrefix(origin, "http://")
	if !ok {
		host, ok = strings.CutPrefix(origin, "https://")
	}
	if !ok || host != r.Host {
		return GrantNone, ErrCSRF
	}
	return GrantSession, nil
}

// CookieName is the session cookie's name for a dashboard served at host
// (host:port). The cookie is host-only (no Domain): it is sent only to the
// dashboard's own, unguessable host name (NewLoopbackHost). The port in the
// name keeps two daemons' sessions apart when one is reached by an address
// (--http-allow-remote on a network address), whose cookies browsers send
// to every port.
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
//
// A HEAD never redeems: link previews and pre-fetchers probe with it, and
// must not use up the code the user is about to open.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		setSecurityHeaders(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		return
	}
	sid, next, err := s.auth.redeem(r.URL.Query().Get("code"))
	if err != nil {
		// Anyone on the machine can knock here: the log is rate-limited.
		s.logRefusal("refused dashboard login", zap.String("remote", r.RemoteAddr), zap.String("why", err.Error()))
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
