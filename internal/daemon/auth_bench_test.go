package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/dashboard"
)

// BenchmarkTCPAuth measures what the TCP listener's authorization (owner:
// the bearer token, or a dashboard session with its host, scope, CSRF
// token and origin checks) adds to a request. Each iteration serves a
// batch of requests through owner and the same batch to the bare no-op
// handler, interleaved, so the ratio (x-bare) and the difference
// (auth-ns/req) hold on a busy machine. BENCHMARKS.md keeps them.
//
//	go test ./internal/daemon -run '^$' -bench TCPAuth -benchtime 2000x -count 3
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
		name string
		req  *http.Request
	}{
		{"bearer", request("GET", "/v1/runs", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) })},
		{"session-page", request("GET", "/runs/abc", func(r *http.Request) { r.AddCookie(cookies[0]) })},
		{"session-action", request("POST", "/v1/runs/abc/stop", func(r *http.Request) {
			r.AddCookie(cookies[0])
			r.Header.Set(dashboard.CSRFHeader, csrf)
			r.Header.Set("Origin", "http://"+d.httpAddr)
		})},
	}
	const batch = 100
	serve := func(b *testing.B, h http.Handler, r *http.Request) time.Duration {
		start := time.Now()
		for range batch {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusNoContent {
				b.Fatalf("%s %s: %d %s", r.Method, r.URL.Path, w.Code, w.Body)
			}
		}
		return time.Since(start)
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var bare, auth time.Duration
			for b.Loop() {
				bare += serve(b, noop, c.req)
				auth += serve(b, owned, c.req)
			}
			n := float64(b.N * batch)
			b.ReportMetric(float64(auth)/n, "ns/req")
			b.ReportMetric(float64(auth-bare)/n, "auth-ns/req")
			b.ReportMetric(float64(auth)/float64(bare), "x-bare")
		})
	}
}
