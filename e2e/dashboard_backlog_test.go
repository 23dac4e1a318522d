package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loopd/loopd/internal/api"
)

// dashboardBacklogAgent is a fake agent for the backlog page's test: it
// finds its task in the prompt, holds the parse task until $GATE/release
// exists (so the page is seen while it runs), and never completes the evil
// task until $GATE/evil-ok exists (a file outside the workspace: creating
// it asks for no new trust).
const dashboardBacklogAgent = `#!/bin/sh
prompt=$(cat "$LOOP_PROMPT_FILE")
task=$(printf '%s\n' "$prompt" | sed -n 's/^## Your task (\([^)]*\)).*/\1/p' | head -n 1)
echo "$task $LOOP_ITERATION" >> "$GATE/agent.log"
if [ "$task" = parse ]; then
  while [ ! -f "$GATE/release" ]; do sleep 0.05; done
fi
if [ "$task" = evil ] && [ ! -f "$GATE/evil-ok" ]; then echo "I could not do it"; exit 0; fi
echo "$task" > "task-$task.txt"
printf 'did %s\n<promise>COMPLETE</promise>\n' "$task"
`

// hostileTitle is a task title a stranger's plan may hold: markup and an
// attribute break-out (a control character in a title is refused at
// start; a description may hold them: hostileDesc).
const hostileTitle = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2"> shows as text`

// hostileDesc is a description's line with markup, a bidi override that
// shows the text after it reversed and a terminal's erase-line.
const hostileDesc = "<b>not bold</b> and \u202egnp.exe\x1b[2K\rdone"

// A backlog started through the binaries, seen in a real browser: its page
// lists the tasks in dependency order with their states, follows them
// live without a reload, links to each task run's page, and retries the
// blocked task (a session may); the runs page shows the task runs under
// the backlog's row, not as runs of their own. The task list's markup and
// bidi override are shown as text.
func TestDashboardBacklog(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	gate := filepath.Join(e.home, "gate")
	if err := os.MkdirAll(gate, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(e.home, "dash-backlog-agent.sh")
	if err := os.WriteFile(agent, []byte(dashboardBacklogAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	e.writeFile("README", "project\n", 0o644)
	e.writeFile(".gitignore", ".env\n", 0o644)
	e.config("agent=command", "agent_command="+agent, "verify_command=true", "max_iterations=2")
	e.writeFile(".env", "GATE="+gate+"\n", 0o600)
	// wire is listed first but depends on the other two.
	e.writeFile("PLAN.md", "- [ ] Wire them (after #parse, #evil) {#wire}\n"+
		"- [ ] Add the parser {#parse}\n  Write the parser.\n"+
		"- [ ] "+hostileTitle+" {#evil}\n  "+hostileDesc+"\n", 0o644)
	e.git("init", "-q", "-b", "main")
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "project")

	id := e.start("--tasks", "PLAN.md", "build the tool")
	eventually(t, "the parse task's agent", 30*time.Second, func() bool {
		log, _ := os.ReadFile(filepath.Join(gate, "agent.log"))
		return strings.Contains(string(log), "parse 1")
	})
	base := e.login(b, "backlog", id)
	b.eval(`window.loopdMarker = 42`, new(int))

	// Dependency order, not list order: wire after parse and evil.
	order := func() string {
		var s string
		b.eval(`[...document.querySelectorAll("#tasks tr.task")].map(r => r.dataset.task + ":" + r.dataset.state).join(" ")`, &s)
		return s
	}
	b.waitText(`#tasks tr[data-task="parse"]`, "running")
	if got := order(); got != "parse:running evil:ready wire:pending" {
		t.Fatalf("tasks on the page: %q, want parse running, evil ready (waiting for a slot), wire pending", got)
	}
	b.shot("dashboard-backlog-running")

	// The page follows the backlog without a reload: parse lands, evil is
	// blocked after its two iterations, wire is skipped.
	if err := os.WriteFile(filepath.Join(gate, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.waitText("#status", "FAILED")
	b.waitText("#reason", "tasks_blocked:1")
	if got := order(); got != "parse:done evil:blocked wire:skipped" {
		t.Fatalf("tasks on the page: %q, want parse done, evil blocked, wire skipped", got)
	}
	var marker int
	b.eval(`window.loopdMarker`, &marker)
	if marker != 42 {
		t.Fatal("the backlog page was reloaded; it must update in place")
	}
	// loopctl's numbers: the landed commit, the task runs' links.
	bt := e.tasks(id)
	parse, evil := taskByID(t, bt, "parse"), taskByID(t, bt, "evil")
	if parse.LandedCommit == "" || evil.Run == "" {
		t.Fatalf("loopctl tasks: %+v, want parse landed and evil run", bt.Tasks)
	}
	b.waitText(`#tasks tr[data-task="parse"]`, parse.LandedCommit[:12])
	b.waitText(`#tasks tr[data-task="evil"] .why`, string(evil.RunStatus))
	if got := strings.TrimSpace(b.text(`#tasks tr[data-task="evil"] td[data-label="Iterations"]`)); got != fmt.Sprint(evil.Iterations) || evil.Iterations != 2 {
		t.Errorf("the evil task's iterations: page %q, loopctl %d, want 2", got, evil.Iterations)
	}
	// The hostile title and description are text: no element of their
	// markup, no script run, the bidi override and the erase-line shown as
	// escapes.
	var pwned, imgs int
	var title, desc string
	b.run("open the evil task's description", chromedp.Click(`#tasks tr[data-task="evil"] details.desc summary`, chromedp.ByQuery))
	b.eval(`window.pwned || 0`, &pwned)
	b.eval(`document.querySelectorAll("#tasks img, #tasks b, #tasks script").length`, &imgs)
	b.eval(`document.querySelector('#tasks tr[data-task="evil"] .title').textContent`, &title)
	b.eval(`document.querySelector('#tasks tr[data-task="evil"] details.desc pre').textContent`, &desc)
	if pwned != 0 || imgs != 0 || title != hostileTitle {
		t.Fatalf("the hostile title: pwned=%d, %d elements of its markup, text %q, want %q as text", pwned, imgs, title, hostileTitle)
	}
	if want := `<b>not bold</b> and \u202egnp.exe\x1b[2K\rdone`; desc != want {
		t.Fatalf("the hostile description shows as %q, want %q", desc, want)
	}
	b.shot("dashboard-backlog-blocked")

	// The task run's link opens its page, which leads back to the backlog.
	b.run("open the evil task's run", chromedp.Click(`#tasks tr[data-task="evil"] a.task-run-link`, chromedp.ByQuery),
		chromedp.WaitVisible(`body[data-page="run"]`, chromedp.ByQuery))
	if loc := b.location(); loc != base+"/runs/"+evil.Run {
		t.Fatalf("the task run's link opened %s, want %s/runs/%s", loc, base, evil.Run)
	}
	b.waitText("#status", string(evil.RunStatus))
	// Its backlog lands and retries it: its own page offers neither.
	b.waitOffered("")
	b.waitText("#offer-note", "Retry it on the backlog")
	b.run("back to the backlog", chromedp.Click(`#backlog-link`, chromedp.ByQuery),
		chromedp.WaitVisible(`body[data-page="backlog"]`, chromedp.ByQuery))

	// The runs page: one row for the backlog, its task runs under it
	// (folded: it has ended), none on its own.
	b.run("open the runs page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(`#run-`+id, chromedp.ByQuery))
	rows := func() string {
		var s string
		b.eval(`[...document.querySelectorAll("#runs tr")].map(r => r.id.slice(4) + (r.dataset.parent ? "<" + r.dataset.parent : "") + (r.hidden ? ":hidden" : "")).join(" ")`, &s)
		return s
	}
	want := fmt.Sprintf("%s %s<%s:hidden %s<%s:hidden", id, parse.Run, id, evil.Run, id)
	if got := rows(); got != want {
		t.Fatalf("runs page rows %q, want the backlog, then its task runs (oldest first) folded under it: %q", got, want)
	}
	b.waitText(`#run-`+id+` button[data-fold]`, "2 task runs: 1 completed · 1 aborted")
	b.waitText(`#run-`+id, "1 / 3 tasks")
	var goal string
	b.eval(`document.querySelector("#run-`+parse.Run+` .goal").textContent`, &goal) // folded: no visible text
	if strings.TrimSpace(goal) != "Add the parser" {
		t.Errorf("the parse task run's row reads %q, want its task's title", goal)
	}
	b.run("unfold the task runs", chromedp.Click(`#run-`+id+` button[data-fold]`, chromedp.ByQuery))
	if got, want := rows(), fmt.Sprintf("%s %s<%s %s<%s", id, parse.Run, id, evil.Run, id); got != want {
		t.Fatalf("unfolded: %q, want %q", got, want)
	}
	b.shot("dashboard-runs-backlog")

	// Retry from the backlog's page: the blocked task runs again (it can
	// now), its skipped dependent with it, and the backlog completes. The
	// runs page, opened meanwhile, shows the new task runs under it live.
	if err := os.WriteFile(filepath.Join(gate, "evil-ok"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.run("open the backlog page", chromedp.Navigate(base+"/runs/"+id), chromedp.WaitVisible(`button[data-retry]`, chromedp.ByQuery))

	// A session's retry may set what a session's resume may (limits and
	// timeouts), never a command; the tasks' raw JSON needs the token.
	proof := filepath.Join(t.TempDir(), "owned")
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
	for _, set := range []string{"verify_command=id > " + proof, "agent_command=id > " + proof} {
		status, body := post("/v1/runs/"+id+"/tasks/evil/retry", fmt.Sprintf(`{"set":[%q]}`, set))
		if status != http.StatusForbidden || !strings.Contains(body, "may change only limits and timeouts") {
			t.Errorf("a session's retry with --set %s: %d %s; want 403 from the daemon's guard", set, status, body)
		}
	}
	if task := taskByID(t, e.tasks(id), "evil"); task.State != "blocked" || task.Run != evil.Run {
		t.Fatalf("after the refused retries the evil task is %s (run %s), want still blocked with run %s", task.State, task.Run, evil.Run)
	}
	var raw int
	b.run("GET the tasks' JSON from the page", chromedp.Evaluate(`fetch("/v1/runs/`+id+`/tasks").then(r => r.status)`, &raw, awaitPromise))
	if raw != http.StatusForbidden {
		t.Errorf("GET /v1/runs/%s/tasks with the session: %d, want 403 (the raw API needs the token)", id, raw)
	}

	b.act(`#tasks tr[data-task="evil"] button[data-retry]`, "re-opened")
	b.waitText("#status", "COMPLETED")
	b.waitText("#reason", "completed:tasks:3")
	if got := order(); got != "parse:done evil:done wire:done" {
		t.Fatalf("after the retry: %q, want every task done", got)
	}
	// Completed, the backlog offers Land: its integration branch goes into
	// main (loopctl land BACKLOG), and then it offers nothing.
	b.waitOffered("land")
	got := b.act(`form.land button`, "landed")
	if !strings.Contains(got, "into main") {
		t.Errorf("Land of the backlog says %q", got)
	}
	for _, f := range []string{"task-parse.txt", "task-evil.txt", "task-wire.txt"} {
		e.git("cat-file", "-e", "main:"+f)
	}
	b.waitOffered("")
	b.waitText("#branch", "landed")
	if n := strings.Count(e.must("tasks", id), "done"); n < 3 {
		t.Errorf("loopctl tasks after the dashboard's retry:\n%s", e.must("tasks", id))
	}
	b.run("open the runs page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(`#run-`+id, chromedp.ByQuery))
	b.waitText(`#run-`+id+` button[data-fold]`, "4 task runs: 3 completed · 1 aborted")
	var loose int
	b.eval(`[...document.querySelectorAll("#runs tr")].filter(r => r.id !== "run-`+id+`" && r.dataset.parent !== "`+id+`").length`, &loose)
	if loose != 0 {
		t.Fatalf("%d task runs on the runs page outside their backlog's group", loose)
	}
	if st := e.status(id); st.Status != api.RunCompleted {
		t.Fatalf("loopctl status: %s, want COMPLETED", st.Status)
	}
	if _, err := os.Stat(proof); err == nil {
		t.Error("a command sent with the session's retry ran")
	}
}
