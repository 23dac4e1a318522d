package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// checkBacklogHistory checks a finished backlog against its record: every
// task started once (a task run each, never a second), landed once, and
// the integration branch's history is the recorded lands — its tip the
// last one, each land on its first-parent line in the order recorded, and
// no merge on that line that is not a recorded land.
func (e *env) checkBacklogHistory(id string) api.BacklogTasks {
	e.t.Helper()
	t := e.t
	bt := e.tasks(id)
	evs := e.events(id)
	started, landed := map[string]int{}, map[string]int{}
	var lands []string
	for _, ev := range evs {
		var p struct {
			Task      string `json:"task"`
			Commit    string `json:"commit"`
			LandRetry int    `json:"land_retry"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		switch ev.Type {
		case "TASK_STARTED":
			if p.LandRetry == 0 {
				started[p.Task]++
			}
		case "TASK_LANDED":
			landed[p.Task]++
			lands = append(lands, p.Commit)
		}
	}
	var runs []api.Run
	if err := json.Unmarshal([]byte(e.must("list", "--json", "--limit", "1000")), &runs); err != nil {
		t.Fatal(err)
	}
	children := map[string]int{}
	for _, r := range runs {
		if r.Parent == id {
			children[r.Name]++
		}
	}
	for _, task := range bt.Tasks {
		if started[task.ID] != 1 || landed[task.ID] != 1 || children[task.ID] != 1 {
			t.Errorf("task %s: started %d times, landed %d times, %d task runs; want once each", task.ID, started[task.ID], landed[task.ID], children[task.ID])
		}
		if task.State != "done" || task.LandedCommit == "" {
			t.Errorf("task %s = %s %q, want done and landed", task.ID, task.State, task.LandedCommit)
		}
	}
	if len(lands) == 0 {
		t.Fatal("no land recorded")
	}
	tip := e.git("rev-parse", bt.Branch)
	if tip != lands[len(lands)-1] {
		t.Errorf("integration tip %s, want the last recorded land %s", tip, lands[len(lands)-1])
	}
	base := e.git("merge-base", "main", bt.Branch)
	line := strings.Fields(e.git("rev-list", "--first-parent", "--reverse", base+".."+bt.Branch))
	pos := -1
	for _, c := range lands {
		i := slices.Index(line, c)
		if i <= pos {
			t.Errorf("land %s is not on the integration branch's first-parent line after the previous land (%v)", c, line)
		}
		pos = i
	}
	for _, c := range line {
		parents := strings.Fields(e.git("rev-list", "--parents", "-n", "1", c))
		if len(parents) > 2 && !slices.Contains(lands, c) {
			t.Errorf("merge %s on the integration branch is not a recorded land (lands %v)", c, lands)
		}
	}
	return bt
}

// A daemon killed after a land's intent was recorded, before git moved the
// integration branch: the next daemon lands the task once, and every task
// is started and landed exactly once.
func TestBacklogCrashBeforeLand(t *testing.T) {
	e := newEnv(t)
	hold := filepath.Join(e.home, "hold-land")
	e.daemonEnv = []string{"LOOPD_TEST_HOLD_BEFORE_TASK_LAND=" + hold}
	e.startDaemon()
	e.backlogRepo()
	e.writeFile("PLAN.md", "- [ ] one {#one}\n- [ ] two (after #one) {#two}\n", 0o644)
	id := e.start("--tasks", "PLAN.md", "crash before a land")
	eventually(t, "the first land's intent", 30*time.Second, func() bool { _, err := os.Stat(hold); return err == nil })
	bt := e.tasks(id)
	if bt.Tasks[0].State != "landing" || bt.Tasks[0].LandedCommit != "" {
		t.Fatalf("held before the land: %+v", bt.Tasks[0])
	}
	// The COMPLETED task run waiting in the land queue keeps its worktree:
	// the land may test the combination there.
	out := e.must("clean", "--ended")
	if !strings.Contains(out, "task run of backlog") {
		t.Errorf("clean --ended while a task run waits to land:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(e.home, "worktrees", bt.Tasks[0].Run)); err != nil {
		t.Fatalf("clean removed a task run's worktree before its land: %v", err)
	}
	e.killDaemon()
	e.daemonEnv = nil
	e.startDaemon()
	if code := e.wait(id); code != 0 {
		t.Fatalf("exit %d after the restart: %+v", code, e.tasks(id))
	}
	e.checkBacklogHistory(id)
	e.checkBacklogDatabase(id)
}

// kill -9 of the daemon (and, a third of the times, an orderly stop) at
// random moments of a backlog (after a random number of its events, plus
// a random delay): no task is started twice,
// none landed twice, no land lost, and the integration branch's history
// is the recorded lands. LOOPD_CHAOS_SEED replays a campaign.
func TestBacklogKilledAtRandom(t *testing.T) {
	seed := chaosSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	e := newEnv(t)
	e.startDaemon()
	agentLog, prompts := e.backlogRepo("max_parallel_tasks=2")
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\nAGENT_SLEEP=0.2\n", 0o600)
	var plan strings.Builder
	for i := 1; i <= 6; i++ {
		after := ""
		if i%3 == 0 {
			after = fmt.Sprintf(" (after #t%d)", i-1)
		}
		fmt.Fprintf(&plan, "- [ ] task %d%s {#t%d}\n", i, after, i)
	}
	e.writeFile("PLAN.md", plan.String(), 0o644)
	id := e.start("--tasks", "PLAN.md", "survive crashes")
	kills, terms := 0, 0
	for {
		seen := len(e.events(id))
		target := seen + 1 + rng.IntN(3)
		ended := false
		eventually(t, "the backlog's next events", 60*time.Second, func() bool {
			if r := e.status(id); r.Status.Terminal() {
				ended = true
				return true
			}
			return len(e.events(id)) >= target
		})
		if ended {
			break
		}
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond) // a random moment after the marker
		if rng.IntN(3) == 0 {
			e.stopDaemon() // an orderly stop: a land's verification is cut, nothing lands
			terms++
		} else {
			e.killDaemon()
			kills++
		}
		e.startDaemon()
	}
	if code := e.wait(id); code != 0 {
		t.Fatalf("exit %d after %d kills and %d stops (seed %d): %+v", code, kills, terms, seed, e.tasks(id))
	}
	t.Logf("%d kills and %d orderly stops of the daemon during the backlog (seed %d)", kills, terms, seed)
	if kills == 0 {
		t.Fatal("the backlog ended before any kill: the test proved nothing")
	}
	bt := e.checkBacklogHistory(id)
	// Each task's agent ran once: its one step was adopted across the
	// restarts, never run again.
	runs := agentRuns(t, agentLog)
	for _, task := range bt.Tasks {
		if runs[task.ID] != 1 {
			t.Errorf("task %s: its agent ran %d times, want once (seed %d)", task.ID, runs[task.ID], seed)
		}
	}
	e.checkBacklogDatabase(id)
}

// checkBacklogDatabase reads the daemon's database directly, with the
// daemon stopped, for what the chaos campaign checks of every run (the
// file is whole, foreign keys hold, steps are recorded once each with one
// start and one end event, event seqs have no gap, every run has exactly
// one terminal event matching its status: no run of these tests is
// resumed) and for the backlog's own
// records: every task run belongs to exactly one task of its backlog, and
// every task that ran names a task run of that backlog.
func (e *env) checkBacklogDatabase(id string) {
	e.t.Helper()
	t := e.t
	e.stopDaemon()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.home, "loopd.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var verdict string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&verdict); err != nil || verdict != "ok" {
		t.Errorf("PRAGMA integrity_check = %q (%v)", verdict, err)
	}
	rows := func(what, q string, args ...any) {
		t.Helper()
		rs, err := db.Query(q, args...)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		defer rs.Close()
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			_ = rs.Scan(ptrs...)
			t.Errorf("%s: %v", what, vals)
		}
	}
	rows("foreign key violation", `PRAGMA foreign_key_check`)
	rows("a step recorded twice", `SELECT run_id, seq, COUNT(*) FROM steps GROUP BY run_id, seq HAVING COUNT(*) > 1`)
	rows("a step left RUNNING", `SELECT run_id, seq, phase FROM steps WHERE status = 'RUNNING'`)
	rows("seqs with a gap", `SELECT run_id, COUNT(*), MAX(seq) FROM steps GROUP BY run_id HAVING COUNT(*) != MAX(seq)`)
	rows("event seqs with a gap", `SELECT COUNT(*), MIN(seq), MAX(seq) FROM events HAVING COUNT(*) != MAX(seq) - MIN(seq) + 1`)
	rows("a step without exactly one start and one end event", `SELECT s.run_id, s.seq FROM steps s
		WHERE 1 != (SELECT COUNT(*) FROM events e WHERE e.step_id = s.id AND e.type = 'STEP_STARTED')
		OR 1 != (SELECT COUNT(*) FROM events e WHERE e.step_id = s.id AND e.type IN ('STEP_FINISHED','STEP_INTERRUPTED'))`)
	rows("a run with other than one terminal event", `SELECT r.id, r.status, COUNT(e.seq) FROM runs r LEFT JOIN events e
		ON e.run_id = r.id AND e.type IN ('RUN_COMPLETED','RUN_FAILED','RUN_ABORTED','RUN_INTERRUPTED')
		GROUP BY r.id HAVING COUNT(e.seq) != 1 OR MAX(e.type) != 'RUN_' || r.status`)
	rows("a task run that is no task's", `SELECT r.id, r.name FROM runs r WHERE r.parent = ?
		AND 1 != (SELECT COUNT(*) FROM tasks t WHERE t.backlog = r.parent AND t.task_run = r.id)`, id)
	rows("a task whose run is not one of the backlog's", `SELECT t.id, t.task_run FROM tasks t WHERE t.backlog = ? AND t.task_run != ''
		AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = t.task_run AND r.parent = t.backlog)`, id)
	rows("a done task without its land", `SELECT id, state FROM tasks WHERE backlog = ? AND (state != 'done' OR landed_commit = '')`, id)
}
