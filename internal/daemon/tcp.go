package daemon

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/tcpguard"
	"go.uber.org/zap"
)

// TokenFile is the name, inside LOOPD_HOME, of the bearer token that the
// optional TCP listener requires.
const TokenFile = "http.token"

// listenTCP opens the optional TCP listener (--http ADDR). It binds only
// loopback addresses unless allowRemote, because the API can start
// commands on this machine.
func listenTCP(addr string, allowRemote bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w (use host:port, e.g. 127.0.0.1:7777)", addr, err)
	}
	if !allowRemote {
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("--http %q is not a loopback address; the API can run commands on this machine, "+
				"so binding it elsewhere needs --http-allow-remote", addr)
		}
	}
	l, err := tcpguard.ListenLoopback(addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return l, nil
}

// loadToken reads LOOPD_HOME/http.token, creating it (0600, 32 random
// bytes in hex) when missing.
func loadToken(home string) (string, error) {
	path := filepath.Join(home, TokenFile)
	b, err := os.ReadFile(path)
	if err == nil {
		tok := strings.TrimSpace(string(b))
		if len(tok) < 32 {
			return "", fmt.Errorf("%s holds a token shorter than 32 characters; delete it to get a new one", path)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", err
			}
		}
		return tok, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(tok + "\n"); err != nil {
		return "", err
	}
	return tok, nil
}

// tokenOK checks a TCP request's bearer token in constant time. The
// scheme's name is case-insensitive (RFC 9110, section 11.1): "bearer" is
// as good as "Bearer".
func tokenOK(r *http.Request, token string) bool {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && token != "" &&
		subtle.ConstantTimeCompare([]byte(strings.TrimLeft(got, " ")), []byte(token)) == 1
}

// authorizeTCP is the one place a request on the TCP listener is
// authorized, for the JSON API, /metrics and the dashboard alike: the
// bearer token in LOOPD_HOME/http.token, or a dashboard session cookie
// (with the page's CSRF token and a same-origin Origin for a state
// change). A nil error admits the request.
func (d *Daemon) authorizeTCP(r *http.Request) error {
	return d.dash.Auth().Authorize(r, tokenOK(r, d.token))
}

// Limits of the TCP listener. Anyone on the machine can connect to it, so
// nothing a connection does before it is authorized may hold a file
// descriptor for long: with the descriptor limit at 512, 600 refused
// keep-alive connections that were never closed left the daemon unable to
// accept on its Unix socket (accept4: too many open files), and loopctl
// could no longer reach its own daemon. (The cap on open connections is
// tcpguard.CapListener's.)
const (
	// tcpReadHeaderTimeout bounds how long a connection may take to send
	// a request's headers (a connection that sends nothing included).
	tcpReadHeaderTimeout = 5 * time.Second
	// tcpIdleTimeout closes a keep-alive connection that waits this long
	// for its next request. It never cuts a request being answered: a
	// follow stream (SSE, log follow) is one long request.
	tcpIdleTimeout = 30 * time.Second
)

// newTCPServer is the HTTP server of the TCP listener: unlike the Unix
// socket's (its own uid only), it bounds how long a connection may stay
// open without a request, and closes a connection after every error
// answer, refusals included, so a knock without a token never keeps a
// descriptor.
//
// There is deliberately no ReadTimeout or WriteTimeout: net/http would
// apply them to a whole request, and a follow stream is one request that
// lasts as long as its run.
func newTCPServer(h http.Handler, log *zap.Logger) *http.Server {
	return &http.Server{
		Handler:           closeOnError(h),
		ConnContext:       connContext,
		ReadHeaderTimeout: tcpReadHeaderTimeout,
		IdleTimeout:       tcpIdleTimeout,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
}

// closeOnError answers every error status (4xx, 5xx: a refused token, a
// wrong Host, a login code over its limit) with Connection: close, which
// makes net/http close the connection after the answer instead of keeping
// it for another request.
func closeOnError(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&errorCloser{ResponseWriter: w}, r)
	})
}

// errorCloser sets Connection: close when the status is an error. It
// passes Flush on (streams) and unwraps for http.ResponseController
// (their write deadlines).
type errorCloser struct {
	http.ResponseWriter
	wrote bool
}

func (c *errorCloser) WriteHeader(code int) {
	if !c.wrote && code >= 400 {
		c.Header().Set("Connection", "close")
	}
	if code >= 200 {
		c.wrote = true
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *errorCloser) Write(b []byte) (int, error) {
	c.wrote = true
	return c.ResponseWriter.Write(b)
}

func (c *errorCloser) Flush() {
	c.wrote = true
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *errorCloser) Unwrap() http.ResponseWriter { return c.ResponseWriter }
