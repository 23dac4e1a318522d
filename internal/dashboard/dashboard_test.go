package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
)

// fakeSource is a hand-written Source: runs and steps in memory, an event
// log of run ids, and a condition variable for Wait.
type fakeSource struct {
	mu      sync.Mutex
	runs    map[string]api.Run
	steps   map[string][]Step
	events  []string // events[i] is the run of event seq i+1
	wake    chan struct{}
	between [][2]int // every StepsBetween range asked for
	tasks   map[string]api.BacklogTasks
}

func newFakeSource() *fakeSource {
	return &fakeSource{runs: map[string]api.Run{}, steps: map[string][]Step{}, wake: make(chan struct{}),
		tasks: map[string]api.BacklogTasks{}}
}

// commit records an event for run id and wakes the waiters.
func (f *fakeSource) commit(run api.Run) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[run.ID] = run
	f.events = append(f.events, run.ID)
	close(f.wake)
	f.wake = make(chan struct{})
}

func (f *fakeSource) Runs(_ context.Context, flt RunFilter) ([]api.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.Run
	for _, r := range f.runs {
		if flt.matches(r) && (!flt.TopLevel || r.Parent == "") {
			out = append(out, r)
		}
	}
	return out, nil
}

// TaskRuns lists the runs whose parent is backlog, by id (the tests'
// ids are in creation order), titled by the tasks named after them.
func (f *fakeSource) TaskRuns(_ context.Context, backlog string) (TaskRuns, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out TaskRuns
	title := map[string]string{}
	for _, t := range f.tasks[backlog].Tasks {
		title[t.ID] = t.Title
		out.Tasks++
		if t.State == "done" {
			out.Done++
		}
	}
	for _, r := range f.runs {
		if r.Parent == backlog {
			out.Runs = append(out.Runs, TaskRun{Run: r, Title: title[r.Name]})
		}
	}
	slices.SortFunc(out.Runs, func(a, b TaskRun) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (f *fakeSource) Tasks(_ context.Context, backlog string) (api.BacklogTasks, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	bt, ok := f.tasks[backlog]
	if !ok {
		return bt, api.Errorf(api.CodeBadRequest, "run %s is not a backlog run", backlog)
	}
	return bt, nil
}

func (f *fakeSource) Run(_ context.Context, ref string) (api.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[ref]
	if !ok {
		return r, api.Errorf(api.CodeNotFound, "run %q: not found", ref)
	}
	return r, nil
}

func (f *fakeSource) Steps(_ context.Context, id string) ([]api.Step, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]api.Step, 0, len(f.steps[id]))
	for _, s := range f.steps[id] {
		out = append(out, s.Step)
	}
	return out, nil
}

func (f *fakeSource) StepsBetween(_ context.Context, id string, from, to int) ([]Step, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.between = append(f.between, [2]int{from, to})
	var out []Step
	for _, s := range f.steps[id] {
		if s.Seq >= from && s.Seq <= to {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeSource) LastStep(_ context.Context, id string) (*api.Step, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.steps[id]
	if len(st) == 0 {
		return nil, nil
	}
	return &st[len(st)-1].Step, nil
}

func (f *fakeSource) ChangedRuns(_ context.Context, after int64, limit int) ([]string, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	last := after
	for i := int(after); i < len(f.events) && i < int(after)+limit; i++ {
		ids = append(ids, f.events[i])
		last = int64(i + 1)
	}
	return ids, last, nil
}

func (f *fakeSource) Seq() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.events))
}

func (f *fakeSource) Wait(ctx context.Context, after int64) (int64, error) {
	for {
		f.mu.Lock()
		seq, wake := int64(len(f.events)), f.wake
		f.mu.Unlock()
		if seq > after {
			return seq, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return seq, ctx.Err()
		}
	}
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testServer serves the dashboard behind Authorize, as the daemon's TCP
// listener does, with the bearer token "secret".
func testServer(t *testing.T, src Source) (*httptest.Server, *Server, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	closing := make(chan struct{})
	s := New(Options{Source: src, Auth: NewAuth(clk.now, 0), Closing: closing})
	mux := http.NewServeMux()
	s.Register(mux)
	mux.HandleFunc("POST /v1/runs/{ref}/stop", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"RUNNING"}`)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bearer := r.Header.Get("Authorization") == "Bearer secret"
		if err := s.Auth().Authorize(r, bearer); err != nil {
			s.RefusePage(w, err)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	s.Auth().SetHost(strings.TrimPrefix(srv.URL, "http://"))
	t.Cleanup(func() { close(closing); srv.Close() })
	return srv, s, clk
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// login redeems a fresh code and returns the session cookie.
func login(t *testing.T, srv *httptest.Server, s *Server, next string) *http.Cookie {
	t.Helper()
	code, _ := s.Auth().NewCode(next)
	resp, err := http.Get(srv.URL + LoginPath + "?code=" + code)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	return resp.Cookies()[0]
}

func get(t *testing.T, u string, c *http.Cookie) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if c != nil {
		req.AddCookie(c)
	}
	resp, err := (&http.Client{CheckRedirect: noRedirect}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestLoginSetsAStrictHttpOnlySessionCookie(t *testing.T) {
	srv, s, _ := testServer(t, newFakeSource())
	code, expires := s.Auth().NewCode("/runs/abc")
	if len(code) != 32 {
		t.Fatalf("code %q: want 32 hex characters (128 bits)", code)
	}
	if got := time.Until(expires); got > time.Minute+time.Second {
		t.Fatalf("code expires in %s, want at most a minute", got)
	}
	resp, body := get(t, srv.URL+LoginPath+"?code="+code, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	cs := resp.Cookies()
	if len(cs) != 1 {
		t.Fatalf("login set %d cookies, want 1", len(cs))
	}
	c := cs[0]
	u, _ := url.Parse(srv.URL)
	if c.Name != "loopd_session_"+u.Port() || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" ||
		len(c.Value) != 64 || c.MaxAge != int(SessionTTL/time.Second) {
		t.Fatalf("cookie %+v: want loopd_session_<port>, HttpOnly, SameSite=Strict, Path=/, 256-bit value, Max-Age 12h", c)
	}
	if !strings.Contains(resp.Header.Get("Set-Cookie"), "SameSite=Strict") || !strings.Contains(resp.Header.Get("Set-Cookie"), "HttpOnly") {
		t.Fatalf("Set-Cookie %q", resp.Header.Get("Set-Cookie"))
	}
	if !strings.Contains(body, `content="0;url=/runs/abc"`) {
		t.Fatalf("the login page does not open the code's page:\n%s", body)
	}
	if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("login headers %v: the code must not be cached or leak in a Referer", resp.Header)
	}
}

func TestLoginCodeIsSingleUseAndExpires(t *testing.T) {
	srv, s, clk := testServer(t, newFakeSource())
	tests := []struct {
		name  string
		code  func() string
		want  string
		valid bool
	}{
		{"fresh", func() string { c, _ := s.Auth().NewCode("/"); return c }, "Logged in", true},
		{"used twice", func() string {
			c, _ := s.Auth().NewCode("/")
			get(t, srv.URL+LoginPath+"?code="+c, nil)
			return c
		}, "already used", false},
		{"just expired", func() string {
			c, _ := s.Auth().NewCode("/")
			clk.add(CodeTTL)
			return c
		}, "expired", false},
		{"one second left", func() string {
			c, _ := s.Auth().NewCode("/")
			clk.add(CodeTTL - time.Second)
			return c
		}, "Logged in", true},
		{"unknown", func() string { return strings.Repeat("ab", 16) }, "already used", false},
		{"empty", func() string { return "" }, "not valid", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, srv.URL+LoginPath+"?code="+tt.code(), nil)
			if !strings.Contains(body, tt.want) {
				t.Fatalf("body %q, want %q", body, tt.want)
			}
			if tt.valid != (resp.StatusCode == http.StatusOK) || tt.valid != (len(resp.Cookies()) == 1) {
				t.Fatalf("status %d, cookies %v; valid=%v", resp.StatusCode, resp.Cookies(), tt.valid)
			}
		})
	}
	// An expired code is also gone: it does not work once the clock is
	// (somehow) back either.
	c, _ := s.Auth().NewCode("/")
	clk.add(2 * CodeTTL)
	get(t, srv.URL+LoginPath+"?code="+c, nil)
	clk.add(-2 * CodeTTL)
	if resp, _ := get(t, srv.URL+LoginPath+"?code="+c, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a refused expired code works later: %d", resp.StatusCode)
	}
}

func TestNextIsAlwaysALocalPath(t *testing.T) {
	srv, s, _ := testServer(t, newFakeSource())
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example", "runs/x", "/ok\r\nSet-Cookie: x=y"} {
		code, _ := s.Auth().NewCode(next)
		_, body := get(t, srv.URL+LoginPath+"?code="+code, nil)
		if !strings.Contains(body, `content="0;url=/"`) {
			t.Errorf("next %q: login page opens\n%s", next, body)
		}
	}
}

func TestEveryPageAndAssetNeedsASession(t *testing.T) {
	src := newFakeSource()
	src.commit(api.Run{ID: "r1", Status: api.RunRunning, Goal: "g"})
	srv, s, clk := testServer(t, src)
	paths := []string{"/", "/runs/r1", "/assets/app.js", "/assets/app.css", "/live/runs?after=0", "/live/runs/r1/log", "/live/runs/r1/log?step=1"}
	for _, p := range paths {
		resp, body := get(t, srv.URL+p, nil)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "loopctl dashboard") {
			t.Errorf("GET %s without a session: %d %q", p, resp.StatusCode, body)
		}
	}
	c := login(t, srv, s, "/")
	for _, p := range paths[:4] {
		if resp, body := get(t, srv.URL+p, c); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with a session: %d %s", p, resp.StatusCode, body)
		}
	}
	// A session for another port's daemon is not this one's.
	other := &http.Cookie{Name: "loopd_session_1", Value: c.Value}
	if resp, _ := get(t, srv.URL+"/", other); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cookie named for another port: %d", resp.StatusCode)
	}
	// A session ends after SessionTTL.
	clk.add(SessionTTL)
	if resp, _ := get(t, srv.URL+"/", c); resp.StatusCode != http.StatusForbidden {
		t.Errorf("an expired session: %d", resp.StatusCode)
	}
}

func TestStateChangesNeedTheCSRFTokenAndOrigin(t *testing.T) {
	src := newFakeSource()
	src.commit(api.Run{ID: "r1", Status: api.RunRunning})
	srv, s, _ := testServer(t, src)
	c := login(t, srv, s, "/")
	_, page := get(t, srv.URL+"/runs/r1", c)
	m := regexp.MustCompile(`name="csrf-token" content="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	token := m[1]
	origin := srv.URL
	tests := []struct {
		name   string
		cookie bool
		token  string
		origin string
		bearer bool
		want   int
	}{
		{"token and origin", true, token, origin, false, http.StatusOK},
		{"no token", true, "", origin, false, http.StatusForbidden},
		{"wrong token", true, strings.Repeat("0", 64), origin, false, http.StatusForbidden},
		{"no origin", true, token, "", false, http.StatusForbidden},
		{"other origin", true, token, "http://evil.example", false, http.StatusForbidden},
		{"other port", true, token, "http://127.0.0.1:1", false, http.StatusForbidden},
		{"no cookie", false, token, origin, false, http.StatusForbidden},
		{"bearer token, no cookie", false, "", "", true, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/runs/r1/stop", strings.NewReader(`{}`))
			if tt.cookie {
				req.AddCookie(c)
			}
			if tt.token != "" {
				req.Header.Set(CSRFHeader, tt.token)
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			if tt.bearer {
				req.Header.Set("Authorization", "Bearer secret")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("%d %s, want %d", resp.StatusCode, b, tt.want)
			}
		})
	}
}

func TestAuthorizeErrors(t *testing.T) {
	a := NewAuth(nil, 0)
	a.SetHost("127.0.0.1:7777")
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:7777/", nil)
	if err := a.Authorize(r, false); !errors.Is(err, ErrNoSession) {
		t.Fatalf("no cookie: %v", err)
	}
	r = httptest.NewRequest(http.MethodGet, "http://127.0.0.1:7777/login?code=x", nil)
	if err := a.Authorize(r, false); err != nil {
		t.Fatalf("the login page must be reachable without a session: %v", err)
	}
	r = httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7777/login?code=x", nil)
	if err := a.Authorize(r, false); !errors.Is(err, ErrNoSession) {
		t.Fatalf("POST /login: %v", err)
	}
}

func TestRequestsNamingAnotherHostAreRefused(t *testing.T) {
	src := newFakeSource()
	src.commit(api.Run{ID: "r1", Status: api.RunRunning})
	srv, s, _ := testServer(t, src)
	c := login(t, srv, s, "/")
	code, _ := s.Auth().NewCode("/")
	for _, host := range []string{"evil.example:" + strings.Split(srv.URL, ":")[2], "localhost", "127.0.0.1:1"} {
		for _, p := range []string{"/", "/runs/r1", LoginPath + "?code=" + code} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+p, nil)
			req.Host = host
			req.AddCookie(c)
			resp, err := (&http.Client{CheckRedirect: noRedirect}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "not the dashboard&#39;s address") {
				t.Errorf("GET %s with Host %q: %d %s", p, host, resp.StatusCode, b)
			}
			if strings.Contains(string(b), s.Auth().Host()) {
				t.Errorf("the refusal names the dashboard's host: %s", b)
			}
		}
	}
	// The code survived the refused attempts.
	if resp, body := get(t, srv.URL+LoginPath+"?code="+code, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the code after refused attempts: %d %s", resp.StatusCode, body)
	}
	// The bearer token opens the API whatever the host.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.Host = "127.0.0.1:1"
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bearer token with another Host: %d", resp.StatusCode)
	}
	// Without SetHost nothing but the token is served.
	a := NewAuth(nil, 0)
	if err := a.Authorize(httptest.NewRequest(http.MethodGet, "http://127.0.0.1:7777/login?code=x", nil), false); !errors.Is(err, ErrHost) {
		t.Fatalf("no host set: %v", err)
	}
}

func TestSessionScope(t *testing.T) {
	a := NewAuth(nil, 0)
	a.SetHost("loopd-x.localhost:7777")
	code, _ := a.NewCode("/")
	sid, _, err := a.redeem(code)
	if err != nil {
		t.Fatal(err)
	}
	csrf := a.sessions[sid].csrf
	tests := []struct {
		method, path string
		ok           bool
	}{
		{"GET", "/", true}, {"GET", "/runs/abc", true}, {"HEAD", "/runs/abc", true}, {"GET", "/assets/app.js", true},
		{"GET", "/live/runs?after=0", true}, {"GET", "/live/runs/abc", true}, {"GET", "/live/runs/abc/log", true},
		{"GET", "/live/runs/abc/log?step=2", true}, {"POST", "/live/runs/abc/log?step=2", false},
		{"GET", "/metrics", true}, {"GET", "/v1/runs/abc/diff?iteration=2", true},
		{"POST", "/v1/runs/abc/stop", true}, {"POST", "/v1/runs/abc/pause", true}, {"POST", "/v1/runs/abc/resume", true},
		{"POST", "/v1/runs/abc/signal", true}, {"POST", "/v1/runs/abc/land", true}, {"POST", "/v1/runs/abc/answer", true},
		{"POST", "/v1/runs/abc/answer/x", false},
		// A backlog page's Retry of a blocked task; not the task list's JSON,
		// nor a task id that is not one segment.
		{"POST", "/v1/runs/abc/tasks/t1/retry", true}, {"POST", "/v1/runs/abc/tasks/%2312/retry", true},
		{"GET", "/v1/runs/abc/tasks", false}, {"POST", "/v1/runs/abc/tasks/t1", false},
		{"POST", "/v1/runs/abc/tasks//retry", false}, {"POST", "/v1/runs/abc/tasks/a/b/retry", false},
		{"POST", "/v1/runs/abc/tasks/a%2Fb/retry", false}, {"POST", "/v1/runs/abc/tasks/t1/retry/x", false},
		{"POST", "/v1/runs/abc/tasks/../../../trust/retry", false}, {"GET", "/v1/runs/abc/tasks/t1/retry", false},

		{"POST", "/v1/runs", false}, {"POST", "/v1/trust", false}, {"DELETE", "/v1/trust", false},
		{"POST", "/v1/daemon/stop", false}, {"POST", "/v1/worktrees/clean", false}, {"POST", "/v1/dashboard/login", false},
		{"GET", "/v1/runs", false}, {"GET", "/v1/daemon", false}, {"GET", "/v1/runs/abc", false},
		{"GET", "/v1/runs/abc/logs", false}, {"GET", "/v1/runs/abc/events", false},
		{"GET", "/v1/runs/abc/stop", false}, {"POST", "/runs/abc", false}, {"PUT", "/v1/runs/abc/stop", false},
		{"POST", "/v1/runs/abc/../../runs", false}, {"GET", "/v1/runs/abc/diff/../../../daemon", false},
		// Escaped: checked decoded, routed escaped (to GET /v1/runs/{ref}).
		{"GET", "/v1/runs/abc%2Fdiff", false}, {"POST", "/v1/runs/abc%2Fstop", false}, {"GET", "/runs/a%62c", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, "http://loopd-x.localhost:7777"+tt.path, nil)
		r.AddCookie(&http.Cookie{Name: CookieName(a.Host()), Value: sid})
		r.Header.Set(CSRFHeader, csrf)
		r.Header.Set("Origin", "http://loopd-x.localhost:7777")
		g, err := a.Check(r, false)
		if tt.ok != (err == nil) {
			t.Errorf("%s %s with a session: %v, want allowed=%v", tt.method, tt.path, err, tt.ok)
		}
		if err == nil && g != GrantSession {
			t.Errorf("%s %s: grant %v, want a session's", tt.method, tt.path, g)
		}
		if !tt.ok && err != nil && !errors.Is(err, ErrScope) {
			t.Errorf("%s %s: %v, want ErrScope", tt.method, tt.path, err)
		}
		// The bearer token opens all of it.
		if g, err := a.Check(r, true); err != nil || g != GrantToken {
			t.Errorf("%s %s with the token: %v %v", tt.method, tt.path, g, err)
		}
	}
}

func TestHeadDoesNotUseUpALoginCode(t *testing.T) {
	srv, s, _ := testServer(t, newFakeSource())
	code, _ := s.Auth().NewCode("/")
	for range 3 {
		resp, err := http.Head(srv.URL + LoginPath + "?code=" + code)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 0 || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("HEAD /login: %d, cookies %v, headers %v", resp.StatusCode, resp.Cookies(), resp.Header)
		}
	}
	if resp, body := get(t, srv.URL+LoginPath+"?code="+code, nil); resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		t.Fatalf("GET after HEADs: %d %s", resp.StatusCode, body)
	}
}

func TestLoopbackHostIsFreshAndUnderLocalhost(t *testing.T) {
	re := regexp.MustCompile(`^loopd-[0-9a-f]{32}\.localhost:7777$`)
	a, b := NewLoopbackHost("7777"), NewLoopbackHost("7777")
	if !re.MatchString(a) || a == b {
		t.Fatalf("hosts %q, %q: want two different loopd-<128 bits>.localhost:7777", a, b)
	}
}

func TestLoginRefusalsGoToTheRefusalLog(t *testing.T) {
	srv, s, _ := testServer(t, newFakeSource())
	var n int
	s.LogRefusalsWith(func(string, ...zap.Field) { n++ })
	for range 5 {
		get(t, srv.URL+LoginPath+"?code=bad", nil)
	}
	if n != 5 {
		t.Fatalf("%d refusals reached the refusal log, want 5", n)
	}
}

// ledgerSource holds one run of n iterations, each an implementation and a
// verification step.
func ledgerSource(n int) *fakeSource {
	src := newFakeSource()
	src.commit(api.Run{ID: "big", Status: api.RunRunning, Iteration: n})
	var steps []Step
	for i := 1; i <= n; i++ {
		failed := n - i
		steps = append(steps,
			Step{Step: api.Step{RunID: "big", Seq: 2*i - 1, Phase: api.PhaseImplementation, Iteration: i, Status: api.StepSucceeded,
				Usage: api.Usage{InputTokens: 1000, OutputTokens: 100, CostUSD: 0.01}}, FinalMessage: fmt.Sprintf("final words of %d", i)},
			Step{Step: api.Step{RunID: "big", Seq: 2 * i, Phase: api.PhaseVerification, Iteration: i, Status: api.StepFailed,
				Tests: &api.Tests{Failed: &failed, FailedNames: []string{fmt.Sprintf("TestNumber%d", i)}}}})
	}
	steps[0].Changes = &api.Changes{Commit: "0123456789abcdef", FilesChanged: 2, Insertions: 10, Deletions: 3, Files: []string{"a.go", "b.go"}}
	src.steps["big"] = steps
	return src
}

func TestLedgerPagesALongRun(t *testing.T) {
	const n = 10_000
	src := ledgerSource(n)
	srv, s, _ := testServer(t, src)
	c := login(t, srv, s, "/")
	iterations := regexp.MustCompile(`data-iteration="(\d+)"`)
	tests := []struct {
		page        string
		first, last string
	}{
		{"", "10000", "9976"},
		{"2", "9975", "9951"},
		{"400", "25", "1"},
	}
	for _, tt := range tests {
		src.between = nil
		resp, body := get(t, srv.URL+"/runs/big?page="+tt.page, c)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("page %q: %d", tt.page, resp.StatusCode)
		}
		its := iterations.FindAllStringSubmatch(body, -1)
		if len(its) != PageSize || its[0][1] != tt.first || its[len(its)-1][1] != tt.last {
			t.Fatalf("page %q shows %d iterations from %v to %v, want %d from %s to %s", tt.page, len(its), its[0], its[len(its)-1], PageSize, tt.first, tt.last)
		}
		if len(src.between) != 1 || src.between[0][1]-src.between[0][0]+1 != 2*PageSize {
			t.Fatalf("page %q read steps %v, want one range of %d steps", tt.page, src.between, 2*PageSize)
		}
		if !strings.Contains(body, "page "+map[string]string{"": "1", "2": "2", "400": "400"}[tt.page]+" of 400") {
			t.Fatalf("page %q: no pager", tt.page)
		}
		// The charts cover the whole run in a bounded number of points.
		for _, pts := range regexp.MustCompile(`points="([^"]*)"`).FindAllStringSubmatch(body, -1) {
			if k := len(strings.Fields(pts[1])); k > maxPoints || k < 10 {
				t.Fatalf("a chart of %d iterations has %d points, want ≤ %d", n, k, maxPoints)
			}
		}
		if len(body) > 200_000 {
			t.Fatalf("page %q is %d bytes", tt.page, len(body))
		}
	}
	// The oldest page has the one recorded change; the rest say none was.
	_, body := get(t, srv.URL+"/runs/big?page=400", c)
	for _, want := range []string{"final words of 1", "TestNumber1", "2 files", "+10", "−3", "a.go", "01234567",
		`data-diff="/v1/runs/big/diff?iteration=1"`, "no change recorded", "9999 failed"} {
		if !strings.Contains(body, want) {
			t.Errorf("page 400 lacks %q", want)
		}
	}
	for _, bad := range []string{"0", "-1", "x"} {
		if resp, _ := get(t, srv.URL+"/runs/big?page="+bad, c); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("page=%s: %d, want 400", bad, resp.StatusCode)
		}
	}
	if resp, body := get(t, srv.URL+"/runs/nope", c); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "not found") {
		t.Errorf("an unknown run: %d %s", resp.StatusCode, body)
	}
}

// sseEvent reads the next event of a server-sent events stream.
func sseEvent(t *testing.T, r *bufio.Reader) (string, string) {
	t.Helper()
	var event, data string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && event != "":
			return event, data
		case strings.HasPrefix(line, "event: "):
			event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
}

func TestRunsStreamSendsChangedRows(t *testing.T) {
	src := newFakeSource()
	src.commit(api.Run{ID: "r1", Status: api.RunRunning, Goal: "first", Workspace: "/w/a"})
	srv, s, _ := testServer(t, src)
	c := login(t, srv, s, "/")
	_, page := get(t, srv.URL+"/?status=RUNNING", c)
	m := regexp.MustCompile(`data-stream="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no stream in the runs page:\n%s", page)
	}
	streamURL := strings.ReplaceAll(m[1], "&amp;", "&")
	if streamURL != "/live/runs?after=1&status=RUNNING" {
		t.Fatalf("stream %q: it must start after the page's seq and keep its filter", streamURL)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+streamURL, nil)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	rd := bufio.NewReader(resp.Body)

	// A change after the page's seq arrives as a row.
	src.commit(api.Run{ID: "r2", Status: api.RunRunning, Goal: "second <b>bold</b>", Workspace: "/w/b"})
	ev, data := sseEvent(t, rd)
	var u rowUpdate
	if err := json.Unmarshal([]byte(data), &u); err != nil || ev != "run" || u.ID != "r2" ||
		!strings.Contains(u.HTML, `id="run-r2"`) || !strings.Contains(u.HTML, "second &lt;b&gt;bold&lt;/b&gt;") {
		t.Fatalf("event %q %s: want r2's row, escaped", ev, data)
	}
	// A run that leaves the filter is removed.
	src.commit(api.Run{ID: "r1", Status: api.RunCompleted, Goal: "first"})
	_, data = sseEvent(t, rd)
	if err := json.Unmarshal([]byte(data), &u); err != nil || u.ID != "r1" || u.HTML != "" {
		t.Fatalf("%s: want r1 removed (html empty)", data)
	}
}

func TestRunStreamSendsTheRunsParts(t *testing.T) {
	src := ledgerSource(3)
	srv, s, _ := testServer(t, src)
	c := login(t, srv, s, "/")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/live/runs/big?after=1&page=1", nil)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)

	// Another run's event is not this page's business; this run's is.
	src.commit(api.Run{ID: "other", Status: api.RunRunning})
	run, _ := src.Run(t.Context(), "big")
	run.Status, run.Reason = api.RunFailed, "max_consecutive_failures:verification:3"
	src.commit(run)
	ev, data := sseEvent(t, rd)
	var u runUpdate
	if err := json.Unmarshal([]byte(data), &u); err != nil || ev != "run" {
		t.Fatalf("event %q %s", ev, data)
	}
	// The reason may wrap at its colons, nowhere else.
	if u.Status != api.RunFailed || !strings.Contains(u.Summary, "max_consecutive_failures:<wbr>verification:<wbr>3") ||
		!strings.Contains(u.Ledger, `id="it-3"`) || !strings.Contains(u.Charts, "<svg") {
		t.Fatalf("update %+v: want the FAILED summary, the ledger's newest page and the charts", u)
	}
	// The buttons follow: an ended in-place run offers Resume, and says
	// why it offers no Land.
	if fmt.Sprint(u.Offer) != "[resume]" || !strings.Contains(u.Note, "in place") {
		t.Fatalf("update offers %v (%q), want [resume] and a note that the run ran in place", u.Offer, u.Note)
	}
}

func TestLogStreamTailsTheNewestStep(t *testing.T) {
	src := newFakeSource()
	src.commit(api.Run{ID: "r", Status: api.RunRunning})
	dir := t.TempDir()
	first := dir + "/1.log"
	// More than the backlog: only the tail is sent, never a split character.
	big := strings.Repeat("é", logBacklog) + "\nlast line of step 1\n"
	if err := os.WriteFile(first, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	src.steps["r"] = []Step{{Step: api.Step{RunID: "r", Seq: 1, Phase: api.PhaseImplementation, Iteration: 1, LogPath: first, Status: api.StepRunning}}}
	srv, s, _ := testServer(t, src)
	c := login(t, srv, s, "/")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/live/runs/r/log", nil)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	next := func() logUpdate {
		t.Helper()
		_, data := sseEvent(t, rd)
		var u logUpdate
		if err := json.Unmarshal([]byte(data), &u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	if u := next(); !u.Start || u.Seq != 1 || u.Phase != "implementation" {
		t.Fatalf("first update %+v: want the start of step 1", u)
	}
	var text strings.Builder
	for !strings.Contains(text.String(), "last line of step 1") {
		u := next()
		if strings.ContainsRune(u.Text, utf8.RuneError) {
			t.Fatal("the tail split a character")
		}
		text.WriteString(u.Text)
	}
	if n := len(text.String()); n > logBacklog+len("…")+4 {
		t.Fatalf("the backlog sent %d bytes, want about %d", n, logBacklog)
	}
	// What the step writes next arrives as it is written.
	f, err := os.OpenFile(first, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "more output")
	f.Close()
	if u := next(); u.Text != "more output\n" {
		t.Fatalf("appended output arrived as %q", u.Text)
	}
	// A new step: the tail moves on.
	second := dir + "/2.log"
	if err := os.WriteFile(second, []byte("verifying\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	src.steps["r"] = append(src.steps["r"], Step{Step: api.Step{RunID: "r", Seq: 2, Phase: api.PhaseVerification, Iteration: 1, LogPath: second}})
	src.mu.Unlock()
	src.commit(api.Run{ID: "r", Status: api.RunRunning})
	if u := next(); !u.Start || u.Seq != 2 || u.Phase != "verification" {
		t.Fatalf("%+v: want the start of step 2", u)
	}
	if u := next(); u.Text != "verifying\n" {
		t.Fatalf("step 2's output arrived as %q", u.Text)
	}
}

// verify_baseline on a run's page: the baseline step's failing tests (the
// pre-existing ones) in the facts and in its own section before iteration
// 1, and each later failing test marked when it was ignored as one.
func TestRunPageShowsTheBaseline(t *testing.T) {
	src := newFakeSource()
	two, one := 2, 1
	src.commit(api.Run{ID: "b", Status: api.RunCompleted, Iteration: 1, Baseline: &api.Baseline{Seq: 1, Known: true,
		Failing: []string{"test_calc.py::test_old_a", "test_calc.py::test_old_b"}, IgnoredSeq: 3, Ignored: []string{"test_calc.py::test_old_a"}}})
	src.steps["b"] = []Step{
		{Step: api.Step{RunID: "b", Seq: 1, Phase: api.PhaseBaseline, Iteration: 0, Status: api.StepFailed,
			Tests: &api.Tests{Failed: &two, FailedNames: []string{"test_calc.py::test_old_a", "test_calc.py::test_old_b"}}}},
		{Step: api.Step{RunID: "b", Seq: 2, Phase: api.PhaseImplementation, Iteration: 1, Status: api.StepSucceeded}},
		{Step: api.Step{RunID: "b", Seq: 3, Phase: api.PhaseVerification, Iteration: 1, Status: api.StepSucceeded,
			Tests: &api.Tests{Failed: &one, FailedNames: []string{"test_calc.py::test_old_a"}, IgnoredNames: []string{"test_calc.py::test_old_a"}}}},
	}
	srv, s, _ := testServer(t, src)
	c := login(t, srv, s, "/")
	resp, body := get(t, srv.URL+"/runs/b", c)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("run page: %d", resp.StatusCode)
	}
	for _, want := range []string{
		`<dt>Baseline</dt>`, "step #1: 2 failing before the run; step #3 ignored 1 pre-existing",
		`<h3>Baseline</h3>`, "Baseline: the verification before the run",
		"1 of the failing tests was already failing before the run (pre-existing): ignored.",
		`<li class="mono pre-existing">`, "(pre-existing)",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
	if n := strings.Count(body, "test_old_b"); n < 2 {
		t.Errorf("the baseline's failing test_old_b is shown %d times, want in the facts and the baseline section", n)
	}
}
