package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
)

// TestChaosBacklog is the chaos campaign's kill (chaos_util_test.go: a
// freeze at a random moment — a quarter of them hunting a SQLite write
// transaction — then SIGKILL, or a SIGTERM a third of the times; the
// daemon sometimes left down a while) applied to a backlog: eight tasks,
// two task runs at a time, a dependency chain through some of them. After
// the kills (LOOPD_CHAOS_KILLS, -chaos.kills; default 10) the backlog must
// complete with no task started twice, none landed twice, no land lost,
// the integration branch's history equal to the recorded lands, each
// task's agent run once, the chaos campaign's database invariants, and no
// process of the home left behind. LOOPD_CHAOS_SEED replays a campaign.
func TestChaosBacklog(t *testing.T) {
	kills := chaosKills(t, 10)
	seed := chaosSeed(t)
	t.Logf("chaos backlog: seed %d, up to %d kills (replay: go test -run '^%s$' -v ./e2e/ -chaos.seed=%d -chaos.kills=%d)",
		seed, kills, t.Name(), seed, kills)
	c := &chaos{t: t, e: newEnv(t), seed: seed, began: time.Now(),
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), phaseKills: map[api.Phase]int{}}
	c.mon = newMonitor()
	e := c.e
	c.startDaemon()
	agentLog, prompts := e.backlogRepo("max_parallel_tasks=2")
	e.writeFile(".env", "AGENT_LOG="+agentLog+"\nPROMPTS="+prompts+"\nAGENT_SLEEP=0.15\n", 0o600)
	var plan strings.Builder
	for i := 1; i <= 8; i++ {
		after := ""
		if i%3 == 0 {
			after = fmt.Sprintf(" (after #t%d)", i-1)
		}
		fmt.Fprintf(&plan, "- [ ] task %d%s {#t%d}\n", i, after, i)
	}
	e.writeFile("PLAN.md", plan.String(), 0o644)
	id := e.start("--tasks", "PLAN.md", "survive the chaos")
	for c.kills < kills {
		time.Sleep(c.delay()) // a random moment: the campaign's kill schedule
		if e.status(id).Status.Terminal() {
			break
		}
		c.kill()
		if c.rng.IntN(2) == 0 {
			time.Sleep(time.Duration(c.rng.IntN(80)) * time.Millisecond) // down a while: steps end unwatched
		}
		c.startDaemon()
	}
	if code := e.wait(id); code != 0 {
		t.Fatalf("exit %d after %d kills (seed %d): %+v", code, c.kills, seed, e.tasks(id))
	}
	t.Logf("chaos backlog: %d kills (%d SIGTERM, %d inside a write transaction, %d hunted), daemon starts %d (seed %d)",
		c.kills, c.terms, c.inWriteTx, c.hunted, c.starts, seed)
	if c.kills == 0 {
		t.Fatal("the backlog ended before any kill: the test proved nothing")
	}
	bt := e.checkBacklogHistory(id)
	runs := agentRuns(t, agentLog)
	for _, task := range bt.Tasks {
		if runs[task.ID] != 1 {
			t.Errorf("task %s: its agent ran %d times, want once (seed %d)", task.ID, runs[task.ID], seed)
		}
	}
	if pids := processesMentioning(e.home + "/"); len(pids) > 0 {
		t.Errorf("processes of the ended backlog still alive: %s", describePids(pids))
	}
	e.checkBacklogDatabase(id)
}
