package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

func TestDependencyOrder(t *testing.T) {
	task := func(id string, pos, prio int, deps ...string) api.Task {
		return api.Task{ID: id, Position: pos, Priority: prio, DependsOn: deps}
	}
	tests := []struct {
		name  string
		tasks []api.Task
		want  string // id:depth, in page order
	}{
		{"list order when nothing depends", []api.Task{task("a", 1, 0), task("b", 2, 0), task("c", 3, 0)}, "a:0 b:0 c:0"},
		{"a dependent listed first comes after its dependencies",
			[]api.Task{task("wire", 1, 0, "parse", "print"), task("parse", 2, 0), task("print", 3, 0)}, "parse:0 print:0 wire:1"},
		{"a chain indents step by step",
			[]api.Task{task("c", 1, 0, "b"), task("b", 2, 0, "a"), task("a", 3, 0), task("x", 4, 0)}, "a:0 b:1 c:2 x:0"},
		{"the longest chain sets the depth",
			[]api.Task{task("a", 1, 0), task("b", 2, 0, "a"), task("c", 3, 0, "a", "b")}, "a:0 b:1 c:2"},
		{"priority first, none given last", []api.Task{task("a", 1, 0), task("b", 2, 2), task("c", 3, 1)}, "c:0 b:0 a:0"},
		{"a dependency comes before a higher priority that waits on it",
			[]api.Task{task("a", 1, 2), task("b", 2, 1, "a")}, "a:0 b:1"},
		{"an unknown dependency and a cycle hide no task",
			[]api.Task{task("a", 1, 0, "b"), task("b", 2, 0, "a"), task("c", 3, 0, "gone"), task("d", 4, 0)}, "c:0 d:0 a:0 b:0"},
		{"a task depending on itself is still listed", []api.Task{task("a", 1, 0, "a")}, "a:0"},
		{"none", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range dependencyOrder(tt.tasks) {
				got = append(got, fmt.Sprintf("%s:%d", r.ID, r.Depth))
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("order %q, want %q", g, tt.want)
			}
		})
	}
}

// hostile is task-list text a stranger may have written: markup, an
// attribute break-out, a bidi override that shows the text after it
// reversed, terminal controls and a NUL.
const hostile = "<script>alert(1)</script>\"><img src=x onerror=alert(2)> ok\u202egnp.exe\x1b[2K\r\x00done\u2066"

// backlogSource is a backlog "bl" of four tasks (a dependent listed
// first), two task runs (one retried away) and a loose run.
func backlogSource() *fakeSource {
	src := newFakeSource()
	src.commit(api.Run{ID: "bl", Kind: "backlog", Status: api.RunRunning, Goal: "build the tool", Workspace: "/w/app",
		Isolation: "worktree", Branch: "loop/bl", BaseBranch: "main"})
	src.commit(api.Run{ID: "k1", Parent: "bl", Name: "parse", Status: api.RunCompleted, Goal: "task parse", Workspace: "/w/app",
		Usage: api.Usage{CostUSD: 0.25, InputTokens: 1000}})
	src.commit(api.Run{ID: "k2", Parent: "bl", Name: "evil" + hostile, Status: api.RunFailed, Goal: "task " + hostile + "\nsecond line",
		Workspace: "/w/app", Usage: api.Usage{CostUSD: 0.5, InputTokens: 2000}})
	src.commit(api.Run{ID: "loose", Status: api.RunCompleted, Goal: "a plain run", Workspace: "/w/app"})
	passed, failed := 12, 1
	src.tasks["bl"] = api.BacklogTasks{Backlog: "bl", Status: api.RunRunning, Goal: "build the tool", Branch: "loop/bl", BaseBranch: "main",
		Tasks: []api.Task{
			{ID: "wire", Position: 1, Title: "Wire them", DependsOn: []string{"parse", "evil" + hostile}, State: "skipped",
				Why: "a dependency is blocked: evil" + hostile},
			{ID: "parse", Position: 2, Title: "Add the parser", State: "done", Run: "k1", RunStatus: api.RunCompleted, Iterations: 2,
				Usage: api.Usage{CostUSD: 0.25, InputTokens: 1000, OutputTokens: 300}, Tests: &api.Tests{Passed: &passed, Failed: new(int)},
				FilesChanged: 2, Insertions: 40, Deletions: 3, LandedCommit: "0123456789abcdef0123", Verified: true},
			{ID: "evil" + hostile, Position: 3, Title: "Title " + hostile, Description: "Line one " + hostile + "\n  line two",
				DependsOn: []string{}, State: "blocked", Why: "its run failed: " + hostile, Run: "k2", RunStatus: api.RunFailed, Iterations: 3,
				Tests: &api.Tests{Passed: &passed, Failed: &failed}, LandAttempts: 2},
			{ID: "later", Position: 4, Title: "Polish", DependsOn: []string{}, State: "pending"},
		}}
	return src
}

// unsafeIn names the first character of page that a browser would act on
// or show other than as written, outside what the page's own markup uses.
func unsafeIn(page string) string {
	for _, r := range page {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return fmt.Sprintf("%U", r)
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f:
			return fmt.Sprintf("%U", r)
		}
	}
	return ""
}

// A backlog's page lists its tasks in dependency order with their state,
// why, numbers and links, and shows every byte of the task list quoted:
// no markup of its own, no bidi override, no control character.
func TestBacklogPageListsTasksQuoted(t *testing.T) {
	srv, s, _ := testServer(t, backlogSource())
	c := login(t, srv, s, "/")
	resp, page := get(t, srv.URL+"/runs/bl", c)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `data-page="backlog"`) {
		t.Fatalf("/runs/bl: %d, want the backlog page:\n%s", resp.StatusCode, page)
	}
	// Dependency order: wire (listed first) after parse and the evil task.
	var order []string
	for _, m := range regexp.MustCompile(`<tr class="task ts-\w+" data-task="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		order = append(order, m[1])
	}
	// wire, listed first, comes after both its dependencies, and (listed
	// before it) before later.
	if len(order) != 4 || order[0] != "parse" || !strings.HasPrefix(order[1], "evil") || order[2] != "wire" || order[3] != "later" {
		t.Fatalf("tasks in page order %q, want parse, the evil task, wire, later", order)
	}
	for _, want := range []string{
		`<a href="/runs/k1" class="mono task-run-link">k1</a>`, // a link to each task run
		`<a href="/runs/k2" class="mono task-run-link">k2</a>`,
		"12 passed", "1 failed", "2 files", "+40", "0123456789ab", "verified", "2 lands sent back",
		// Only the blocked task offers Retry, its id escaped for the URL.
		`data-retry="evil%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22%3E%3Cimg%20src=x%20onerror=alert%282%29%3E%20ok%E2%80%AEgnp.exe%1B%5B2K%0D%00done%E2%81%A6"`,
		"$0.75", // the backlog's cost: every task run's
		"4 · ",  // tasks, then counts by state
		`<span class="task-st ts-done">1 done</span>`,
		`&lt;script&gt;alert(1)&lt;/script&gt;`, `\u202egnp.exe\x1b[2K\r\x00done\u2066`, // quoted, escaped
		"loop/bl from main",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the backlog page lacks %q", want)
		}
	}
	if n := strings.Count(page, "data-retry="); n != 1 {
		t.Errorf("%d Retry buttons, want 1 (the blocked task's)", n)
	}
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<img src=x") {
		t.Error("the task list's markup reached the page as markup")
	}
	if bad := unsafeIn(page); bad != "" {
		t.Errorf("the backlog page holds %s as is", bad)
	}
	// A task run's page names its backlog and its task, quoted.
	_, run := get(t, srv.URL+"/runs/k2", c)
	if !strings.Contains(run, `<a href="/runs/bl" id="backlog-link">backlog bl</a>`) || !strings.Contains(run, `task <bdi>evil&lt;script&gt;`) {
		t.Errorf("the task run's page does not lead back to its backlog:\n%s", run)
	}
	if bad := unsafeIn(run); bad != "" {
		t.Errorf("the task run's page holds %s as is", bad)
	}
	// Its backlog lands it and retries it: the page offers neither.
	if !strings.Contains(run, "Retry it on the backlog") || !regexp.MustCompile(`<form class="land" data-action="land" data-offer="land" hidden>`).MatchString(run) ||
		!regexp.MustCompile(`<form class="resume" data-action="resume" data-offer="resume" hidden>`).MatchString(run) {
		t.Errorf("the failed task run's page offers Land or Resume, or does not say where to retry it")
	}
	// A run that is not a backlog keeps its run page.
	if _, p := get(t, srv.URL+"/runs/loose", c); !strings.Contains(p, `data-page="run"`) {
		t.Error("a plain run's page is not the run page")
	}
}

// The runs page lists task runs under their backlog's row, never on their
// own; a backlog that has ended folds them.
func TestRunsPageGroupsTaskRuns(t *testing.T) {
	src := backlogSource()
	srv, s, _ := testServer(t, src)
	c := login(t, srv, s, "/")
	_, page := get(t, srv.URL+"/", c)
	var rows []string
	for _, m := range regexp.MustCompile(`<tr id="run-(\w+)" class="([^"]*)"([^>]*)>`).FindAllStringSubmatch(page, -1) {
		rows = append(rows, m[1]+"|"+m[2]+"|"+strings.TrimSpace(m[3]))
	}
	// The loose run and the backlog come newest first; the task runs follow
	// the backlog, oldest first.
	bl := -1
	for i, r := range rows {
		if strings.HasPrefix(r, "bl|") {
			bl = i
		}
	}
	if len(rows) != 4 || bl < 0 || bl+2 >= len(rows) ||
		!strings.HasPrefix(rows[bl+1], "k1|st-completed task-run|data-parent=\"bl\"") ||
		!strings.HasPrefix(rows[bl+2], "k2|st-failed task-run|data-parent=\"bl\"") ||
		!strings.Contains(rows[bl], "backlog") || !strings.Contains(rows[bl], `data-open="1"`) {
		t.Fatalf("rows %q: want the backlog's row (open: it runs) with k1 and k2 right under it", rows)
	}
	if strings.Contains(rows[bl+1], "hidden") {
		t.Errorf("a running backlog's task runs are folded: %q", rows[bl+1])
	}
	if !strings.Contains(page, `aria-expanded="true"`) || !strings.Contains(page, "2 task runs: 1 completed · 1 failed") ||
		!strings.Contains(page, "1 / 4 tasks") {
		t.Errorf("the backlog's row does not tally its task runs and tasks")
	}
	// A task run reads as its task's title (quoted), not as the backlog's
	// goal its prompt begins with.
	if !strings.Contains(page, `<bdi>Add the parser</bdi>`) || !strings.Contains(page, `<bdi>Title &lt;script&gt;alert(1)&lt;/script&gt;`) {
		t.Errorf("the task runs' rows do not show their tasks' titles")
	}
	if bad := unsafeIn(page); bad != "" {
		t.Errorf("the runs page holds %s as is", bad)
	}
	// Ended: folded. The status filter picks backlogs by their own status;
	// the task runs come with them whatever theirs.
	b, _ := src.Run(t.Context(), "bl")
	b.Status = api.RunFailed
	src.commit(b)
	_, page = get(t, srv.URL+"/?status=FAILED", c)
	if !strings.Contains(page, `data-open="0"`) || !strings.Contains(page, `id="run-k1" class="st-completed task-run" data-parent="bl" hidden`) {
		t.Errorf("an ended backlog's task runs are not folded under it:\n%s", page)
	}
	_, page = get(t, srv.URL+"/?status=COMPLETED", c)
	if strings.Contains(page, `id="run-k1"`) || !strings.Contains(page, `id="run-loose"`) {
		t.Errorf("status=COMPLETED lists a task run of a FAILED backlog on its own")
	}
}

// openStream opens a live stream with the session cookie c.
func openStream(t *testing.T, u string, c *http.Cookie) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return bufio.NewReader(resp.Body)
}

// A task run's change re-renders its backlog's group on the runs page,
// and the backlog's page (its summary, its tasks and its buttons).
func TestStreamsFollowTaskRuns(t *testing.T) {
	src := backlogSource()
	srv, s, _ := testServer(t, src)
	c := login(t, srv, s, "/")
	after := src.Seq()
	runs := openStream(t, fmt.Sprintf("%s/live/runs?after=%d", srv.URL, after), c)
	backlog := openStream(t, fmt.Sprintf("%s/live/runs/bl?after=%d", srv.URL, after), c)

	k2, _ := src.Run(t.Context(), "k2")
	k2.Status = api.RunRunning
	src.mu.Lock()
	bt := src.tasks["bl"]
	bt.Tasks[2].State, bt.Tasks[2].Why, bt.Tasks[2].RunStatus = "running", "", api.RunRunning
	src.mu.Unlock()
	src.commit(k2)

	ev, data := sseEvent(t, runs)
	var u rowUpdate
	if err := json.Unmarshal([]byte(data), &u); err != nil || ev != "run" || u.ID != "bl" ||
		!strings.Contains(u.HTML, `id="run-bl"`) || !strings.Contains(u.HTML, `id="run-k2" class="st-running task-run"`) ||
		!strings.Contains(u.HTML, "1 running · 1 completed") {
		t.Fatalf("runs stream: %q %s, want the backlog's group with k2 running", ev, data)
	}
	ev, data = sseEvent(t, backlog)
	var bu backlogUpdate
	if err := json.Unmarshal([]byte(data), &bu); err != nil || ev != "backlog" || bu.Status != api.RunRunning ||
		!strings.Contains(bu.Tasks, `data-state="running"`) || strings.Contains(bu.Tasks, "data-retry") ||
		!strings.Contains(bu.Summary, "1 running") || fmt.Sprint(bu.Offer) != "[stop stop-now pause]" {
		t.Fatalf("backlog stream: %q %s, want its tasks with the evil task running and no Retry", ev, data)
	}
	// Another run's change is not the backlog page's business.
	src.commit(api.Run{ID: "other", Status: api.RunRunning})
	b, _ := src.Run(t.Context(), "bl")
	b.Status, b.Reason = api.RunCompleted, "completed:tasks:4"
	src.commit(b)
	_, data = sseEvent(t, backlog)
	if err := json.Unmarshal([]byte(data), &bu); err != nil || bu.Status != api.RunCompleted || fmt.Sprint(bu.Offer) != "[land]" {
		t.Fatalf("backlog stream after it completed: %s, want COMPLETED offering land", data)
	}
}
