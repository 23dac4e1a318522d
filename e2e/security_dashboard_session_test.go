package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/loopd/loopd/internal/api"
)

// More of the dashboard session against another local user: a listener on
// a loopback address other than 127.0.0.1, what a session may ask of a
// land, escaped paths, the page after the daemon stops, and the browser's
// own favicon request.

// On 127.0.0.2 a .localhost name cannot be used (it resolves to 127.0.0.1
// and ::1), and a cookie of the address reaches every server any user runs
// on it. So that listener serves no dashboard: loopctl dashboard says why
// and how to get one, nothing there sets a cookie, and the bearer token
// still opens the API. Before, the login link named 127.0.0.2 and another
// user's server on 127.0.0.2 that the owner's browser visited received the
// session.
func TestSecurityDashboardOtherLoopbackAddressHasNoSession(t *testing.T) {
	otherUser(t)
	probe, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("this machine does not route 127.0.0.2 to loopback: %v", err)
	}
	probe.Close()
	e := newEnv(t)
	e.startDaemon("--http", "127.0.0.2:0")
	var port string
	addrRe := regexp.MustCompile(`serving the API over TCP.*"addr": "127\.0\.0\.2:(\d+)"`)
	eventually(t, "the TCP listener's log line", 10*time.Second, func() bool {
		if m := addrRe.FindStringSubmatch(e.daemonLog()); m != nil {
			port = m[1]
		}
		return port != ""
	})
	b := newBrowser(t)

	r := e.loopctl("dashboard", "--json")
	if r.code == 0 {
		// The attack: log in, then visit another user's page on another
		// port of 127.0.0.2 that loads an image from its own server.
		var login api.DashboardLogin
		_ = json.Unmarshal([]byte(r.stdout), &login)
		b.run("open the login link", chromedp.Navigate(login.URL), chromedp.WaitVisible(`body[data-page="runs"]`, chromedp.ByQuery))
		other := startOtherUserServerOn(t, "127.0.0.2:0", `<!doctype html><title>waiting</title>
<img src="http://127.0.0.2:OWN_PORT/pixel.gif" onload="document.title='loaded'" onerror="document.title='loaded'">`)
		b.run("visit the other user's page", chromedp.Navigate("http://"+other.addr+"/"),
			chromedp.Poll(`document.title === "loaded"`, nil, chromedp.WithPollingTimeout(20*time.Second)))
		for _, got := range other.requests() {
			if strings.Contains(got.Cookie, "loopd_session") {
				t.Errorf("another user's server on 127.0.0.2 received the dashboard session: %s %s %q", got.Method, got.Path, got.Cookie)
			}
		}
		t.Fatalf("loopctl dashboard on 127.0.0.2 printed a login link %s; want a refusal naming 127.0.0.1", login.URL)
	}
	if !strings.Contains(r.stderr, "no dashboard on 127.0.0.2:"+port) || !strings.Contains(r.stderr, "--http 127.0.0.1:"+port) {
		t.Errorf("loopctl dashboard on 127.0.0.2: exit %d, stderr %q; want why and --http 127.0.0.1:%s", r.code, r.stderr, port)
	}
	if !strings.Contains(e.daemonLog(), "no dashboard on this address") {
		t.Errorf("the daemon did not warn at start that 127.0.0.2 serves no dashboard:\n%s", e.daemonLog())
	}

	// Whatever the browser opens there, no cookie is set.
	base := "http://127.0.0.2:" + port
	for _, p := range []string{"/", "/login?code=" + strings.Repeat("0", 32)} {
		b.run("open "+p, chromedp.Navigate(base+p), chromedp.WaitVisible(`#refused`, chromedp.ByQuery))
	}
	var cookies []*network.Cookie
	b.run("read the cookie jar", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().WithURLs([]string{base}).Do(ctx)
		return err
	}))
	if len(cookies) != 0 {
		t.Errorf("the browser holds cookies for %s: %+v", base, cookies)
	}

	// The bearer token opens the API there.
	req, _ := http.NewRequest("GET", base+"/v1/runs", nil)
	req.Header.Set("Authorization", "Bearer "+e.token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/runs with the token on 127.0.0.2: %d", resp.StatusCode)
	}
}

// A session may land only verified work: the page never asks for
// no_verify, and a request that does (another user's page driving the
// buttons, say) is refused and lands nothing. And a path the mux would
// route elsewhere once unescaped (/v1/runs/<id>%2Fdiff is handleGet's, the
// raw JSON of the run) is outside the session's scope.
func TestSecurityDashboardSessionLandsOnlyVerifiedWork(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"), verifyTests, "isolation=worktree")
	e.dashboardRepo()
	id := e.start("Parse nested tables")
	if code := e.wait(id); code != 0 {
		t.Fatalf("run ended with %d, want COMPLETED", code)
	}
	base := e.login(b, "run", id)
	b.waitOffered("land")

	var res struct {
		Status int
		Body   string
	}
	js := fmt.Sprintf(`fetch("/v1/runs/%s/land", {method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json",
		"X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content}, body: '{"no_verify":true}'})
		.then(r => r.text().then(t => ({Status: r.status, Body: t})))`, id)
	b.run("POST land no_verify from the page", chromedp.Evaluate(js, &res, awaitPromise))
	if res.Status != http.StatusForbidden || !strings.Contains(res.Body, "loopctl land --no-verify") {
		t.Errorf("land {no_verify:true} with the session: %d %s; want 403 naming loopctl land --no-verify", res.Status, res.Body)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "done.txt")); err == nil {
		t.Error("a session's land without verification fast-forwarded the run's work into the checkout")
	}
	// Nor may a session push (the user's credentials, then pr_command).
	remote := filepath.Join(e.home, "remote.git")
	e.git("init", "-q", "--bare", remote)
	e.git("remote", "add", "origin", remote)
	js = strings.Replace(js, `'{"no_verify":true}'`, `'{"push":true}'`, 1)
	b.run("POST land push from the page", chromedp.Evaluate(js, &res, awaitPromise))
	if res.Status != http.StatusForbidden || !strings.Contains(res.Body, "loopctl land RUN --push") {
		t.Errorf("land {push:true} with the session: %d %s; want 403 naming loopctl land --push", res.Status, res.Body)
	}
	if refs := e.gitIn(remote, "for-each-ref"); refs != "" {
		t.Errorf("a session's push reached the remote: %s", refs)
	}

	u, _ := url.Parse(base)
	c := b.sessionCookie(base)
	cookie := http.Header{"Cookie": {c.Name + "=" + c.Value}}
	if status, body := tcpDo(t, "GET", u.Port(), u.Host, "/v1/runs/"+id+"%2Fdiff", cookie, ""); status != http.StatusForbidden ||
		!strings.Contains(body, "dashboard session") {
		t.Errorf("GET /v1/runs/%s%%2Fdiff with the session: %d %s; want 403 (out of the session's scope)", id, status, body)
	}
	if status, body := tcpDo(t, "GET", u.Port(), u.Host, "/v1/runs/"+id+"/diff", cookie, ""); status != http.StatusOK {
		t.Errorf("GET /v1/runs/%s/diff with the session: %d %s", id, status, body)
	}

	// The page's own Land still lands, verified.
	got := b.act(`form.land button`, "landed")
	if !strings.Contains(got, "into main (fast-forward)") {
		t.Fatalf("Land shows %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "done.txt")); err != nil {
		t.Fatalf("after Land the checkout lacks the run's done.txt: %v", err)
	}
}

// When the daemon stops, the open page closes its live streams and says
// so, rather than letting EventSource reconnect to whoever listens on the
// port next (another user can bind it once the daemon is gone, and would
// receive the session cookie and serve the page's updates).
func TestSecurityDashboardStreamsEndWithTheDaemon(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1"), "max_iterations=2")
	id := e.start("Stop the page")
	if code := e.wait(id); code != 0 {
		t.Fatalf("run ended with %d, want COMPLETED", code)
	}
	e.login(b, "run", id)
	b.waitText(".live-dot.on", "")
	e.must("daemon", "stop")
	select {
	case <-e.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not stop")
	}
	b.run("wait for the page to say the daemon stopped", chromedp.WaitVisible(`body[data-stopped="1"] #daemon-stopped`, chromedp.ByQuery))
	if got := b.text("#daemon-stopped"); !strings.Contains(got, "daemon stopped") || !strings.Contains(got, "loopctl dashboard") {
		t.Errorf("the page after the daemon stopped says %q", got)
	}
	var live string
	b.eval(`document.getElementById("live").className`, &live)
	if !strings.Contains(live, "off") {
		t.Errorf("the live mark after the daemon stopped: %q", live)
	}
}

// The browser asks for /favicon.ico by itself after the login page and
// every other: it is answered (with nothing) rather than refused, so a
// login leaves no "refused TCP request" warning in the daemon's log.
func TestSecurityDashboardFaviconIsNotARefusal(t *testing.T) {
	e := dashboardEnv(t)
	b := newBrowser(t)
	base := e.login(b, "runs")
	u, _ := url.Parse(base)
	var status int
	b.run("fetch the favicon from the page", chromedp.Evaluate(`fetch("/favicon.ico").then(r => r.status)`, &status, awaitPromise))
	if status != http.StatusNoContent {
		t.Errorf("GET /favicon.ico from the logged-in page: %d, want 204", status)
	}
	if got, body := tcpDo(t, "GET", u.Port(), u.Host, "/favicon.ico", nil, ""); got != http.StatusNoContent || body != "" {
		t.Errorf("GET /favicon.ico without a session: %d %q, want 204 and nothing", got, body)
	}
	if l := e.daemonLog(); strings.Contains(l, "refused TCP request") {
		t.Errorf("a login and the favicon left a refusal in the daemon's log:\n%s", l)
	}
	// Another host is still refused: the favicon opens no door the Host
	// check closes.
	if got, _ := tcpDo(t, "GET", u.Port(), "127.0.0.1:"+u.Port(), "/favicon.ico", nil, ""); got != http.StatusForbidden {
		t.Errorf("GET /favicon.ico naming 127.0.0.1: %d, want 403", got)
	}
}

// otherUserFloodEnv makes the test binary, started again as another user,
// hold N silent connections to a TCP address, opening a new one whenever
// one is closed: "host:port,N" (see floodAsOtherUser).
const otherUserFloodEnv = "LOOPD_E2E_OTHER_USER_FLOOD"

func init() {
	if v := os.Getenv(otherUserFloodEnv); v != "" {
		os.Exit(floodAsOtherUser(v))
	}
}

// floodAsOtherUser holds n connections to addr that never send a byte,
// each replaced as soon as the other end closes it, and says "holding" on
// stdout once all n have connected (then "reopened K" after every 100
// replacements), until it is killed.
func floodAsOtherUser(v string) int {
	addr, ns, _ := strings.Cut(v, ",")
	n, err := strconv.Atoi(ns)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var (
		mu              sync.Mutex
		first, reopened int
	)
	for range n {
		go func() {
			counted := false
			for {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					time.Sleep(time.Millisecond) // the backlog is full: the attacker backs off a little
					continue
				}
				mu.Lock()
				if !counted {
					counted = true
					if first++; first == n {
						fmt.Println("holding")
					}
				} else if reopened++; reopened%100 == 0 {
					fmt.Println("reopened", reopened)
				}
				mu.Unlock()
				_, _ = c.Read(make([]byte, 1)) // until the daemon closes it
				c.Close()
			}
		}()
	}
	select {}
}

// Another local user holding more silent connections than the TCP
// listener's cap, replacing each one the daemon closes, no longer keeps
// the owner out: their connections are closed at accept (the kernel says
// who owns the other end) and never take a slot, and every one of the
// owner's requests with the bearer token is answered. Before, 30 of 30
// failed while the flood went on.
func TestSecurityLocalTCPAnotherUserCannotFillTheCap(t *testing.T) {
	as := otherUser(t)
	e := dashboardEnv(t)
	login := e.loginURL()
	u, _ := url.Parse(login.URL)
	addr := "127.0.0.1:" + u.Port()

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
	bin := filepath.Join(dir, "flood")
	src, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(as[0], append(as[1:], bin)...)
	cmd.Env = []string{otherUserFloodEnv + "=" + addr + ",300", "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	// The flood is on once every connection was opened and the daemon has
	// closed some of them (at the cap, or as another user's).
	deadline := time.After(30 * time.Second)
	for holding := false; !holding; {
		select {
		case l := <-lines:
			holding = l == "holding"
		case <-deadline:
			t.Fatal("the other user's flood never held its connections")
		}
	}
	eventually(t, "the daemon to close a flood connection", 20*time.Second, func() bool {
		return strings.Contains(e.daemonLog(), "closed a TCP connection")
	})

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	failed := 0
	var why []string
	for i := range 30 {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/daemon", nil)
		req.Header.Set("Authorization", "Bearer "+e.token())
		resp, err := client.Do(req)
		if err != nil {
			failed++
			why = append(why, fmt.Sprintf("#%d: %v", i, err))
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			failed++
			why = append(why, fmt.Sprintf("#%d: %d", i, resp.StatusCode))
		}
	}
	if failed > 0 {
		t.Errorf("%d of 30 of the owner's requests failed while another user flooded the port: %v", failed, why)
	}
	if !strings.Contains(e.daemonLog(), "closed a TCP connection from another user") {
		t.Errorf("the daemon never said it closed another user's connection:\n%s", e.daemonLog())
	}
	// The owner's browser still logs in.
	b := newBrowser(t)
	b.run("log in during the flood", chromedp.Navigate(login.URL), chromedp.WaitVisible(`body[data-page="runs"]`, chromedp.ByQuery))
}

// A dashboard session may no more steer a backlog's task run around its
// backlog than loopctl may: land and resume of a task run from the page
// are refused (409, naming the backlog's command) and change nothing.
func TestSecurityDashboardSessionTaskRunThroughItsBacklog(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	e.backlogRepo()
	e.writeFile("PLAN.md", "- [ ] only {#only}\n", 0o644)
	e.git("add", "PLAN.md")
	e.git("commit", "-q", "-m", "plan")
	id := e.start("--tasks", "PLAN.md", "steer from the page")
	if code := e.wait(id); code != 0 {
		t.Fatalf("backlog: exit %d: %+v", code, e.tasks(id))
	}
	task := taskByID(t, e.tasks(id), "only")
	before, evs := e.checkoutState(), len(e.events(task.Run))
	e.login(b, "run", task.Run)
	for _, c := range []struct{ path, body, instead string }{
		{"land", `{}`, "loopctl land " + id},
		{"resume", `{}`, "loopctl resume " + id},
		{"pause", `{}`, "loopctl pause " + id},
	} {
		var res struct {
			Status int
			Body   string
		}
		js := fmt.Sprintf(`fetch("/v1/runs/%s/%s", {method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json",
			"X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content}, body: '%s'})
			.then(r => r.text().then(t => ({Status: r.status, Body: t})))`, task.Run, c.path, c.body)
		b.run("POST "+c.path+" of a task run from the page", chromedp.Evaluate(js, &res, awaitPromise))
		if res.Status != http.StatusConflict || !strings.Contains(res.Body, c.instead) {
			t.Errorf("%s of task run %s with the session: %d %s; want 409 naming %q", c.path, task.Run, res.Status, res.Body, c.instead)
		}
	}
	if e.checkoutState() != before {
		t.Error("a session's refused request changed the checkout")
	}
	if n := len(e.events(task.Run)); n != evs {
		t.Errorf("task run has %d events after the refusals, want %d", n, evs)
	}
}
