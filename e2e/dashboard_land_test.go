package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// dashboardGit runs git in the workspace.
func (e *env) dashboardGit(args ...string) {
	e.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = e.ws
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// dashboardRepo makes the workspace a git repository with one commit holding
// its files (.env and the fake agent's traces ignored), on branch main.
func (e *env) dashboardRepo() {
	e.t.Helper()
	e.writeFile(".gitignore", ".env\n.agent-invocations\n.prompt-*\n", 0o644)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.email", "dev@example.com"},
		{"config", "user.name", "Dev"}, {"add", "-A"}, {"commit", "-q", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = e.ws
		if out, err := cmd.CombinedOutput(); err != nil {
			e.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// TestDashboardDiffAndLand: a worktree run's change ledger, an
// iteration's diff on demand, the Land button offered, refused with loopctl
// land's words while the checkout is dirty, then landing, and no longer
// offered once landed.
func TestDashboardDiffAndLand(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=2"), verifyTests, "isolation=worktree")
	e.dashboardRepo()
	id := e.start("Parse nested tables")
	if code := e.wait(id); code != 0 {
		t.Fatalf("run ended with %d, want COMPLETED", code)
	}
	e.login(b, "run", id)

	// The change of iteration 2, its diff on demand.
	b.waitText("#it-2 .change", "done.txt")
	b.run("open the diff", chromedp.Click("#it-2 details.diff summary", chromedp.ByQuery))
	b.waitText("#it-2 .diff-text", "+done in iteration 2")
	b.shot("dashboard-run-diff")

	// COMPLETED in a worktree: Land, nothing else.
	b.waitOffered("land")

	// A refused land says what loopctl land says: here the checkout has
	// an uncommitted change.
	e.writeFile(".gitignore", ".env\n.agent-invocations\n.prompt-*\n# edited\n", 0o644)
	got := b.act(`form.land button`, "land: ")
	cli := e.loopctl("land", id)
	var first string
	for line := range strings.SplitSeq(cli.stderr, "\n") {
		if strings.HasPrefix(line, "land refused") {
			first = line
			break
		}
	}
	if cli.code == 0 || first == "" || !strings.Contains(got, strings.TrimPrefix(first, "land ")) {
		t.Fatalf("a refused Land shows %q; loopctl land says (exit %d) %q", got, cli.code, cli.stderr)
	}
	e.dashboardGit("checkout", "--", ".gitignore")

	// Land: the run's branch goes into main, as loopctl land says.
	got = b.act(`form.land button`, "landed")
	if !strings.Contains(got, "into main (fast-forward)") {
		t.Fatalf("Land shows %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "done.txt")); err != nil {
		t.Fatalf("after Land the checkout lacks the run's done.txt: %v", err)
	}
	var evs []string
	for _, ev := range e.events(id) {
		evs = append(evs, ev.Type)
	}
	if !strings.Contains(strings.Join(evs, " "), "RUN_LANDED") {
		t.Fatalf("no RUN_LANDED among %v", evs)
	}
	b.waitText(".facts", "landed")
	// Landed: nothing more to offer, and the page says where it went.
	b.waitOffered("")
	b.waitText("#offer-note", "Landed into main")
}
