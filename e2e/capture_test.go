package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/fakemodel"
)

// cliVersions are the pinned versions scripts/install-agents installs; the
// captured fixtures are named after them.
var cliVersions = map[string]string{"claude": "2.1.328", "codex": "0.169.0", "gemini": "0.61.0"}

// presetArgs are the arguments of loopd's preset for name (see
// config.Config.AgentCommandLine), for running the CLI directly.
func presetArgs(name, model string) []string {
	switch name {
	case "claude":
		return []string{"-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
			"--model", model, "--dangerously-skip-permissions"}
	case "codex":
		return []string{"exec", "--json", "--model", model, "--sandbox", "workspace-write", "-"}
	case "gemini":
		return []string{"-p", "", "--skip-trust", "--yolo", "--output-format", "stream-json", "-m", model}
	}
	return nil
}

// captureScenario is one scripted conversation a real CLI goes through.
type captureScenario struct {
	name  string
	turns []fakemodel.Turn
	// wantExit is the CLI's exit status; -1 for "not zero".
	wantExit int
	// subscription logs Claude Code in with a subscription token.
	subscription bool
	// killed: the CLI's process group is killed once its tool call created
	// the file "started" in the workspace, as `loopctl stop --now` would.
	killed bool
}

var happyTurns = []fakemodel.Turn{
	{Text: "Let me create the file.", Tool: "echo hello > out.txt && cat out.txt",
		Usage: fakemodel.Usage{Input: 1200, Output: 70, CacheRead: 500, CacheWrite: 300, Reasoning: 12}},
	{Text: "The file is written.\n<promise>COMPLETE</promise>",
		Usage: fakemodel.Usage{Input: 1350, Output: 40, CacheRead: 800}},
}

var (
	cutEnd = fakemodel.Turn{Text: "I will now look at the file.", Cut: true, CutHow: fakemodel.CutEnd}
	cutMid = fakemodel.Turn{Text: "I will now look at the file.", Cut: true, CutHow: fakemodel.CutMidEvent}
)

func captureScenarios(cli string) []captureScenario {
	limit := fakemodel.Turn{Status: 429, ResetsAt: time.Date(2031, 3, 4, 5, 6, 0, 0, time.UTC)}
	if cli == "gemini" {
		// Gemini sleeps through a retry delay of up to 300 s, then says so.
		limit.ResetsAt = time.Now().Add(2 * time.Hour)
	}
	sc := []captureScenario{
		{name: "tool-promise", turns: happyTurns},
		// A billed response, then the API fails: what did the CLI report?
		{name: "overloaded-after-tool", turns: []fakemodel.Turn{happyTurns[0], {Status: 529}, {Status: 529}}, wantExit: -1},
		{name: "server-error", turns: []fakemodel.Turn{{Status: 500}, {Status: 500}}, wantExit: -1},
		{name: "rate-limit-429", turns: []fakemodel.Turn{{Status: 429}, {Status: 429}}, wantExit: -1},
		{name: "usage-limit", turns: []fakemodel.Turn{limit, limit}, wantExit: -1, subscription: cli == "claude"},
		{name: "killed-in-tool", turns: []fakemodel.Turn{{Text: "Running the slow step.", Tool: "touch started && sleep 60",
			Usage: fakemodel.Usage{Input: 1200, Output: 70, CacheRead: 500, CacheWrite: 300, Reasoning: 12}}}, wantExit: -1, killed: true},
		{name: "cut-stream", turns: []fakemodel.Turn{happyTurns[0], {Text: "I will now", Cut: true}, {Text: "I will now", Cut: true}}, wantExit: -1},
		// A proxy between the CLI and the API ends the response properly
		// but early: after some events, or in the middle of one.
		{name: "cut-end", turns: []fakemodel.Turn{cutEnd, cutEnd}, wantExit: -2},
		{name: "cut-mid-event", turns: []fakemodel.Turn{cutMid, cutMid}, wantExit: -2},
	}
	if cli == "gemini" {
		// Gemini exits 0 with result.status "error" on a cut stream.
		sc[len(sc)-1].wantExit = -2
	}
	return sc
}

// TestRealCLIScenarios runs each real CLI through the scripted scenarios and
// checks that it behaved as scripted: it used the scripted turns and exited
// as expected. With LOOPD_CAPTURE=1 it writes each transcript into
// internal/transcript/testdata as <cli>-<version>-<scenario>.jsonl, and the
// CLI's session files into internal/agent/testdata/sessions: that is how
// the parser and session fixtures were captured.
func TestRealCLIScenarios(t *testing.T) {
	for _, cli := range []string{"claude", "codex", "gemini"} {
		t.Run(cli, func(t *testing.T) {
			for _, sc := range captureScenarios(cli) {
				t.Run(sc.name, func(t *testing.T) {
					srv := fakemodel.New(t)
					a := newRealAgent(t, cli, srv)
					if sc.subscription {
						a.subscription()
					}
					srv.Push(sc.turns...)
					// Anything unscripted fails loudly instead of looping.
					srv.SetDefault(fakemodel.Turn{Status: 400, Message: "unscripted request"})
					ws := t.TempDir()
					if err := exec.Command("git", "-C", ws, "init", "-q").Run(); err != nil {
						t.Fatal(err)
					}
					var out, errs string
					var code int
					if sc.killed {
						out, errs, code = a.runKilled(t, ws, "Write hello into out.txt.", filepath.Join(ws, "started"), presetArgs(cli, a.model)...)
					} else {
						out, errs, code = a.run(t, ws, "Write hello into out.txt.", presetArgs(cli, a.model)...)
					}
					defer func() {
						if t.Failed() {
							t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s\nrequests:\n%s", code, out, errs, srv.Summary())
						}
					}()
					switch {
					case sc.wantExit == -1 && code == 0:
						t.Errorf("exit 0, want a failure")
					case sc.wantExit >= 0 && code != sc.wantExit:
						t.Errorf("exit %d, want %d", code, sc.wantExit)
					}
					if n := srv.Pending(); n != 0 && sc.wantExit == 0 {
						t.Errorf("%d scripted turns were not used", n)
					}
					if capture := os.Getenv("LOOPD_CAPTURE"); capture != "" && (capture == "1" || strings.Contains(t.Name(), capture)) {
						dst := filepath.Join(repoRoot(), "internal", "transcript", "testdata",
							cli+"-"+cliVersions[cli]+"-"+sc.name+".jsonl")
						if err := os.WriteFile(dst, []byte(scrub(out, ws, a.home)), 0o644); err != nil {
							t.Fatal(err)
						}
						t.Logf("captured %s; billed %+v", dst, srv.Billed())
						// The CLIs' own session files hold per-request usage.
						pattern := map[string]string{
							"codex":  filepath.Join(a.home, ".codex", "sessions", "*", "*", "*", "rollout-*.jsonl"),
							"gemini": filepath.Join(a.home, ".gemini", "tmp", "*", "chats", "session-*.json*"),
						}[cli]
						if pattern != "" {
							files, _ := filepath.Glob(pattern)
							for _, f := range files {
								b, err := os.ReadFile(f)
								if err != nil {
									t.Fatal(err)
								}
								dst := filepath.Join(repoRoot(), "internal", "agent", "testdata", "sessions", strings.TrimSuffix(filepath.Base(dst), ".jsonl")+".session"+filepath.Ext(f))
								if err := os.WriteFile(dst, []byte(scrub(string(b), ws, a.home)), 0o644); err != nil {
									t.Fatal(err)
								}
								t.Logf("captured %s from %s", dst, f)
							}
						}
					}
				})
			}
		})
	}
}

// scrub replaces the test's temporary paths so fixtures do not change with
// every capture.
func scrub(s, ws, home string) string {
	return strings.NewReplacer(ws, "/work/project", home, "/home/user").Replace(s)
}
