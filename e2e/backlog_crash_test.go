package e2e

import (
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
	if bt := e.tasks(id); bt.Tasks[0].State != "landing" || bt.Tasks[0].LandedCommit != "" {
		t.Fatalf("held before the land: %+v", bt.Tasks[0])
	}
	e.killDaemon()
	e.daemonEnv = nil
	e.startDaemon()
	if code := e.wait(id); code != 0 {
		t.Fatalf("exit %d after the restart: %+v", code, e.tasks(id))
	}
	e.checkBacklogHistory(id)
}

// kill -9 of the daemon at random moments of a backlog (after a random
// number of its events, plus a random delay): no task is started twice,
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
	kills := 0
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
		e.killDaemon()
		kills++
		e.startDaemon()
	}
	if code := e.wait(id); code != 0 {
		t.Fatalf("exit %d after %d kills (seed %d): %+v", code, kills, seed, e.tasks(id))
	}
	t.Logf("%d kills of the daemon during the backlog (seed %d)", kills, seed)
	if kills == 0 {
		t.Fatal("the backlog ended before any kill: the test proved nothing")
	}
	e.checkBacklogHistory(id)
}
