package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/dashboard"
)

// BenchmarkTCPAuth measures what the TCP listener's authorization (owner:
// the bearer token, or a dashboard session with its host, scope, CSRF
// token and origin checks) adds to a request, against the same no-op
// handler called without it ("none"), in one run. BENCHMARKS.md keeps
// the ratios.
//
//	go test ./internal/daemon -run '^$' -bench TCPAuth -benchtime 200000x -count 5
func BenchmarkTCPAuth(b *testing.B) {
	const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	d := &Daemon{log: zap.NewNop(), token: token, httpAddr: dashboard.NewLoopbackHost("7777")}
	d.dash = dashboard.New(dashboard.Options{Auth: dashboard.NewAuth(nil, 0)})
	d.dash.Auth().SetHost(d.httpAddr)
	mux := http.NewServeMux()
	d.dash.Register(mux)

	// A session, through the real login page.
	code, _ := d.dash.Auth().NewCode("/")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://"+d.httpAddr+dashboard.LoginPath+"?code="+code, nil))
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		b.Fatalf("login: %d %s", rec.Code, rec.Body)
	}
	page := httptest.NewRequest(http.MethodGet, "http://"+d.httpAddr+"/", nil)
	page.AddCookie(cookies[0])
	csrf := d.dash.Auth().CSRFToken(page)

	noop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	owned := d.owner(noop)
	tcp := context.WithValue(context.Background(), peerKey{}, peer{uid: -1, tcp: true})
	request := func(method, path string, h func(*http.Request)) *http.Request {
		r := httptest.NewRequest(method, "http://"+d.httpAddr+path, strings.NewReader("{}")).WithContext(tcp)
		h(r)
		return r
	}
	cases := []struct {
		name    string
		handler http.Handler
		req     *http.Request
	}{
		{"none", noop, request("GET", "/", func(*http.Request) {})},
		{"bearer", owned, request("GET", "/v1/runs", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) })},
		{"session-page", owned, request("GET", "/runs/abc", func(r *http.Request) { r.AddCookie(cookies[0]) })},
		{"session-action", owned, request("POST", "/v1/runs/abc/stop", func(r *http.Request) {
			r.AddCookie(cookies[0])
			r.Header.Set(dashboard.CSRFHeader, csrf)
			r.Header.Set("Origin", "http://"+d.httpAddr)
		})},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				c.handler.ServeHTTP(w, c.req)
				if w.Code != http.StatusNoContent {
					b.Fatalf("%s: %d %s", c.name, w.Code, w.Body)
				}
			}
		})
	}
}
