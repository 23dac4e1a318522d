package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// fakeAPI is loopd's HTTP API served in-process by net/http/httptest: each
// test routes the requests its command makes to handlers of its own, and
// the fake records every request, so that a test asserts both what the
// command printed and what it asked the daemon. loopctl reaches it through
// the api.Client dial seam (globalOptions.dial), not a socket.
type fakeAPI struct {
	t   *testing.T
	srv *httptest.Server

	mu     sync.Mutex
	routes map[string]http.HandlerFunc
	mux    *http.ServeMux // of routes
	reqs   []request
}

// request is one request the fake received.
type request struct {
	Method, Path string
	Query        url.Values
	Body         string
}

// daemonPID is the pid the fake daemon reports: one that is never a live
// process of the test (pid_max is below it).
const daemonPID = 1 << 30

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, routes: map[string]http.HandlerFunc{}}
	f.reply("GET /v1/daemon", api.DaemonInfo{PID: daemonPID, Version: "v9.9.9-test", Home: "/h", Socket: "/h/loopd.sock"})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		f.mu.Lock()
		f.reqs = append(f.reqs, request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Body: string(b)})
		mux := f.mux
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// handle routes pattern (a net/http ServeMux pattern, "POST
// /v1/runs/{ref}/stop") to h, in place of any handler it had.
func (f *fakeAPI) handle(pattern string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[pattern] = h
	f.mux = http.NewServeMux()
	for p, h := range f.routes {
		f.mux.HandleFunc(p, h)
	}
}

// reply answers pattern with v as JSON.
func (f *fakeAPI) reply(pattern string, v any) {
	f.handle(pattern, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, v) })
}

// fail answers pattern with an API error, as the daemon does.
func (f *fakeAPI) fail(pattern string, code api.ErrorCode, msg string) {
	f.handle(pattern, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, code.HTTPStatus(), map[string]any{"error": api.Error{Code: code, Message: msg}})
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// requests are the requests received, but for the pings (GET /v1/daemon
// without a query) every command that needs a daemon begins with.
func (f *fakeAPI) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []request
	for _, r := range f.reqs {
		if r.Method == http.MethodGet && r.Path == "/v1/daemon" && len(r.Query) == 0 {
			continue
		}
		out = append(out, r)
	}
	return out
}

// only is the single request made to method and path, failing the test
// unless there was exactly one.
func (f *fakeAPI) only(method, path string) request {
	f.t.Helper()
	var got []request
	for _, r := range f.requests() {
		if r.Method == method && r.Path == path {
			got = append(got, r)
		}
	}
	if len(got) != 1 {
		f.t.Fatalf("%d requests %s %s, want 1; all: %+v", len(got), method, path, f.requests())
	}
	return got[0]
}

// decode is the JSON body of r.
func decode[T any](t *testing.T, r request) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.Body), &v); err != nil {
		t.Fatalf("body of %s %s: %v: %q", r.Method, r.Path, err, r.Body)
	}
	return v
}

// dial connects to the fake, as the client would to the daemon's socket.
func (f *fakeAPI) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", f.srv.Listener.Addr().String())
}

// result is what one loopctl invocation did.
type result struct {
	out, err string // stdout, stderr (with main's error line)
	code     int    // the exit code main would exit with
}

// loopctl runs loopctl with args against f (nil: no daemon answers), as
// main does, and returns its output and exit code. No daemon is ever
// started: LOOPCTL_NO_AUTOSTART is set, and LOOPD_HOME and LOOPD_SOCKET
// point into a temporary directory.
func loopctl(t *testing.T, f *fakeAPI, args ...string) result {
	t.Helper()
	home := t.TempDir()
	t.Setenv("LOOPD_HOME", home)
	t.Setenv("LOOPD_SOCKET", filepath.Join(home, "loopd.sock"))
	t.Setenv("LOOPCTL_NO_AUTOSTART", "1")
	var out, errOut bytes.Buffer
	g := &globalOptions{Out: &out, Err: &errOut}
	if f != nil {
		g.dial = f.dial
	}
	root := newRoot(g)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	code := exitCode(err, false, &errOut)
	return result{out: out.String(), err: errOut.String(), code: code}
}

// expect fails the test unless r exited with code and its stdout and
// stderr hold every string of out and errs.
func (r result) expect(t *testing.T, code int, out []string, errs ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.out, r.err)
	}
	for _, s := range out {
		if !strings.Contains(r.out, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.out)
		}
	}
	for _, s := range errs {
		if !strings.Contains(r.err, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.err)
		}
	}
}

// lines is shorthand for the strings stdout must hold.
func lines(s ...string) []string { return s }

// jsonLine is v as one line of NDJSON.
func jsonLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append(b, '\n'), err
}

func countLines(s string) int { return strings.Count(s, "\n") }
