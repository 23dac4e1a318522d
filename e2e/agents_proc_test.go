package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/fakemodel"
)

// Claude Code refuses --dangerously-skip-permissions as root unless
// IS_SANDBOX=1: the claude preset then ends the run at once, saying what to
// do, instead of failing every step; with IS_SANDBOX=1 in the env file the
// resumed run goes ahead.
func TestClaudePresetAsRootWithoutSandboxAborts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	bin := t.TempDir()
	if err := os.Symlink(scriptedAgent(), filepath.Join(bin, "claude")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH")) // the daemon finds `claude` there
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=claude", "max_iterations=3")
	e.writeFile(".env", "FAKE_DONE_AT=1\n", 0o600)
	id := e.start("goal")
	if code := e.wait(id); code != 2 {
		t.Fatalf("wait exit %d, want 2 (ABORTED)", code)
	}
	r := e.status(id)
	if r.Reason != "fatal:agent_refused_root" {
		t.Fatalf("reason %q (%s), want fatal:agent_refused_root", r.Reason, r.Description)
	}
	for _, want := range []string{"IS_SANDBOX=1", "env_file", "normal user", "loopctl resume"} {
		if !strings.Contains(r.Description, want) {
			t.Errorf("description lacks %q: %s", want, r.Description)
		}
	}
	if n := len(e.invocations()); n != 0 {
		t.Errorf("the agent ran %d times", n)
	}
	if steps := e.steps(id); len(steps) != 0 {
		t.Errorf("%d steps recorded, want none", len(steps))
	}

	e.writeFile(".env", "FAKE_DONE_AT=1\nIS_SANDBOX=1\n", 0o600)
	e.trust() // the changed env file is loaded only once trusted again
	e.must("resume", id)
	if code := e.wait(id); code != 0 {
		r := e.status(id)
		t.Fatalf("after IS_SANDBOX=1: wait exit %d, want 0; %s %s", code, r.Reason, r.Description)
	}
	if n := len(e.invocations()); n != 1 {
		t.Errorf("the agent ran %d times, want 1", n)
	}
}

// reportedCost is the agent-reported cost of u, 0 when none was reported.
func reportedCost(u api.Usage) float64 {
	v, _ := u.ReportedCost()
	return v
}

// transcriptFixture is the path of a parser fixture (real captured output).
func transcriptFixture(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(repoRoot(), "internal", "transcript", "testdata", name)
}

// A real Claude Code result whose cache writes are 1-hour writes is priced
// at the 1-hour rate (2× input), which is what Claude Code itself charged:
// at the 5-minute rate the step would cost $0.0345 instead of $0.0540.
func TestOneHourCacheWritesArePricedAtTheirRate(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", "agent_command=cat "+transcriptFixture(t, "claude_cache_1h.jsonl"),
		"model=claude-haiku-4-5", "max_iterations=1")
	id := e.start("goal")
	e.wait(id)
	steps := e.steps(id)
	if len(steps) != 1 {
		t.Fatalf("%d steps", len(steps))
	}
	u := steps[0].Usage
	if u.CacheWriteTokens != 25919 || u.CacheReadTokens != 13963 || u.InputTokens != 10 || u.OutputTokens != 150 {
		t.Fatalf("usage %+v", u)
	}
	if !near4(u.CostUSD, 0.0539943) || !near4(reportedCost(u), 0.0539943) {
		t.Errorf("cost $%.7f priced, $%.7f reported; want $0.0539943 for both", u.CostUSD, reportedCost(u))
	}
}

func near4(a, b float64) bool { return a-b < 1e-7 && b-a < 1e-7 }

// max_cost with a model loopd cannot price only counts what the agent
// reports: `start` says so (stderr, RUN_CREATED), and a priced model or an
// alias says nothing.
func TestStartWarnsWhenMaxCostCannotBePriced(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	cases := []struct {
		model string
		warn  bool
	}{
		{"my-local-model", true},
		{"gpt-5.1-codex", false},
		{"sonnet", false},
		{"gemini-2.5-flash", false},
	}
	for _, tc := range cases {
		e.config("agent=command", "agent_command=true", "model="+tc.model, "max_cost=5", "max_iterations=1")
		e.trust()
		r := e.loopctl("start", "goal")
		if r.code != 0 {
			t.Fatalf("%s: start exit %d: %s", tc.model, r.code, r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		warned := strings.Contains(r.stderr, "warning: max_cost is set but the model "+tc.model+" cannot be priced")
		if warned != tc.warn {
			t.Errorf("%s: warned %v, want %v; stderr:\n%s", tc.model, warned, tc.warn, r.stderr)
		}
		var payload struct {
			Warnings []string `json:"warnings"`
		}
		for _, ev := range e.events(id) {
			if ev.Type == "RUN_CREATED" {
				if err := json.Unmarshal(ev.Payload, &payload); err != nil {
					t.Fatal(err)
				}
			}
		}
		// (Other warnings may stand beside it: no verify_command here.)
		if got := slices.ContainsFunc(payload.Warnings, func(w string) bool { return strings.Contains(w, "price."+tc.model+"=") }); got != tc.warn {
			t.Errorf("%s: RUN_CREATED warnings %q, want a warning: %v", tc.model, payload.Warnings, tc.warn)
		}
		e.wait(id)
	}
	// Without max_cost there is nothing to warn about.
	e.config("agent=command", "agent_command=true", "model=my-local-model", "max_iterations=1")
	e.trust()
	if r := e.loopctl("start", "goal"); strings.Contains(r.stderr, "cannot be priced") {
		t.Errorf("warned without max_cost: %s", r.stderr)
	} else {
		e.wait(strings.TrimSpace(r.stdout))
	}
}

// An agent that reports no cost has a reported_cost_usd of null, not 0, in
// step and run JSON, and `status` does not show "$0.00" for it.
func TestUnreportedCostIsNull(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	// Codex prints usage without a cost.
	e.config("agent=command", "agent_command=cat "+transcriptFixture(t, "codex_exec.jsonl"), "model=gpt-5-codex", "max_iterations=1")
	id := e.start("goal")
	e.wait(id)
	for _, out := range []string{e.must("steps", id, "--json"), e.must("status", id, "--json")} {
		if !strings.Contains(out, `"reported_cost_usd": null`) && !strings.Contains(out, `"reported_cost_usd":null`) {
			t.Errorf("reported_cost_usd is not null:\n%s", out)
		}
	}
	st := e.steps(id)[0].Usage
	if st.ReportedCostUSD != nil || st.CostUSD <= 0 {
		t.Errorf("step usage %+v: want a priced cost and no reported one", st)
	}
	text := e.must("status", id)
	if strings.Contains(text, "agent-reported $0.00") || !strings.Contains(text, "no agent-reported cost") {
		t.Errorf("status:\n%s", text)
	}
}

// `daemon stop --kill-steps` signals every step before it waits for any:
// steps that ignore SIGTERM then spend their grace periods side by side,
// not one after another. Each step's TERM handler records that it got TERM
// and waits to see all four steps get it within its grace; stopped one
// after another, only the last would.
func TestDaemonStopKillStepsSignalsAllFirst(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	marks := t.TempDir()
	agent := filepath.Join(e.ws, "agent.sh")
	e.writeFile("agent.sh", `marks=$1
trap 'touch "$marks/term-$$"; i=0
  while [ "$(ls "$marks" | grep -c "^term-")" -lt 4 ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
  [ $i -lt 400 ] && touch "$marks/all-$$"' TERM
touch "$marks/up-$$"
while :; do sleep 0.05; done
`, 0o755)
	for i := range 4 {
		dir := filepath.Join(e.ws, "w"+strconv.Itoa(i))
		if err := os.MkdirAll(filepath.Join(dir, ".loop"), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := "agent=command\nagent_command=sh " + agent + " " + marks + "\nmax_iterations=1\n"
		if err := os.WriteFile(filepath.Join(dir, ".loop", "config"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		e.start("-C", dir, "goal")
	}
	eventually(t, "four steps running", 30*time.Second, func() bool { return len(globIn(marks, "up-*")) == 4 })
	e.must("daemon", "stop", "--kill-steps")
	<-e.exited
	if got := globIn(marks, "term-*"); len(got) != 4 {
		t.Fatalf("%d steps got SIGTERM, want 4", len(got))
	}
	if got := globIn(marks, "all-*"); len(got) != 4 {
		t.Errorf("%d of 4 steps saw every step get SIGTERM within their grace: the steps were stopped one after another", len(got))
	}
}

func globIn(dir, pattern string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	return m
}

// escapingAgent is an agent (run as `sh agent.sh MODE`) that leaves
// processes behind the way real agents do: one in a session of its own
// (Claude's Bash tool, Gemini's shell tool, `setsid cmd &`) and a plain
// background job. It writes their pids and its own to .pids, then:
//   - linger: prints a Claude-shaped result with the completion promise
//     and stays alive on its background job, as `claude -p` does on a
//     run_in_background Bash job;
//   - work: prints a line and works forever (for stop --now and
//     step_timeout), ignoring SIGTERM;
//   - crash: dies by SIGKILL.
const escapingAgent = `mode=$1
setsid sleep 1000 & echo $! >> .pids
sleep 1000 & echo $! >> .pids
echo $$ >> .pids
sid=5f0c6a2e-9d1b-4c8e-a7f3-linger
printf '%s\n' "{\"type\":\"system\",\"subtype\":\"init\",\"cwd\":\"$(pwd)\",\"session_id\":\"$sid\",\"tools\":[\"Bash\"],\"mcp_servers\":[],\"model\":\"claude-sonnet-4-5-20250929\",\"permissionMode\":\"bypassPermissions\",\"claude_code_version\":\"2.1.7\"}"
case $mode in
linger)
  printf '%s\n' "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"duration_ms\":2360,\"duration_api_ms\":2325,\"num_turns\":1,\"result\":\"All work is finished.\\n<promise>COMPLETE</promise>\",\"session_id\":\"$sid\",\"total_cost_usd\":0.01,\"usage\":{\"input_tokens\":1000,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":200,\"service_tier\":\"standard\"}}"
  wait;;
work)
  trap '' TERM
  echo working
  while :; do sleep 0.05; done;;
crash)
  kill -9 $$;;
esac`

// agentPids reads the pids the escaping agent wrote, once it wrote all three.
func (e *env) agentPids() []int {
	e.t.Helper()
	var pids []int
	eventually(e.t, "the agent's pids", 30*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(e.ws, ".pids"))
		pids = pids[:0]
		for f := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return len(pids) == 3
	})
	return pids
}

// nothingSurvives checks, by /proc state (a killed orphan may stay a
// zombie), that none of pids runs any more.
func (e *env) nothingSurvives(pids []int) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i, pid := range pids {
		for pidAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if pidAlive(pid) {
			e.t.Errorf("process %d (%s) outlived its step", pid, []string{"own session", "background job", "agent"}[i])
			_ = syscallKill(pid)
		}
	}
}

func (e *env) useEscapingAgent(mode string, more ...string) {
	e.t.Helper()
	e.writeFile("agent.sh", escapingAgent, 0o755)
	e.config(append([]string{"agent=command", "agent_command=sh " + filepath.Join(e.ws, "agent.sh") + " " + mode}, more...)...)
}

// A turn the agent ended (its result, with the promise) ends the step even
// though the agent lingers on a background job: the step succeeds with the
// promise, the run completes, and the leftovers are stopped — long before
// idle_timeout would have failed the step.
func TestLingeringAgentEndsWithItsTurn(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.useEscapingAgent("linger", "idle_timeout=60s", "max_iterations=1")
	id := e.start("goal")
	pids := e.agentPids()
	if code := e.wait(id); code != 0 {
		r := e.status(id)
		t.Fatalf("wait exit %d, want 0 (COMPLETED); run %s %s: %s", code, r.Status, r.Reason, r.Description)
	}
	steps := e.steps(id)
	if len(steps) != 1 || steps[0].Status != api.StepSucceeded || !steps[0].Promise {
		t.Fatalf("steps %+v: want one SUCCEEDED step with the promise", steps)
	}
	if r := e.status(id); !strings.HasPrefix(r.Reason, "completed:promise") {
		t.Errorf("reason %q", r.Reason)
	}
	if u := steps[0].Usage; u.InputTokens != 1000 || u.OutputTokens != 200 {
		t.Errorf("usage %+v", u)
	}
	e.nothingSurvives(pids)
}

// stop --now, step_timeout and a crashed agent leave nothing of the step
// running, including what moved to its own session.
func TestStoppedStepsLeaveNothingBehind(t *testing.T) {
	t.Run("stop --now", func(t *testing.T) {
		e := newEnv(t)
		e.startDaemon()
		e.useEscapingAgent("work")
		id := e.start("goal")
		pids := e.agentPids()
		e.must("stop", id, "--now")
		if code := e.wait(id); code != 3 {
			t.Fatalf("wait exit %d, want 3", code)
		}
		e.nothingSurvives(pids)
	})
	t.Run("step_timeout", func(t *testing.T) {
		e := newEnv(t)
		e.startDaemon()
		e.useEscapingAgent("work", "step_timeout=1s", "max_iterations=1")
		id := e.start("goal")
		pids := e.agentPids()
		e.wait(id)
		if s := e.steps(id); len(s) == 0 || !strings.Contains(s[0].Error, "step_timeout") {
			t.Errorf("steps %+v: want a step_timeout", s)
		}
		e.nothingSurvives(pids)
	})
	t.Run("agent crash", func(t *testing.T) {
		e := newEnv(t)
		e.startDaemon()
		e.useEscapingAgent("crash", "max_iterations=1")
		id := e.start("goal")
		pids := e.agentPids()
		e.wait(id)
		if s := e.steps(id); len(s) == 0 || s[0].Status != api.StepFailed {
			t.Errorf("steps %+v: want a FAILED step", s)
		}
		e.nothingSurvives(pids)
	})
}

// `loopctl logs` shows an agent's stream-json as a transcript (its tool call
// with the command, the result with its cost and usage), --raw the lines as
// written, and --follow streams the transcript while the step runs.
func TestLogsRenderATranscript(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=1", "FAKE_COST=0.25", "FAKE_WAIT_FILE=go"), "max_iterations=1")
	id := e.start("goal")
	e.runningStep(id, 1)

	// Follow while the step runs, then let it finish.
	follow := exec.Command(filepath.Join(binDir, "loopctl"), "logs", id, "--follow")
	follow.Dir, follow.Env = e.ws, e.environ()
	var followed bytes.Buffer
	follow.Stdout = &followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the followed transcript to show the session", 10*time.Second, func() bool {
		return strings.Contains(e.must("logs", id), "── claude-sonnet-4-5-20250929 · session")
	})
	e.release("go")
	if err := follow.Wait(); err != nil {
		t.Fatalf("logs --follow: %v", err)
	}
	e.wait(id)

	rendered := e.must("logs", id)
	for _, want := range []string{"==> #1 implementation (iteration 1) <==", "── claude-sonnet-4-5-20250929 · session 5f0c6a2e",
		"$ ls", "· usage 1000 in · 200 out", "■ success · 1 turn · $0.2500 · 1000 in · 200 out", "<promise>COMPLETE</promise>"} {
		if !strings.Contains(rendered, want) {
			t.Errorf("logs lacks %q:\n%s", want, rendered)
		}
	}
	if strings.Contains(rendered, `"type":"assistant"`) {
		t.Errorf("logs shows raw stream-json:\n%s", rendered)
	}
	if got := followed.String(); !strings.Contains(got, "$ ls") || !strings.Contains(got, "■ success") {
		t.Errorf("logs --follow:\n%s", got)
	}
	raw := e.must("logs", id, "--raw")
	if !strings.Contains(raw, `"type":"assistant"`) || !strings.Contains(raw, `"type":"result"`) || strings.Contains(raw, "■ success") {
		t.Errorf("logs --raw:\n%s", raw)
	}
}

// The real Claude Code stays alive after its result while a
// run_in_background Bash job runs: the step still ends with the turn,
// SUCCEEDED with the promise and every billed token, the run completes,
// and the job (in a session of its own) is stopped.
func TestRealClaudeLingeringOnABackgroundJob(t *testing.T) {
	e, a, srv := newRealEnv(t, "claude")
	a.preset(e, "idle_timeout=5m", "max_iterations=1")
	srv.Push(fakemodel.Turn{Text: "Starting the job.", Tool: "echo $$ > bg.pid; exec sleep 300", Background: true,
		Usage: fakemodel.Usage{Input: 1200, Output: 70, CacheRead: 500, CacheWrite: 300, CacheWrite1h: 40}},
		fakemodel.Turn{Text: "Started it in the background.\n<promise>COMPLETE</promise>",
			Usage: fakemodel.Usage{Input: 1350, Output: 40, CacheRead: 800}})
	id := e.start("Start a background job.")
	e.waitForFile("bg.pid", 60*time.Second)
	var job int
	eventually(t, "the job's pid", 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(e.ws, "bg.pid"))
		job, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return job > 0
	})
	if code := e.wait(id); code != 0 {
		r := e.status(id)
		t.Fatalf("wait exit %d, want 0; %s %s: %s", code, r.Status, r.Reason, r.Description)
	}
	steps := e.steps(id)
	if len(steps) != 1 || steps[0].Status != api.StepSucceeded || !steps[0].Promise {
		t.Fatalf("steps %+v: want one SUCCEEDED step with the promise", steps)
	}
	if got, want := tokens(steps[0].Usage), billed(srv.Billed(), false); got != want {
		t.Errorf("step usage %+v, the fake billed %+v", got, want)
	}
	e.nothingSurvives([]int{job})
	if !strings.Contains(e.daemonLog(), "the agent ended its turn but did not exit") {
		t.Error("the step ended without the agent lingering: the test proves nothing")
	}
}

// A step adopted by a restarted daemon is stopped whole too: the new
// daemon finds the step's cgroup (or its processes by tag) and `stop --now`
// leaves nothing of it, the processes in their own session included.
func TestAdoptedStepLeavesNothingBehind(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.useEscapingAgent("work")
	id := e.start("goal")
	pids := e.agentPids()
	e.killDaemon()
	for _, pid := range pids {
		if !pidAlive(pid) {
			t.Fatalf("process %d died with the daemon", pid)
		}
	}
	e.startDaemon()
	eventually(t, "STEP_ADOPTED", 10*time.Second, func() bool { return countType(e.events(id), "STEP_ADOPTED") == 1 })
	e.must("stop", id, "--now")
	if code := e.wait(id); code != 3 {
		t.Fatalf("wait exit %d, want 3", code)
	}
	e.nothingSurvives(pids)
}

// The real CLIs run their shell tools outside their own process group
// (Claude Code's Bash tool, Gemini CLI's run_shell_command; Gemini's
// launcher also ignores SIGTERM): `stop --now` still leaves nothing of the
// step running, the tool's background job included. (`tail -f`, not
// `sleep`: Claude Code refuses long sleeps in its Bash tool.)
func TestRealCLIStopNowLeavesNothingBehind(t *testing.T) {
	for _, name := range []string{"claude", "gemini", "codex"} {
		t.Run(name, func(t *testing.T) {
			e, a, srv := newRealEnv(t, name)
			a.preset(e)
			srv.Push(fakemodel.Turn{Text: "Working.", Tool: "tail -f /dev/null & echo $! > bg.pid; touch started; tail -f /dev/null",
				Usage: fakemodel.Usage{Input: 1200, Output: 70}})
			id := e.start("Work.")
			defer func() {
				if t.Failed() {
					t.Logf("step log:\n%s", e.must("logs", id))
				}
			}()
			e.waitForFile("started", 60*time.Second)
			// Every process of the step carries the run's id in its
			// environment, the tool's background job too.
			var procs []int
			eventually(t, "the tool's background job", 10*time.Second, func() bool {
				procs = processesWithEnvTag(id)
				return slices.ContainsFunc(procs, func(pid int) bool {
					b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
					return strings.HasPrefix(string(b), "tail\x00-f")
				})
			})
			e.must("stop", id, "--now")
			if code := e.wait(id); code != 3 {
				t.Fatalf("wait exit %d, want 3", code)
			}
			for _, pid := range procs {
				eventually(t, "process "+strconv.Itoa(pid)+" to end", 15*time.Second, func() bool { return !pidAlive(pid) })
			}
			// Nothing of the run at all (a next step's gated wrapper, started
			// ahead, is abandoned when the run ends).
			var left []int
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if left = processesWithEnvTag(id); len(left) == 0 {
					break
				}
			}
			if len(left) > 0 {
				t.Errorf("still running: %s", describePids(left))
			}
		})
	}
}

// processesWithEnvTag lists the live processes of a run's steps: those
// whose environment names the run (LOOP_RUN_ID).
func processesWithEnvTag(runID string) []int {
	return processesWithEnv("LOOP_RUN_ID=" + runID)
}
