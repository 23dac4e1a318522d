package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/usagefmt"
)

// The dashboard's tests drive Debian's chromium (scripts/install-chromium)
// through chromedp against the real loopd and loopctl. Screenshots of each
// page go to $LOOPD_TEST_SCREENSHOTS (default: the test's temp dir).

// chromiumPath finds the browser, or skips the test (fails it under CI).
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; CI must run scripts/install-chromium")
	}
	t.Skip("chromium is not installed: run scripts/install-chromium for the dashboard's browser tests")
	return ""
}

// browser is one headless chromium with a fresh profile.
type browser struct {
	t     testing.TB
	ctx   context.Context
	shots string
}

func newBrowser(t testing.TB) *browser {
	t.Helper()
	path := chromiumPath(t)
	// A fresh profile, removed by the cleanup below rather than by
	// t.TempDir, which fails the test if a helper process still writes.
	profile, err := os.MkdirTemp("", "loopd-chromium")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // we run as root in the test container
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), // the network is closed
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancel()
		cancelAlloc()
		// Chromium's helper processes may still be writing the profile as
		// they exit: remove it once they are gone.
		deadline := time.Now().Add(10 * time.Second)
		for os.RemoveAll(profile) != nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	shots := os.Getenv("LOOPD_TEST_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, shots: shots}
}

// run runs chromedp actions with a deadline, failing the test with what
// was being done.
func (b *browser) run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var page string
		_ = chromedp.Run(b.ctx, chromedp.OuterHTML("html", &page, chromedp.ByQuery))
		b.t.Fatalf("%s: %v\npage:\n%s", what, err, page)
	}
}

// text is the text of the first element matching sel, once it exists.
func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.run("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

// waitText waits until the element matching sel contains want.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && el.textContent.includes(%q); })()`, sel, want)
	b.run(fmt.Sprintf("wait for %s to contain %q", sel, want), chromedp.Poll(js, nil, chromedp.WithPollingTimeout(25*time.Second)))
}

// eval evaluates JavaScript and returns its result.
func (b *browser) eval(js string, out any) {
	b.t.Helper()
	b.run("eval "+js, chromedp.Evaluate(js, out))
}

// shot saves a full-page screenshot under name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	var png []byte
	b.run("screenshot "+name, chromedp.FullScreenshot(&png, 100)) // quality 100: PNG
	path := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// viewShot saves a screenshot of what the window shows.
func (b *browser) viewShot(name string) {
	b.t.Helper()
	var png []byte
	b.run("screenshot "+name, chromedp.CaptureScreenshot(&png))
	path := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// dashboardEnv starts a daemon with the HTTP listener on a free port.
func dashboardEnv(t *testing.T, daemonArgs ...string) *env {
	t.Helper()
	e := newEnv(t)
	e.startDaemon(append([]string{"--http", "127.0.0.1:0"}, daemonArgs...)...)
	return e
}

// loginURL asks loopctl for a login link.
func (e *env) loginURL(args ...string) api.DashboardLogin {
	e.t.Helper()
	var login api.DashboardLogin
	out := e.must(append([]string{"dashboard", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &login); err != nil {
		e.t.Fatalf("dashboard --json: %v\n%s", err, out)
	}
	return login
}

// login opens a fresh login link in b and waits for the page it opens.
func (e *env) login(b *browser, page string, args ...string) string {
	e.t.Helper()
	login := e.loginURL(args...)
	b.run("open the login link", chromedp.Navigate(login.URL),
		chromedp.WaitVisible(`body[data-page="`+page+`"]`, chromedp.ByQuery))
	u, _ := url.Parse(login.URL)
	return "http://" + u.Host
}

func TestDashboardLogin(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)

	// The printed link: a URL on the listener with a code, on stdout.
	out := strings.TrimSpace(e.must("dashboard"))
	u, err := url.Parse(out)
	if err != nil || u.Path != "/login" || len(u.Query().Get("code")) != 32 {
		t.Fatalf("loopctl dashboard printed %q, want http://127.0.0.1:PORT/login?code=<32 hex>", out)
	}
	base := "http://" + u.Host

	// No cookie: every page and asset is refused, in the browser too.
	b.run("open / without logging in", chromedp.Navigate(base+"/"))
	if got := b.text("#refused"); !strings.Contains(got, "not logged in") || !strings.Contains(got, "loopctl dashboard") {
		t.Fatalf("/ without a session shows %q", got)
	}
	for _, p := range []string{"/", "/assets/app.js", "/assets/app.css", "/runs/x", "/live/runs?after=0", "/v1/runs", "/metrics"} {
		resp, err := localhostClient.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("GET %s without a session: %d, want 403", p, resp.StatusCode)
		}
	}

	// The link logs in and opens the runs page.
	b.run("open the login link", chromedp.Navigate(out), chromedp.WaitVisible(`body[data-page="runs"]`, chromedp.ByQuery))
	b.shot("dashboard-runs-empty")
	var visible string // HttpOnly: the session cookie is invisible to scripts
	b.eval(`document.cookie`, &visible)
	if strings.Contains(visible, "loopd_session") {
		t.Fatalf("the session cookie is readable by scripts: %q", visible)
	}

	// The session opens /metrics too: the listener checks the token or the
	// cookie in one place, for every path.
	b.run("open /metrics", chromedp.Navigate(base+"/metrics"))
	if got := b.text("body"); !strings.Contains(got, "# TYPE loopd_runs") {
		t.Fatalf("/metrics with a session shows %q", got)
	}
	b.run("back to the runs page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(`body[data-page="runs"]`, chromedp.ByQuery))

	// The same link again: refused (single use), even in a logged-in browser.
	b.run("reuse the login link", chromedp.Navigate(out))
	if got := b.text("#refused"); !strings.Contains(got, "already used") {
		t.Fatalf("a reused login link shows %q", got)
	}
	b.shot("dashboard-login-refused")

	// An expired link: refused. The daemon of this test mints codes that
	// live 300ms; the browser opens it once its expiry has passed.
	e2 := newEnv(t)
	e2.daemonEnv = []string{"LOOPD_DASHBOARD_CODE_TTL=300ms"}
	e2.startDaemon("--http", "127.0.0.1:0")
	login := e2.loginURL()
	eventually(t, "the login code's expiry", 5*time.Second, func() bool { return time.Now().After(login.ExpiresAt.Time) })
	b2 := newBrowser(t)
	b2.run("open an expired login link", chromedp.Navigate(login.URL))
	if got := b2.text("#refused"); !strings.Contains(got, "expired") {
		t.Fatalf("an expired login link shows %q", got)
	}
	// …and it set no session: the runs page stays refused.
	b2.run("open / after the expired link", chromedp.Navigate(strings.Split(login.URL, "/login")[0]+"/"))
	if got := b2.text("#refused"); !strings.Contains(got, "not logged in") {
		t.Fatalf("/ after an expired link shows %q", got)
	}

	// --open hands $BROWSER a page that opens the link (never the link
	// itself: see TestSecurityDashboardOpenKeepsTheCodeOutOfArgv).
	opened := filepath.Join(t.TempDir(), "opened")
	e.writeFile("browser.sh", "#!/bin/sh\ncat \"$1\" > "+opened+"\n", 0o755)
	r := e.loopctlEnv([]string{"BROWSER=" + filepath.Join(e.ws, "browser.sh"), "TMPDIR=" + t.TempDir()}, "dashboard", "--open")
	if r.code != 0 {
		t.Fatalf("dashboard --open: exit %d %s", r.code, r.stderr)
	}
	eventually(t, "the browser script to get the link", 10*time.Second, func() bool {
		b, _ := os.ReadFile(opened)
		return strings.Contains(string(b), `content="0;url=`+strings.TrimSpace(r.stdout)+`"`)
	})

	// A run that does not exist is refused by loopctl with the same words
	// as every other command.
	r = e.loopctl("dashboard", "nosuchrun")
	if r.code != 66 || !strings.Contains(r.stderr, "nosuchrun") {
		t.Fatalf("dashboard nosuchrun: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestDashboardWithoutHTTPListener(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	r := e.loopctl("dashboard")
	if r.code != 64 || !strings.Contains(r.stderr, "loopd --http 127.0.0.1:") {
		t.Fatalf("dashboard without --http: exit %d, stderr %q; want 64 and how to start loopd --http", r.code, r.stderr)
	}
}

func TestDashboardRunsPageIsLive(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=release-%d", "FAKE_DONE_AT=2"), verifyDone, "max_iterations=5", "max_cost=3")
	e.login(b, "runs")
	// A marker in the page's memory: it survives only if the page is
	// never reloaded.
	b.eval(`window.loopdMarker = 42`, new(int))

	id := e.start("Teach the widget to count")
	sel := "#run-" + id
	b.waitText(sel+" .badge", "RUNNING")
	b.waitText(sel+" .goal", "Teach the widget to count")
	b.waitText(sel, "$0.00 / $3.00")
	b.waitText(sel, "1 / 5")
	b.shot("dashboard-runs-running")

	// The run moves on: iteration 1 ends (verification fails), iteration 2
	// begins; the row follows without a reload, with loopctl's numbers.
	e.writeFile("release-1", "", 0o644)
	b.waitText(sel, "2 / 5")
	eventually(t, "iteration 2's agent", 20*time.Second, func() bool { return len(e.invocations()) == 2 })
	// loopctl's figures, formatted as loopctl prints them.
	b.waitText(sel, e.cliCost(id)+" / $3.00")
	e.writeFile("release-2", "", 0o644)
	b.waitText(sel+" .badge", "COMPLETED")
	b.waitText(sel+" .reason", "completed:")
	var marker int
	b.eval(`window.loopdMarker`, &marker)
	if marker != 42 {
		t.Fatal("the runs page was reloaded; it must update in place")
	}
	b.shot("dashboard-runs")

	// Filters: a status that does not match hides the run.
	b.run("filter by status", chromedp.Navigate(strings.Split(b.location(), "?")[0]+"?status=FAILED"),
		chromedp.WaitVisible(`#no-runs`, chromedp.ByQuery))
	var rows int
	b.eval(`document.querySelectorAll("#runs tr").length`, &rows)
	if rows != 0 {
		t.Fatalf("status=FAILED shows %d rows, want 0", rows)
	}
	b.run("filter by workspace", chromedp.Navigate(strings.Split(b.location(), "?")[0]+"?status=COMPLETED&workspace="+url.QueryEscape(e.ws)),
		chromedp.WaitVisible(sel, chromedp.ByQuery))
}

// cliCost is a run's cost as `loopctl status` prints it on its usage line.
func (e *env) cliCost(id string) string {
	e.t.Helper()
	out := e.must("status", id)
	m := regexp.MustCompile(`(?m)^\s*usage\s.* · (\$[0-9.]+(?:\+\?)?) \(`).FindStringSubmatch(out)
	if m == nil {
		e.t.Fatalf("no cost on the usage line of loopctl status:\n%s", out)
	}
	return m[1]
}

func (b *browser) location() string {
	b.t.Helper()
	var loc string
	b.eval(`location.href`, &loc)
	return loc
}

// verifyTests fails with Go test output until done.txt exists.
const verifyTests = `verify_command=if [ -f done.txt ]; then printf '%s\n' "=== RUN   TestParse" "--- PASS: TestParse (0.00s)" "=== RUN   TestTable" "--- PASS: TestTable (0.00s)" PASS; ` +
	`else printf '%s\n' "=== RUN   TestParse" "--- FAIL: TestParse (0.00s)" "    parse_test.go:12: want 3, got 2" "=== RUN   TestTable" "--- FAIL: TestTable (0.00s)" FAIL; exit 1; fi`

func TestDashboardRunPageLedger(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=3", "FAKE_COST=0.5"), verifyTests, "max_cost=4")
	id := e.start("Parse nested tables")
	if code := e.wait(id); code != 0 {
		t.Fatalf("run ended with %d, want COMPLETED", code)
	}
	// `loopctl dashboard last` opens the newest run of the workspace.
	e.login(b, "run", "last")
	var shown string
	b.eval(`document.body.dataset.run`, &shown)
	if shown != id {
		t.Fatalf("dashboard last opened run %q, want %s", shown, id)
	}
	b.waitText("#status", "COMPLETED")
	b.waitText("#reason", "completed:promise+verify")
	// The same numbers as loopctl status, written the same way.
	b.waitText("#cost", e.cliCost(id)+" / $4.00")
	b.waitText("#iteration", "3")
	// Every stop condition, with progress.
	b.waitText(`.conditions tr[data-type="max_cost"]`, "$4.00")
	b.waitText(`.conditions tr[data-type="max_iterations"]`, "50")
	var bars int
	b.eval(`document.querySelectorAll(".conditions progress").length`, &bars)
	if bars == 0 {
		t.Fatal("no condition shows a progress bar")
	}

	// The ledger: newest first, each with its final message, change,
	// verification, tokens and cost.
	var its []int
	b.eval(`[...document.querySelectorAll("#ledger article.iteration")].map(a => +a.dataset.iteration)`, &its)
	if fmt.Sprint(its) != "[3 2 1]" {
		t.Fatalf("ledger iterations %v, want [3 2 1]", its)
	}
	b.waitText("#it-3 .final", "All work is finished.")
	b.waitText("#it-3 .final", "<promise>COMPLETE</promise>")
	// The iteration whose agent promised completion says so in its header;
	// the others do not.
	b.waitText("#it-3 header .promise", "promised complete")
	var promised int
	b.eval(`document.querySelectorAll("#ledger header .promise").length`, &promised)
	if promised != 1 {
		t.Fatalf("%d iterations are marked as promised, want 1 (iteration 3)", promised)
	}
	b.waitText("#it-1 .final", "Iteration 1: I changed the code.")
	b.waitText("#it-1 .verify", "0 passed")
	b.waitText("#it-1 .verify", "2 failed")
	b.waitText("#it-1 .verify .failing", "TestParse")
	b.waitText("#it-1 .verify .failing", "TestTable")
	b.waitText("#it-3 .verify", "2 passed")
	b.waitText("#it-3 .verify", "SUCCEEDED")
	var cost2 float64
	var in2 int64
	for _, s := range e.steps(id) {
		if s.Iteration == 2 {
			cost2 += s.Usage.CostUSD
			in2 += s.Usage.InputTokens
		}
	}
	if in2 != 1000 {
		t.Fatalf("iteration 2 used %d input tokens, want the fake agent's 1000", in2)
	}
	b.waitText("#it-2 .usage", usagefmt.USD(cost2))
	b.waitText("#it-2 .usage", "1.0k in")
	// A workspace that is not a git repository has no change ledger.
	b.waitText("#it-2 .change", "no change recorded")

	// Charts of cost and failing tests, drawn on the server.
	var points []string
	b.eval(`[...document.querySelectorAll("#charts svg polyline")].map(p => p.getAttribute("points"))`, &points)
	if len(points) != 2 || strings.Count(points[0], ",") != 3 || strings.Count(points[1], ",") != 3 {
		t.Fatalf("charts %q, want two lines of 3 points (cost, failing tests)", points)
	}
	// The log tail shows the last step's output.
	b.waitText("#log-step", "verification")
	b.waitText("#log", "--- PASS: TestParse")
	b.shot("dashboard-run")
	b.viewShot("dashboard-run-view")

	// A phone-sized screen: the same page, readable (no sideways scroll).
	b.run("phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Reload(),
		chromedp.WaitVisible(`#ledger`, chromedp.ByQuery))
	var overflow bool
	b.eval(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
	if overflow {
		t.Fatal("the run page scrolls sideways on a phone-sized screen")
	}
	b.shot("dashboard-run-phone")
	b.viewShot("dashboard-run-phone-view")
	b.run("scroll to the actions", chromedp.ScrollIntoView(".actions", chromedp.ByQuery))
	b.viewShot("dashboard-run-phone-actions")
	b.run("scroll to the ledger", chromedp.ScrollIntoView("#ledger", chromedp.ByQuery))
	b.viewShot("dashboard-run-phone-ledger")
	b.run("phone runs page", chromedp.Navigate(strings.Split(b.location(), "/runs/")[0]+"/"), chromedp.WaitVisible("#run-"+id, chromedp.ByQuery))
	b.eval(`document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
	if overflow {
		t.Fatal("the runs page scrolls sideways on a phone-sized screen")
	}
	b.shot("dashboard-runs-phone")
}

func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

// act clicks an action button (or submits an action form) and waits for
// its result line to contain want.
func (b *browser) act(sel, want string) string {
	b.t.Helper()
	b.run("clear the result", chromedp.Evaluate(`document.getElementById("action-result").textContent = ""`, nil))
	b.run("click "+sel, chromedp.Click(sel, chromedp.ByQuery))
	b.waitText("#action-result", want)
	return b.text("#action-result")
}

// offered is what the run page offers now: the data-offer names of the
// controls a user can see, in page order.
func (b *browser) offered() string {
	b.t.Helper()
	var s string
	b.eval(`[...document.querySelectorAll("[data-offer]")].filter(e => e.offsetParent !== null).map(e => e.dataset.offer).join(" ")`, &s)
	return s
}

// waitOffered waits until the run page offers exactly want (data-offer
// names in page order; "" for nothing).
func (b *browser) waitOffered(want string) {
	b.t.Helper()
	js := fmt.Sprintf(`[...document.querySelectorAll("[data-offer]")].filter(e => e.offsetParent !== null).map(e => e.dataset.offer).join(" ") === %q`, want)
	ctx, cancel := context.WithTimeout(b.ctx, 25*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.Poll(js, nil, chromedp.WithPollingTimeout(25*time.Second))); err != nil {
		b.t.Fatalf("the run page offers %q, want %q", b.offered(), want)
	}
}

// TestDashboardButtons drives a run through its states with the run page's
// buttons; at each state the page offers only what the daemon accepts
// (the table in internal/dashboard/offer.go), changing without a reload.
func TestDashboardButtons(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	e.writeFile(".loop/stop.json", `{"success_conditions":[{"type":"user_signal"}]}`, 0o644)
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=release-%d"), verifyTests, "max_iterations=3")
	id := e.start("Make it faster")
	eventually(t, "iteration 1's agent", 20*time.Second, func() bool { return len(e.invocations()) == 1 })
	e.login(b, "run", id)
	b.waitText("#status", "RUNNING")
	// The log tail shows the running step's output as it is written.
	b.waitText("#log-step", "implementation · iteration 1")
	b.waitText("#log", "working on iteration 1")
	// Every update below comes without a reload: this marker would go.
	b.eval(`window.loopdMarker = 7`, new(int))

	// RUNNING, in place: stop, stop now, pause and (it has a user_signal
	// condition) signal; nothing to resume, never a land.
	b.waitOffered("stop stop-now pause signal")

	// Pause: requested while the step runs; Pause gives way to Resume,
	// which would cancel the request.
	b.act(`button[data-action="pause"]`, "pause: done")
	if !e.status(id).PauseRequest {
		t.Fatal("the Pause button did not request a pause")
	}
	b.waitOffered("stop stop-now signal resume")

	// Resume with --set on a RUNNING run: the daemon's own refusal,
	// word for word what loopctl prints.
	b.run("type a --set", chromedp.SendKeys("#resume-set", "max_iterations=7", chromedp.ByQuery))
	got := b.act(`form.resume button`, "resume: ")
	cli := e.loopctl("resume", id, "--set", "max_iterations=7")
	if cli.code != 64 {
		t.Fatalf("loopctl resume --set on a running run: exit %d %s", cli.code, cli.stderr)
	}
	if want := "resume: " + strings.TrimSpace(strings.TrimPrefix(cli.stderr, "loopctl: ")); got != want {
		t.Fatalf("the Resume button shows %q; loopctl says %q", got, want)
	}

	// PAUSED once the step ends: resume or stop, no pause, no stop --now
	// (no step runs).
	e.writeFile("release-1", "", 0o644)
	b.waitText("#status", "PAUSED")
	b.waitOffered("stop signal resume")
	// The ledger shows iteration 1's final message now that its
	// implementation step ended (the pause held the run before its
	// verification).
	b.waitText("#it-1 .final", "Iteration 1: I changed the code.")

	// Resume with a --set: the limit is raised, the run goes on.
	got = b.act(`form.resume button`, "resume: done")
	b.waitText("#status", "RUNNING")
	var limit int
	for _, c := range e.status(id).Conditions {
		if c.Type == "max_iterations" {
			var spec struct{ Count int }
			_ = json.Unmarshal(c.Spec, &spec)
			limit = spec.Count
		}
	}
	if limit != 7 {
		t.Fatalf("after Resume with max_iterations=7 the limit is %d (%s)", limit, got)
	}
	b.waitText("#iteration", "2 / 7")
	// Iteration 1's verification ran after the resume: its failing tests
	// joined the ledger.
	b.waitText("#it-1 .verify .failing", "TestParse")

	// Stop: graceful — requested, the run goes on until its step ends;
	// asking again changes nothing, so only Stop now is left of the two.
	eventually(t, "iteration 2's agent", 20*time.Second, func() bool { return len(e.invocations()) == 2 })
	b.waitOffered("stop stop-now pause signal")
	b.act(`button[data-action="stop"]`, "stop: done")
	if st := e.status(id); st.StopRequested != "graceful" || st.Status != api.RunRunning {
		t.Fatalf("after Stop: %s, stop requested %q; want RUNNING with a graceful stop requested", st.Status, st.StopRequested)
	}
	b.waitOffered("stop-now pause signal")
	// Stop now: the step is killed, the run INTERRUPTED.
	b.act(`button[data-action="stop-now"]`, "stop --now: done")
	b.waitText("#status", "INTERRUPTED")
	steps := e.steps(id)
	if last := steps[len(steps)-1]; last.Status != api.StepCanceled {
		t.Fatalf("after Stop now the last step is %s, want CANCELED", last.Status)
	}
	b.waitText("#reason", "user_stop")
	// Ended, in place: resume only — no stop, no pause, and no land, with
	// the reason why.
	b.waitOffered("resume")
	b.waitText("#offer-note", "in place")
	var marker int
	b.eval(`window.loopdMarker`, &marker)
	if marker != 7 {
		t.Fatal("the run page was reloaded; it must update in place")
	}
	b.shot("dashboard-run-buttons")

	// The runs page keeps ended runs' views until their next event: a
	// resumed run is never shown as it was.
	base := strings.Split(b.location(), "/runs/")[0]
	b.run("open the runs page", chromedp.Navigate(base+"/"), chromedp.WaitVisible("#run-"+id, chromedp.ByQuery))
	b.waitText("#run-"+id+" .badge", "INTERRUPTED")
	e.must("resume", id)
	b.run("reload the runs page", chromedp.Reload(), chromedp.WaitVisible("#run-"+id, chromedp.ByQuery))
	var badge string
	b.eval(`document.querySelector("#run-`+id+` .badge").textContent`, &badge)
	if badge == "INTERRUPTED" {
		t.Fatal("the runs page shows a resumed run as INTERRUPTED")
	}

	// Signal: sets user_signal, as loopctl signal does; once set it is not
	// offered again, and the run completes on it after its step.
	b.run("open the run page", chromedp.Navigate(base+"/runs/"+id), chromedp.WaitVisible(`body[data-page="run"]`, chromedp.ByQuery))
	b.waitText("#status", "RUNNING")
	b.waitOffered("stop stop-now pause signal")
	b.act(`button[data-action="signal"]`, "signal: done")
	if !e.status(id).UserSignal {
		t.Fatal("the Signal button did not set user_signal")
	}
	b.waitOffered("stop stop-now pause")
	for i := 2; i <= 7; i++ {
		e.writeFile(fmt.Sprintf("release-%d", i), "", 0o644)
	}
	b.waitText("#status", "COMPLETED")
	b.waitText("#reason", "condition:user_signal")
	// COMPLETED in place: nothing to resume, nothing to land.
	b.waitOffered("")
	b.waitText("#offer-note", "Completed in place")
}

func TestDashboardCSRF(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	e.config("agent=command", e.fakeAgent("FAKE_WAIT_FILE=never"), "max_iterations=3")
	id := e.start("Hold still")
	eventually(t, "the agent", 20*time.Second, func() bool { return len(e.invocations()) == 1 })
	e.login(b, "run", id)

	// A POST with the session cookie but without the page's CSRF token.
	var status int
	b.run("POST without the CSRF token", chromedp.Evaluate(
		`fetch("/v1/runs/`+id+`/stop", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{\"now\":true}"}).then(r => r.status)`,
		&status, awaitPromise))
	if status != http.StatusForbidden {
		t.Fatalf("POST without the CSRF token: %d, want 403", status)
	}
	// A wrong token is refused the same way.
	b.run("POST with a wrong CSRF token", chromedp.Evaluate(
		`fetch("/v1/runs/`+id+`/stop", {method: "POST", headers: {"Content-Type": "application/json", "X-CSRF-Token": "0000"}, body: "{}"}).then(r => r.status)`,
		&status, awaitPromise))
	if status != http.StatusForbidden {
		t.Fatalf("POST with a wrong CSRF token: %d, want 403", status)
	}
	// Nothing changed.
	st := e.status(id)
	if st.Status != api.RunRunning || st.StopRequested != "" {
		t.Fatalf("after refused POSTs the run is %s with stop %q; want RUNNING, untouched", st.Status, st.StopRequested)
	}
	if n := countType(e.events(id), "RUN_INTERRUPTED"); n != 0 {
		t.Fatalf("a refused POST interrupted the run")
	}
	// The same request with the page's token goes through.
	b.act(`button[data-action="stop-now"]`, "stop --now: done")
	b.waitText("#status", "INTERRUPTED")
}
