package tcpguard

import (
	"context"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// Limits of the TCP listener. Anyone on the machine can connect to it, so
// nothing a connection does before it is authorized may hold a file
// descriptor for long: with the descriptor limit at 512, 600 refused
// keep-alive connections that were never closed left the daemon unable to
// accept on its Unix socket (accept4: too many open files), and loopctl
// could no longer reach its own daemon. (The cap on open connections is
// CapListener's.)
const (
	// ReadHeaderTimeout bounds how long a connection may take to send
	// a request's headers (a connection that sends nothing included).
	ReadHeaderTimeout = 5 * time.Second
	// IdleTimeout closes a keep-alive connection that waits this long
	// for its next request. It never cuts a request being answered: a
	// follow stream (SSE, log follow) is one long request.
	IdleTimeout = 30 * time.Second
)

// NewServer is the HTTP server of the TCP listener, serving h with
// connContext as its ConnContext: unlike the Unix socket's (its own uid
// only), it bounds how long a connection may stay open without a request,
// and closes a connection after every error answer, refusals included, so
// a knock without a token never keeps a descriptor.
//
// There is deliberately no ReadTimeout or WriteTimeout: net/http would
// apply them to a whole request, and a follow stream is one request that
// lasts as long as its run.
func NewServer(h http.Handler, connContext func(context.Context, net.Conn) context.Context, log *zap.Logger) *http.Server {
	return &http.Server{
		Handler:           CloseOnError(h),
		ConnContext:       connContext,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
}

// CloseOnError answers every error status (4xx, 5xx: a refused token, a
// wrong Host, a login code over its limit) with Connection: close, which
// makes net/http close the connection after the answer instead of keeping
// it for another request.
//
// A refused request that announced a body (Content-Length, chunked,
// Expect: 100-continue) and never sends it would still hold its
// connection: after the handler, net/http reads the unread body to
// discard it, with no deadline (there is no ReadTimeout, see
// NewServer). Its read deadline is therefore set to now once the
// refusal is answered, and the connection closes at once.
func CloseOnError(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ec := &errorCloser{ResponseWriter: w}
		next.ServeHTTP(ec, r)
		if ec.status >= 400 && r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
	})
}

// errorCloser sets Connection: close when the status is an error. It
// passes Flush on (streams) and unwraps for http.ResponseController
// (their write deadlines).
type errorCloser struct {
	http.ResponseWriter
	wrote  bool
	status int // the error status answered, 0 for none
}

func (c *errorCloser) WriteHeader(code int) {
	if !c.wrote && code >= 400 {
		c.Header().Set("Connection", "close")
		c.status = code
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
