package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loopd/loopd/internal/api"
)

// questionAgent asks a question on its first call and, on the next,
// writes the answer its prompt carries to answer.txt and promises
// completion. Every prompt is kept as .prompt-<call>.
const questionAgent = `#!/bin/sh
prompt=$(cat)
n=$(cat .calls 2>/dev/null || echo 0); n=$((n+1)); echo "$n" > .calls
printf '%s\n' "$prompt" > ".prompt-$n"
case "$prompt" in
*"## The answer"*)
  ans=$(printf '%s\n' "$prompt" | sed -n '/^## The answer$/{n;n;p;}')
  printf '%s\n' "$ans" > answer.txt
  echo "Used: $ans"
  echo "<promise>COMPLETE</promise>" ;;
*)
  echo "Two databases would do."
  echo "<question>Postgres or SQLite?</question>" ;;
esac
`

// A question round-trip through the binaries, with the daemon killed -9
// while the run waits for its answer: the run stays WAITING needs_answer
// across the restart, nothing runs until the answer, and the next prompt
// carries the question and the answer.
func TestQuestionRoundTripSurvivesKill9(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.writeFile("agent.sh", questionAgent, 0o755)
	e.config("agent=command", "agent_command=sh "+filepath.Join(e.ws, "agent.sh"), "completion=promise", "max_iterations=5",
		"max_consecutive_implementation_failures=1")
	id := e.start("pick a database")
	var r api.Run
	eventually(t, "WAITING needs_answer", 20*time.Second, func() bool {
		r = e.status(id)
		return r.Status == api.RunWaiting && r.Reason == "needs_answer"
	})
	if !strings.Contains(r.Description, "Postgres or SQLite?") || !r.WaitUntil.IsZero() || r.Counters.Implementation != 0 {
		t.Fatalf("waiting run: %q until %v counters %+v", r.Description, r.WaitUntil, r.Counters)
	}
	if out := e.must("status", id); !strings.Contains(out, "Postgres or SQLite?") || !strings.Contains(out, "loopctl answer") {
		t.Errorf("status does not show the question:\n%s", out)
	}
	var waiting map[string]any
	for _, ev := range e.events(id) {
		if ev.Type == "RUN_WAITING" {
			_ = json.Unmarshal(ev.Payload, &waiting)
		}
	}
	if waiting["question"] != "Postgres or SQLite?" || waiting["kind"] != "needs_answer" {
		t.Errorf("RUN_WAITING payload %v", waiting)
	}

	e.killDaemon()
	e.startDaemon()
	if r := e.status(id); r.Status != api.RunWaiting || r.Reason != "needs_answer" {
		t.Fatalf("after kill -9: %s %q", r.Status, r.Reason)
	}
	res := e.loopctl("answer", id, "SQLite,", "no", "server")
	if res.code != 0 || !strings.Contains(res.stdout, "answered") {
		t.Fatalf("answer: exit %d: %s%s", res.code, res.stdout, res.stderr)
	}
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d: %+v", code, e.status(id))
	}
	b, err := os.ReadFile(filepath.Join(e.ws, "answer.txt"))
	if err != nil || strings.TrimSpace(string(b)) != "SQLite, no server" {
		t.Fatalf("the agent's answer.txt = %q, %v", b, err)
	}
	prompt, _ := os.ReadFile(filepath.Join(e.ws, ".prompt-2"))
	if !strings.Contains(string(prompt), "## Your question from iteration 1\n\nPostgres or SQLite?") {
		t.Errorf("the second prompt lacks the question:\n%s", prompt)
	}
	calls, _ := os.ReadFile(filepath.Join(e.ws, ".calls"))
	steps := e.steps(id)
	if strings.TrimSpace(string(calls)) != "2" || len(steps) != 2 || steps[0].Question != "Postgres or SQLite?" ||
		steps[0].Answer != "SQLite, no server" || steps[1].Iteration != 2 {
		t.Errorf("calls %q, steps %+v", calls, steps)
	}
	r = e.status(id)
	if r.Reason != "completed:promise" || r.Counters.Implementation != 0 {
		t.Errorf("final: %q counters %+v", r.Reason, r.Counters)
	}

	// A run that is not waiting for an answer refuses one, saying why.
	res = e.loopctl("answer", id, "more")
	if res.code != 64 || !strings.Contains(res.stderr, "not waiting for an answer") {
		t.Errorf("answer to a COMPLETED run: exit %d: %s%s", res.code, res.stdout, res.stderr)
	}
}

// TestDashboardAnswer answers a question from the run page: the page shows
// the question and offers Answer to a run WAITING needs_answer, and the
// answer reaches the agent's next prompt.
func TestDashboardAnswer(t *testing.T) {
	b := newBrowser(t)
	e := dashboardEnv(t)
	e.writeFile("agent.sh", questionAgent, 0o755)
	e.config("agent=command", "agent_command=sh "+filepath.Join(e.ws, "agent.sh"), "completion=promise", "max_iterations=5")
	id := e.start("pick a database")
	eventually(t, "WAITING needs_answer", 20*time.Second, func() bool {
		r := e.status(id)
		return r.Status == api.RunWaiting && r.Reason == "needs_answer"
	})
	e.login(b, "run", id)
	b.waitText("#reason", "Postgres or SQLite?")
	b.waitOffered("stop pause answer resume")
	b.run("type the answer", chromedp.SendKeys("#answer-text", "SQLite, no server", chromedp.ByQuery))
	b.act(`form.answer button`, "answer: done")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d: %+v", code, e.status(id))
	}
	got, err := os.ReadFile(filepath.Join(e.ws, "answer.txt"))
	if err != nil || strings.TrimSpace(string(got)) != "SQLite, no server" {
		t.Fatalf("the agent's answer.txt = %q, %v", got, err)
	}
	b.waitText("#status", "COMPLETED")
	b.waitOffered("")
}
