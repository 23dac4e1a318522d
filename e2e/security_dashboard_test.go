package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/loopd/loopd/internal/api"
)

// The dashboard's session against another user of the same machine: a
// server of theirs on another loopback port that the owner's browser
// visits, /proc/*/cmdline, HEAD probes and floods of bad login codes.

// localhostClient is an HTTP client that reaches a *.localhost host on
// loopback, as browsers do by themselves (Go asks DNS, which has no such
// name). It follows no redirect.
var localhostClient = &http.Client{
	Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err == nil && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// otherUserServerEnv makes the test binary, started again as another
// user, serve otherUserPageEnv's page on a loopback port and report every
// request it receives (see serveAsOtherUser).
const (
	otherUserServerEnv = "LOOPD_E2E_OTHER_USER_SERVER"
	otherUserPageEnv   = "LOOPD_E2E_OTHER_USER_PAGE"
	otherUserAddrEnv   = "LOOPD_E2E_OTHER_USER_ADDR" // where it listens; 127.0.0.1:0 when unset
)

func init() {
	if os.Getenv(otherUserServerEnv) != "" {
		os.Exit(serveAsOtherUser())
	}
}

// received is one request the other user's server got.
type received struct {
	Listening string `json:"listening,omitempty"`
	UID       int    `json:"uid"`
	Method    string `json:"method,omitempty"`
	Path      string `json:"path,omitempty"`
	Host      string `json:"host,omitempty"`
	Cookie    string `json:"cookie,omitempty"`
	Origin    string `json:"origin,omitempty"`
}

// serveAsOtherUser listens on otherUserAddrEnv's address (127.0.0.1:0
// when unset), says where on stdout, then
// serves the page at / (OWN_PORT replaced by its port) and a pixel at
// every other path, writing one JSON line per request to stdout.
func serveAsOtherUser() int {
	addr := os.Getenv(otherUserAddrEnv)
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	page := strings.ReplaceAll(os.Getenv(otherUserPageEnv), "OWN_PORT", port)
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	_ = enc.Encode(received{Listening: l.Addr().String(), UID: os.Getuid()})
	err = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		_ = enc.Encode(received{UID: os.Getuid(), Method: r.Method, Path: r.URL.RequestURI(), Host: r.Host,
			Cookie: r.Header.Get("Cookie"), Origin: r.Header.Get("Origin")})
		mu.Unlock()
		w.Header().Set("Cache-Control", "no-store")
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, page)
			return
		}
		w.Header().Set("Content-Type", "image/gif") // a 1×1 transparent GIF
		_, _ = w.Write([]byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"))
	}))
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// otherUser runs commands as uid 65534 (nobody), or skips the test.
func otherUser(t *testing.T) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("another local user is played by uid 65534 through setpriv, which needs root: run the e2e tests as root (the test container does)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is not installed: it plays another local user")
	}
	return []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}
}

// otherUserServer is a loopback HTTP server run by another user, with what
// it received.
type otherUserServer struct {
	addr string
	mu   sync.Mutex
	got  []received
}

func (s *otherUserServer) requests() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.got...)
}

// startOtherUserServer starts this test binary again as uid 65534, serving
// page (see serveAsOtherUser).
func startOtherUserServer(t *testing.T, page string) *otherUserServer {
	t.Helper()
	return startOtherUserServerOn(t, "127.0.0.1:0", page)
}

// startOtherUserServerOn is startOtherUserServer listening on addr.
func startOtherUserServerOn(t *testing.T, addr, page string) *otherUserServer {
	t.Helper()
	as := otherUser(t)
	// A copy of the test binary that the other user can run: go test's own
	// build directory is private.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "loopd-other-user")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "server")
	src, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(as[0], append(as[1:], bin)...)
	cmd.Env = []string{otherUserServerEnv + "=1", otherUserPageEnv + "=" + page, otherUserAddrEnv + "=" + addr, "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := &otherUserServer{}
	listening := make(chan received, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var r received
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			if r.Listening != "" {
				listening <- r
				continue
			}
			s.mu.Lock()
			s.got = append(s.got, r)
			s.mu.Unlock()
		}
	}()
	select {
	case r := <-listening:
		if r.UID != 65534 {
			t.Fatalf("the other user's server runs as uid %d, want 65534", r.UID)
		}
		s.addr = r.Listening
	case <-time.After(20 * time.Second):
		t.Fatalf("the other user's server did not start: %s", stderr.String())
	}
	return s
}

// sessionCookie is the dashboard's session cookie in b's cookie jar.
func (b *browser) sessionCookie(base string) *network.Cookie {
	b.t.Helper()
	var cookies []*network.Cookie
	b.run("read the cookie jar", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().WithURLs([]string{base}).Do(ctx)
		return err
	}))
	for _, c := range cookies {
		if strings.HasPrefix(c.Name, "loopd_session") {
			return c
		}
	}
	b.t.Fatalf("no session cookie for %s in the browser: %+v", base, cookies)
	return nil
}

// token is the daemon's bearer token.
func (e *env) token() string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.home, "http.token"))
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// tcpDo sends a request to the daemon's TCP port (whatever host it names)
// and returns the status and body.
func tcpDo(t *testing.T, method, port, host, path string, header http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://127.0.0.1:"+port+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := localhostClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var csrfMeta = regexp.MustCompile(`name="csrf-token" content="([0-9a-f]+)"`)

// The owner, logged in to the dashboard, visits a page of another user's
// server on another loopback port. The browser must send it no session,
// and whatever it did get must open nothing when replayed with forged
// Host and Origin headers: no run with the attacker's command.
func TestSecurityDashboardSessionNeverReachesAnotherUsersServer(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	base := e.login(b, "runs")
	u, _ := url.Parse(base)
	port := u.Port()

	other := startOtherUserServer(t, `<!doctype html><title>waiting</title>
<script>var n = 0; function done() { if (++n === 2) document.title = "loaded"; }</script>
<img src="http://127.0.0.1:OWN_PORT/pixel.gif" onload="done()" onerror="done()">
<img src="http://localhost:OWN_PORT/pixel.gif" onload="done()" onerror="done()">`)
	b.run("visit the other user's page", chromedp.Navigate("http://"+other.addr+"/"),
		chromedp.Poll(`document.title === "loaded"`, nil, chromedp.WithPollingTimeout(20*time.Second)))
	got := other.requests()
	if len(got) < 3 {
		t.Fatalf("the other user's server got %d requests, want the page and its two images: %+v", len(got), got)
	}
	session := b.sessionCookie(base)
	var cookies []string
	for _, r := range got {
		if r.Cookie != "" {
			cookies = append(cookies, r.Cookie)
		}
		if strings.Contains(r.Cookie, "loopd_session") || strings.Contains(r.Cookie, session.Value) {
			t.Errorf("the owner's browser sent the dashboard session to another user's server (%s %s, Host %s): %q",
				r.Method, r.Path, r.Host, r.Cookie)
		}
	}

	// The replay, as the attack did it: read the CSRF token from / with
	// the cookies received, then start a run whose agent command writes a
	// file, with a forged Origin, for every Host the attacker might name
	// (the one it knows, and the dashboard's own in the worst case).
	proof := filepath.Join(t.TempDir(), "owned")
	create, _ := json.Marshal(api.CreateRunRequest{Workspace: e.ws, Goal: "x",
		Set: []string{"agent=command", "agent_command=id > " + proof}})
	before := len(e.list())
	for _, cookie := range append(cookies, "") {
		for _, host := range []string{"127.0.0.1:" + port, u.Host, "localhost:" + port} {
			h := http.Header{"Cookie": {cookie}}
			status, page := tcpDo(t, "GET", port, host, "/", h, "")
			if status == http.StatusOK {
				t.Errorf("replaying %q with Host %s opened the runs page", cookie, host)
			}
			csrf := ""
			if m := csrfMeta.FindStringSubmatch(page); m != nil {
				csrf = m[1]
			}
			h.Set("X-CSRF-Token", csrf)
			h.Set("Origin", "http://"+host)
			h.Set("Content-Type", "application/json")
			if status, body := tcpDo(t, "POST", port, host, "/v1/runs", h, string(create)); status != http.StatusForbidden {
				t.Errorf("replaying %q with Host %s: POST /v1/runs answered %d %s, want 403", cookie, host, status, body)
			}
		}
	}
	if n := len(e.list()); n != before {
		t.Errorf("a replay created a run: %d runs, were %d", n, before)
	}
	if _, err := os.Stat(proof); err == nil {
		t.Error("the attacker's agent_command ran as the owner")
	}
}

// list is every run, as loopctl list --json shows them.
func (e *env) list() []api.Run {
	e.t.Helper()
	var runs []api.Run
	if err := json.Unmarshal([]byte(e.must("list", "--all-workspaces", "--json", "--limit", "1000")), &runs); err != nil {
		e.t.Fatal(err)
	}
	return runs
}

// A request naming another host than the dashboard's is refused even with
// a live session (DNS rebinding), and a session opens the dashboard's
// pages, streams, diffs and buttons but never starts runs, trusts a
// workspace or stops the daemon, all of which the bearer token still does.
func TestSecurityDashboardSessionHostAndScope(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=never"), "max_iterations=3")
	// A condition reads the signal (signal is refused otherwise), and never ends the run.
	e.writeFile(".loop/stop.json", `{"failure_conditions":[{"type":"all","conditions":[{"type":"user_signal"},{"type":"never"}]}]}`, 0o644)
	id := e.start("Hold still")
	eventually(t, "the agent", 20*time.Second, func() bool { return len(e.invocations()) == 1 })
	base := e.login(b, "run", id)
	u, _ := url.Parse(base)
	port := u.Port()
	if !strings.HasSuffix(u.Hostname(), ".localhost") || !regexp.MustCompile(`^loopd-[0-9a-f]{32}\.`).MatchString(u.Hostname()) {
		t.Errorf("the dashboard is served at %s, want an unguessable loopd-<random>.localhost host", u.Host)
	}
	c := b.sessionCookie(base)
	if c.Domain != u.Hostname() || !c.HTTPOnly {
		t.Errorf("session cookie %+v: want host-only on %s, HttpOnly", c, u.Hostname())
	}
	cookie := http.Header{"Cookie": {c.Name + "=" + c.Value}}

	// Host: the dashboard's own opens the page; any other is refused with
	// the same cookie, without naming the right one.
	if status, body := tcpDo(t, "GET", port, u.Host, "/runs/"+id, cookie, ""); status != http.StatusOK {
		t.Fatalf("GET /runs/%s with the session: %d %s", id, status, body)
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "rebound.example:" + port, "loopd-00000000000000000000000000000000.localhost:" + port} {
		status, body := tcpDo(t, "GET", port, host, "/runs/"+id, cookie, "")
		if status != http.StatusForbidden || !strings.Contains(body, "not the dashboard") || strings.Contains(body, u.Hostname()) {
			t.Errorf("GET /runs/%s with the session and Host %s: %d %s; want 403 naming no host", id, host, status, body)
		}
	}

	// Scope: from the dashboard's own page, with its CSRF token and its
	// origin — everything a page of it could ever send.
	post := func(path, body string) (int, string) {
		t.Helper()
		var res struct {
			Status int
			Body   string
		}
		js := fmt.Sprintf(`fetch(%q, {method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json",
			"X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content}, body: %q})
			.then(r => r.text().then(t => ({Status: r.status, Body: t})))`, path, body)
		b.run("POST "+path+" from the page", chromedp.Evaluate(js, &res, awaitPromise))
		return res.Status, res.Body
	}
	proof := filepath.Join(t.TempDir(), "owned")
	create, _ := json.Marshal(api.CreateRunRequest{Workspace: e.ws, Goal: "x", Set: []string{"agent_command=id > " + proof}})
	trustReq, _ := json.Marshal(api.TrustRequest{Workspace: e.ws})
	refused := []struct{ path, body string }{
		{"/v1/runs", string(create)},
		{"/v1/trust", string(trustReq)},
		{"/v1/daemon/stop", `{}`},
		{"/v1/runs/" + id + "/resume", `{"set":["agent_command=id > ` + proof + `"]}`},
	}
	before := len(e.list())
	for _, r := range refused {
		if status, body := post(r.path, r.body); status != http.StatusForbidden || !strings.Contains(body, "dashboard") {
			t.Errorf("POST %s with the session: %d %s; want 403", r.path, status, body)
		}
	}
	var raw int
	b.run("GET /v1/runs from the page", chromedp.Evaluate(`fetch("/v1/runs").then(r => r.status)`, &raw, awaitPromise))
	if raw != http.StatusForbidden {
		t.Errorf("GET /v1/runs with the session: %d, want 403 (the raw API needs the token)", raw)
	}
	if n := len(e.list()); n != before {
		t.Errorf("a session created a run: %d runs, were %d", n, before)
	}
	if st := e.status(id); st.Status != api.RunRunning {
		t.Errorf("the run is %s after the refused requests, want RUNNING", st.Status)
	}
	// The buttons' own requests still work: signal through the page.
	if status, body := post("/v1/runs/"+id+"/signal", `{}`); status != http.StatusOK {
		t.Errorf("signal with the session: %d %s", status, body)
	}

	// The bearer token opens all of it, whatever host it names: it trusts
	// a second workspace and starts a run there.
	ws2 := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws2, ".loop"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws2, ".loop", "config"), []byte("agent=command\nagent_command="+scriptedAgent()+"\nmax_iterations=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	trustReq, _ = json.Marshal(api.TrustRequest{Workspace: ws2})
	bearer := http.Header{"Authorization": {"Bearer " + e.token()}, "Content-Type": {"application/json"}}
	if status, body := tcpDo(t, "POST", port, "127.0.0.1:"+port, "/v1/trust", bearer, string(trustReq)); status != http.StatusOK {
		t.Errorf("POST /v1/trust with the token: %d %s", status, body)
	}
	create, _ = json.Marshal(api.CreateRunRequest{Workspace: ws2, Goal: "with the token"})
	if status, body := tcpDo(t, "POST", port, "127.0.0.1:"+port, "/v1/runs", bearer, string(create)); status != http.StatusCreated {
		t.Errorf("POST /v1/runs with the token: %d %s", status, body)
	}
	if status, body := tcpDo(t, "POST", port, "127.0.0.1:"+port, "/v1/daemon/stop", bearer, `{}`); status != http.StatusOK {
		t.Fatalf("POST /v1/daemon/stop with the token: %d %s", status, body)
	}
	select {
	case <-e.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not stop when the token asked")
	}
	if _, err := os.Stat(proof); err == nil {
		t.Error("a command sent with the session ran")
	}
}

// loopctl dashboard --open never puts the login code in a process's
// arguments, which every user reads in /proc/*/cmdline: a poller sees
// every process from loopctl's start to the browser's, and none carries
// the code. The page handed to the browser is private and logs in.
func TestSecurityDashboardOpenKeepsTheCodeOutOfArgv(t *testing.T) {
	e := dashboardEnv(t)
	dir := t.TempDir()
	argsFile, release := filepath.Join(dir, "args"), filepath.Join(dir, "release")
	// The browser stays alive until the poller has seen it.
	e.writeFile("browser.sh", "#!/bin/sh\nprintf '%s' \"$1\" > "+argsFile+".tmp && mv "+argsFile+".tmp "+argsFile+
		"\nwhile [ ! -e "+release+" ]; do sleep 0.02; done\n", 0o755)

	var (
		mu    sync.Mutex
		seen  = map[string]bool{} // every command line seen
		scans int
	)
	ctx, cancel := context.WithCancel(t.Context())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, p := range procs {
				if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
					mu.Lock()
					seen[string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))] = true
					mu.Unlock()
				}
			}
			mu.Lock()
			scans++
			mu.Unlock()
		}
	}()
	scanned := func() int { mu.Lock(); defer mu.Unlock(); return scans }

	r := e.loopctlEnv([]string{"BROWSER=" + filepath.Join(e.ws, "browser.sh")}, "dashboard", "--open")
	if r.code != 0 {
		t.Fatalf("dashboard --open: exit %d %s", r.code, r.stderr)
	}
	eventually(t, "the browser to start", 10*time.Second, func() bool { _, err := os.Stat(argsFile); return err == nil })
	after := scanned()
	eventually(t, "two scans of /proc with the browser running", 10*time.Second, func() bool { return scanned() >= after+2 })
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-polled

	printed := strings.TrimSpace(r.stdout)
	lu, err := url.Parse(printed)
	code := lu.Query().Get("code")
	if err != nil || len(code) != 32 {
		t.Fatalf("dashboard --open printed %q", printed)
	}
	sawBrowser := false
	for cmdline := range seen {
		if strings.Contains(cmdline, "browser.sh") {
			sawBrowser = true
		}
		if strings.Contains(cmdline, code) {
			t.Errorf("the login code is in a process's arguments: %q", cmdline)
		}
	}
	if !sawBrowser {
		t.Fatalf("the poller never saw the browser (%d command lines)", len(seen))
	}

	// The browser got a private file that leads to the printed link.
	arg, _ := os.ReadFile(argsFile)
	page := string(arg)
	fi, err := os.Stat(page)
	if err != nil || !filepath.IsAbs(page) {
		t.Fatalf("the browser was handed %q, want the path of a page: %v", page, err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(page)) })
	di, _ := os.Stat(filepath.Dir(page))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("login page %s is %v in a %v directory, want 0600 in 0700", page, fi.Mode().Perm(), di.Mode().Perm())
	}
	html, _ := os.ReadFile(page)
	if !strings.Contains(string(html), printed) {
		t.Errorf("the login page does not lead to %s:\n%s", printed, html)
	}
	if as := otherUserOrNil(); as != nil {
		if out, err := exec.Command(as[0], append(as[1:], "cat", page)...).CombinedOutput(); err == nil || strings.Contains(string(out), code) {
			t.Errorf("another user read the login page: %s", out)
		}
	}

	// Opened in a real browser, the page logs in.
	b := newBrowser(t)
	b.run("open the login page", chromedp.Navigate("file://"+page), chromedp.WaitVisible(`body[data-page="runs"]`, chromedp.ByQuery))
}

// otherUserOrNil is otherUser's command prefix, nil when this machine
// cannot play another user.
func otherUserOrNil() []string {
	if os.Geteuid() != 0 {
		return nil
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		return nil
	}
	return []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}
}

// A HEAD of a login link (a link preview, a pre-fetcher) leaves its code
// for the browser.
func TestSecurityDashboardHeadKeepsTheCode(t *testing.T) {
	e := dashboardEnv(t)
	login := e.loginURL()
	for range 3 {
		req, _ := http.NewRequest(http.MethodHead, login.URL, nil)
		resp, err := localhostClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(resp.Cookies()) != 0 {
			t.Fatalf("HEAD of the login link set cookies: %v", resp.Cookies())
		}
	}
	b := newBrowser(t)
	b.run("open the login link after HEADs", chromedp.Navigate(login.URL),
		chromedp.WaitVisible(`body[data-page="runs"], #refused`, chromedp.ByQuery))
	if refused := b.text("body"); !strings.Contains(refused, "Runs") || strings.Contains(refused, "not valid") {
		t.Fatalf("the login link after HEAD requests shows %q, want the runs page", refused)
	}
}

// Bad login codes, however many, write a bounded number of log lines, as
// token refusals do.
func TestSecurityDashboardLoginRefusalsAreRateLimited(t *testing.T) {
	e := dashboardEnv(t)
	login := e.loginURL()
	u, _ := url.Parse(login.URL)
	const n = 300
	for i := range n {
		status, _ := tcpDo(t, "GET", u.Port(), u.Host, fmt.Sprintf("/login?code=%032x", i), nil, "")
		if status != http.StatusForbidden {
			t.Fatalf("bad code %d: %d, want 403", i, status)
		}
	}
	// The flood's lines are written before the last answer; one good login
	// afterwards proves the daemon is still serving.
	b := newBrowser(t)
	b.run("log in after the flood", chromedp.Navigate(login.URL), chromedp.WaitVisible(`body[data-page="runs"]`, chromedp.ByQuery))
	lines := 0
	for l := range strings.SplitSeq(e.daemonLog(), "\n") {
		if strings.Contains(l, "login") && strings.Contains(l, "refused") {
			lines++
		}
	}
	if lines == 0 || lines > 2 {
		t.Fatalf("%d refused logins wrote %d log lines, want 1 or 2 (rate-limited):\n%s", n, lines, e.daemonLog())
	}
}

// Browsers try ::1 first for the dashboard's .localhost name: a daemon
// asked for 127.0.0.1:PORT while another process listens on [::1]:PORT
// refuses to start rather than let that process receive the login.
func TestSecurityDashboardPortTakenOnIPv6LoopbackIsRefused(t *testing.T) {
	squat, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback on this machine: nobody can listen on ::1 in the daemon's place")
	}
	defer squat.Close()
	_, port, _ := net.SplitHostPort(squat.Addr().String())
	e := newEnv(t)
	// A daemon that starts anyway is killed after a while, and fails the test.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "loopd"), "--http", "127.0.0.1:"+port)
	cmd.Env = e.environ()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "[::1]:"+port) {
		t.Fatalf("loopd --http 127.0.0.1:%s with [::1]:%s taken: %v\n%s", port, port, err, out)
	}
}
