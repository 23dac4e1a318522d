package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// verifyManyFailing fails 40 Go tests with long names, whatever the agent
// did: a run that never gets anywhere, as a new user's first run may.
const verifyManyFailing = `verify_command=for i in $(seq -w 1 40); do echo "=== RUN   TestParserHandlesDeeplyNestedTablesWithArraysOfInlineTables$i"; ` +
	`echo "--- FAIL: TestParserHandlesDeeplyNestedTablesWithArraysOfInlineTables$i (0.00s)"; done; echo FAIL; exit 1`

// TestDashboardRunPageReadsWhole: an ended run's page can be read whole —
// every failing test name, a long reason wrapped at its colons, the cost
// as loopctl prints it, the log of any step — and offers only what the
// daemon accepts for it: Resume (and Land for a worktree run), never Stop
// or Pause, and never Land for a run that ran in place.
func TestDashboardRunPageReadsWhole(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	e.config("agent=command", e.fakeAgent("FAKE_COST=0.004"), verifyManyFailing)
	e.dashboardRepo()
	id := e.start("Parse nested tables")
	if code := e.wait(id); code != 1 {
		t.Fatalf("run ended with %d, want FAILED (1)", code)
	}
	st := e.status(id)
	if st.Reason != "max_consecutive_failures:verification:3" {
		t.Fatalf("run ended %s %q, want max_consecutive_failures:verification:3", st.Status, st.Reason)
	}
	e.login(b, "run", id)
	b.waitText("#status", "FAILED")

	// Ended, in place: Resume only, and why there is no Land.
	b.waitOffered("resume")
	b.waitText("#offer-note", "in place")

	// The reason wraps at its colons, never inside a word: the characters
	// that end its lines on screen are colons.
	var ends []string
	b.eval(`(() => {
		const code = document.querySelector("#reason code"), r = document.createRange(), ends = [];
		const walk = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
		let node, top = null, prev = "";
		while ((node = walk.nextNode())) {
			for (let i = 0; i < node.length; i++) {
				r.setStart(node, i); r.setEnd(node, i + 1);
				const rect = r.getClientRects()[0];
				if (!rect) continue;
				if (top !== null && rect.top > top + 2) ends.push(prev);
				top = rect.top; prev = node.data[i];
			}
		}
		return ends;
	})()`, &ends)
	if len(ends) == 0 {
		t.Fatal("the reason fits on one line at this width: the test checks nothing; narrow the window")
	}
	for _, c := range ends {
		if c != ":" {
			t.Fatalf("the reason's lines end in %q: it wraps inside a word", ends)
		}
	}

	// The cost reads as loopctl status prints it.
	if got, want := b.text("#cost"), e.cliCost(id); got != want {
		t.Fatalf("the page's cost reads %q, loopctl status %q", got, want)
	}

	// Every failing test name can be read, whole: the first ones at once,
	// the rest a click away, none clipped by a box.
	var names []string
	for _, s := range e.steps(id) {
		if s.Iteration == 3 && s.Tests != nil {
			names = s.Tests.FailedNames
		}
	}
	if len(names) != 40 {
		t.Fatalf("iteration 3's verification recorded %d failing names, want 40", len(names))
	}
	b.run("show all failing tests", chromedp.Click("#it-3 details.more-failing summary", chromedp.ByQuery))
	var shown []string
	b.eval(`[...document.querySelectorAll("#it-3 .verify .failing li")].map(li => li.textContent)`, &shown)
	if strings.Join(shown, "\n") != strings.Join(names, "\n") {
		t.Fatalf("the page lists %d failing tests:\n%s\nloopctl steps has %d:\n%s", len(shown), strings.Join(shown, "\n"), len(names), strings.Join(names, "\n"))
	}
	var clipped []string
	b.eval(`[...document.querySelectorAll("#it-3 .verify .failing, #it-3 .verify .failing li")].filter(el => {
		const r = el.getBoundingClientRect();
		return el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1 || r.width === 0 || r.height === 0;
	}).map(el => el.tagName + " " + el.textContent.slice(0, 60))`, &clipped)
	if len(clipped) > 0 {
		t.Fatalf("failing test names are clipped (scroll boxes or hidden): %q", clipped)
	}
	b.run("scroll to iteration 3", chromedp.ScrollIntoView("#it-3", chromedp.ByQuery))
	b.viewShot("dashboard-run-failing")

	// The log pane tails the newest step; an older step's log opens on a
	// click of its badge in the ledger.
	b.waitText("#log-step", "verification · iteration 3")
	b.run("open iteration 1's implementation log", chromedp.Click(`#it-1 header [data-log-step]`, chromedp.ByQuery))
	b.waitText("#log-step", "implementation · iteration 1")
	b.waitText("#log", "Iteration 1: I changed the code.")
	b.viewShot("dashboard-run-step-log")
	var log string
	b.eval(`document.getElementById("log").textContent`, &log)
	if strings.Contains(log, "FAIL: TestParser") {
		t.Fatalf("iteration 1's implementation log shows the verification's output:\n%s", log)
	}
	// …and back to the live tail.
	b.run("follow the live tail", chromedp.Click("#log-live", chromedp.ByQuery))
	b.waitText("#log-step", "verification · iteration 3")
	b.waitText("#log", "FAIL: TestParserHandlesDeeplyNestedTablesWithArraysOfInlineTables40")

	// A worktree run that ended short of its goal offers Resume and Land.
	wt := e.start("Parse nested tables, isolated", "--set", "isolation=worktree", "--set", "max_iterations=1")
	if code := e.wait(wt); code != 2 {
		t.Fatalf("the worktree run ended with %d, want ABORTED (2)", code)
	}
	b.run("open the worktree run", chromedp.Navigate(strings.Split(b.location(), "/runs/")[0]+"/runs/"+wt),
		chromedp.WaitVisible(`body[data-page="run"]`, chromedp.ByQuery))
	b.waitText("#status", "ABORTED")
	b.waitOffered("resume land")
	var noteHidden bool
	b.eval(`document.getElementById("offer-note").hidden`, &noteHidden)
	if !noteHidden {
		t.Fatalf("a worktree run that can land shows a note: %q", b.text("#offer-note"))
	}
}
