package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// resolveAgent is landAgent that first resolves the conflicts its prompt
// lists (the lines "- FILE" after "It left conflicts in"): it keeps both
// sides and drops the markers, and logs each file it resolved to
// $RESOLVED_LOG.
const resolveAgent = `#!/bin/sh
n=${LOOP_ITERATION:-1}
prompt=$(cat "$LOOP_PROMPT_FILE")
if printf '%s\n' "$prompt" | grep -q '^It left conflicts in'; then
  printf '%s\n' "$prompt" | sed -n '/^It left conflicts in/,/^Resolve/p' | sed -n 's/^- //p' | while read -r f; do
    grep -v -e '^<<<<<<<' -e '^=======' -e '^>>>>>>>' "$f" > "$f.resolved" && mv "$f.resolved" "$f"
    echo "$f" >> "$RESOLVED_LOG"
  done
fi
echo "$n" >> work.txt
echo "iteration $n" > "iter-$n.txt"
printf 'done\n<promise>COMPLETE</promise>\n'
`

// markerCheck fails the project's test while a conflict marker is left.
const markerCheck = `#!/bin/sh
if grep -rl --exclude-dir=.git -e '^<<<<<<<' -e '^>>>>>>>' . ; then echo "check failed: conflict markers left"; exit 1; fi
`

// ontoRepo is landRepo with the resolving agent and a check that fails on
// conflict markers, committed; it returns the resolved-files log.
func (e *env) ontoRepo() string {
	e.t.Helper()
	e.landRepo()
	if err := os.WriteFile(filepath.Join(e.home, "agent.sh"), []byte(resolveAgent), 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.writeFile("check.sh", markerCheck+strings.TrimPrefix(landCheck, "#!/bin/sh\n"), 0o755)
	e.git("add", "-A")
	e.git("commit", "-q", "--amend", "-m", "project")
	log := filepath.Join(e.home, "resolved.log")
	env, err := os.ReadFile(filepath.Join(e.ws, ".env"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.writeFile(".env", string(env)+"RESOLVED_LOG="+log+"\n", 0o600)
	return log
}

// conflictedLand makes the base move with a change that conflicts with the
// finished run's, and checks that land refuses it naming --onto-base.
func (e *env) conflictedLand(id string) string {
	e.t.Helper()
	userTip := e.commitOnMain(map[string]string{"work.txt": "the user's line\n", "user.txt": "user\n"})
	before := e.checkoutState()
	_, ref, code := e.landJSON(id)
	if code != 64 || ref.Kind != "conflict" {
		e.t.Fatalf("land: exit %d, refusal %+v; want a conflict", code, ref)
	}
	want := "loopctl resume " + id[:8] + " --onto-base"
	if !strings.Contains(ref.Message, want) || len(ref.Hand) == 0 || !strings.HasPrefix(ref.Hand[0], want) {
		e.t.Errorf("the conflict refusal does not name %q: %+v", want, ref)
	}
	if r := e.loopctl("land", id); !strings.Contains(r.stderr, want) {
		e.t.Errorf("land's human output does not name %q:\n%s", want, r.stderr)
	}
	if e.checkoutState() != before {
		e.t.Fatal("the refused land changed the checkout")
	}
	return userTip
}

// ontoBaseResumes counts the RUN_RESUMED events that merged the base.
func (e *env) ontoBaseResumes(id string) (n int, last map[string]any) {
	e.t.Helper()
	for _, ev := range e.events(id) {
		if ev.Type != "RUN_RESUMED" {
			continue
		}
		var p map[string]any
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			e.t.Fatal(err)
		}
		if o, ok := p["onto_base"].(map[string]any); ok {
			n, last = n+1, o
		}
	}
	return n, last
}

// checkMergedAndLanded checks the run after its resume --onto-base ended:
// one merge of the base on its branch, completed by the agent's iteration
// (whose change is its own, not the base's); land fast-forwards; the
// checkout has both sides' work.
func (e *env) checkMergedAndLanded(id, userTip, resolvedLog string) {
	e.t.Helper()
	run := e.status(id)
	if run.Status != "COMPLETED" {
		e.t.Fatalf("run is %s (%s), want COMPLETED", run.Status, run.Description)
	}
	if got, _ := os.ReadFile(resolvedLog); strings.TrimSpace(string(got)) != "work.txt" {
		e.t.Errorf("the agent resolved %q, want work.txt (read from its prompt)", got)
	}
	merges := strings.Fields(e.gitIn(run.Worktree, "rev-list", "--merges", run.BaseCommit+"..HEAD"))
	if len(merges) != 1 {
		e.t.Fatalf("%d merge commits on %s, want exactly 1: %v", len(merges), run.Branch, merges)
	}
	parents := strings.Fields(e.gitIn(run.Worktree, "rev-list", "--parents", "-n", "1", merges[0]))
	if len(parents) != 3 || parents[2] != userTip {
		e.t.Errorf("the merge %v does not have the base's tip %s as its second parent", parents, userTip)
	}
	if e.gitIn(run.Worktree, "status", "--porcelain") != "" {
		e.t.Errorf("the worktree is not clean:\n%s", e.gitIn(run.Worktree, "status"))
	}
	steps := e.steps(id)
	var impl2 bool
	for _, st := range steps {
		if st.Phase != "implementation" || st.Iteration != 2 {
			continue
		}
		impl2 = true
		if st.Changes == nil || st.Changes.Commit != merges[0] {
			e.t.Errorf("iteration 2's change is %+v, want the merge commit %s that completes the merge", st.Changes, merges[0])
			continue
		}
		got := strings.Join(st.Changes.Files, ",")
		if got != "iter-2.txt,work.txt" {
			e.t.Errorf("iteration 2's change lists %s: want the agent's own files (iter-2.txt, work.txt), not the base's user.txt", got)
		}
	}
	if !impl2 {
		e.t.Fatalf("no implementation step in iteration 2: %+v", steps)
	}
	res, ref, code := e.landJSON(id)
	if code != 0 || res.Mode != "fast-forward" {
		e.t.Fatalf("land after the merge: exit %d, %+v %+v; want a fast-forward", code, res, ref)
	}
	work, _ := os.ReadFile(filepath.Join(e.ws, "work.txt"))
	if w := string(work); !strings.Contains(w, "the user's line") || !strings.Contains(w, "1\n") || strings.Contains(w, "<<<<<<<") {
		e.t.Errorf("work.txt in the checkout = %q: want both sides, no markers", w)
	}
	for _, f := range []string{"user.txt", "iter-1.txt", "iter-2.txt"} {
		if _, err := os.Stat(filepath.Join(e.ws, f)); err != nil {
			e.t.Errorf("the checkout lacks %s after the land", f)
		}
	}
}

func TestResumeOntoBaseLetsTheLoopFixItsMerge(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	resolved := e.ontoRepo()
	run := e.finishedRun()
	userTip := e.conflictedLand(run.ID)

	e.must("resume", run.ID, "--onto-base")
	n, onto := e.ontoBaseResumes(run.ID)
	if n != 1 || onto["clean"] != false || onto["base_commit"] != userTip {
		t.Fatalf("RUN_RESUMED onto_base = %v (%d events)", onto, n)
	}
	if c, _ := onto["conflicts"].([]any); len(c) != 1 || c[0] != "work.txt" {
		t.Errorf("onto_base conflicts = %v, want [work.txt]", onto["conflicts"])
	}
	if code := e.wait(run.ID); code != 0 {
		t.Fatalf("the resumed run ended with exit %d: %+v", code, e.status(run.ID))
	}
	// The prompt said what was merged and which files conflict.
	var prompt []byte
	_ = filepath.WalkDir(filepath.Join(e.home, "runs", run.ID), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "prompt") {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("merged into this branch")) {
				prompt = b
			}
		}
		return nil
	})
	for _, want := range []string{"main (at " + userTip[:12] + ")", "- work.txt", "refused (conflict)"} {
		if !bytes.Contains(prompt, []byte(want)) {
			t.Errorf("the prompt after the merge lacks %q:\n%s", want, prompt)
		}
	}
	e.checkMergedAndLanded(run.ID, userTip, resolved)
}

func TestResumeOntoBaseRefusals(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.ontoRepo()
	run := e.finishedRun()
	refused := func(what, want string, args ...string) {
		t.Helper()
		r := e.loopctl(append([]string{"resume"}, args...)...)
		if r.code != 64 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: exit %d, stderr %q; want 64 naming %q", what, r.code, r.stderr, want)
		}
	}
	// The base has not moved: nothing to merge.
	refused("nothing to merge", "nothing to merge", run.ID, "--onto-base")
	// In place.
	e.writeFile(".loop/config", "agent=command\nagent_command="+filepath.Join(e.home, "agent.sh")+"\nverify_command=sh check.sh\nisolation=in_place\n", 0o644)
	inPlace := e.start("goal")
	e.wait(inPlace)
	refused("in place", "ran in place", inPlace, "--onto-base")
	// Its worktree is gone.
	e.commitOnMain(map[string]string{"other.txt": "x\n"})
	e.must("clean", run.ID)
	refused("worktree gone", "no worktree", run.ID, "--onto-base")
}

// A daemon killed right after git merged the base into the worktree, before
// loopd recorded anything: the resume is run again, finds the merge, and
// nothing is lost or made twice.
func TestDaemonKilledRightAfterTheOntoBaseMerge(t *testing.T) {
	// Run again as exit 69 says, or resumed plainly: MERGE_HEAD is left in
	// the worktree either way, and a plain resume must finish recording
	// the merge as well (before, it refused a COMPLETED run and left the
	// merge in progress, or went on without telling the agent).
	for _, again := range [][]string{{"--onto-base"}, nil} {
		name := "resume --onto-base again"
		if again == nil {
			name = "plain resume"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			hook := filepath.Join(e.home, "onto-merged")
			e.daemonEnv = []string{"LOOPD_TEST_HOLD_AFTER_ONTO_BASE=" + hook}
			e.startDaemon()
			resolved := e.ontoRepo()
			run := e.finishedRun()
			userTip := e.conflictedLand(run.ID)

			cmd := exec.Command(filepath.Join(binDir, "loopctl"), "resume", run.ID, "--onto-base")
			cmd.Dir, cmd.Env = e.ws, e.environ()
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			eventually(t, "git to merge the base into the worktree", 30*time.Second, func() bool {
				b, err := os.ReadFile(hook)
				return err == nil && strings.TrimSpace(string(b)) == userTip
			})
			e.killDaemon()
			_ = cmd.Wait()
			if cmd.ProcessState.ExitCode() == 0 {
				t.Fatalf("the cut resume exited 0:\n%s", out.String())
			}
			if mh := e.gitIn(run.Worktree, "rev-parse", "MERGE_HEAD"); mh != userTip {
				t.Fatalf("MERGE_HEAD = %s, want %s: the hook did not hold after the merge", mh, userTip)
			}
			e.daemonEnv = nil
			e.startDaemon()
			if st := e.status(run.ID); st.Status != "COMPLETED" {
				t.Fatalf("after the restart the run is %s, want still COMPLETED (the resume was cut)", st.Status)
			}
			e.must(append([]string{"resume", run.ID}, again...)...)
			n, onto := e.ontoBaseResumes(run.ID)
			if n != 1 {
				t.Fatalf("%d RUN_RESUMED with onto_base, want 1", n)
			}
			if onto["base_commit"] != userTip || onto["clean"] != false {
				t.Errorf("the recorded merge is %v, want the cut one of %s, with conflicts", onto, userTip)
			}
			if code := e.wait(run.ID); code != 0 {
				t.Fatalf("the resumed run ended with exit %d: %+v", code, e.status(run.ID))
			}
			if !strings.Contains(e.daemonLog(), `"reused": true`) && !strings.Contains(e.daemonLog(), `"reused":true`) {
				t.Error("the daemon did not say it found the merge the cut request made")
			}
			if _, err := os.Stat(filepath.Join(e.gitIn(run.Worktree, "rev-parse", "--absolute-git-dir"), "MERGE_HEAD")); err == nil {
				t.Error("MERGE_HEAD is still in the worktree after the run completed")
			}
			e.checkMergedAndLanded(run.ID, userTip, resolved)
		})
	}
}

// clean --ended --branches removes the loop/* branch of a landed run and the
// snapshot refs of an ended in-place run; an unlanded run's branch and a
// loop/* branch loopd did not make stay.
func TestCleanEndedBranches(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	e.landRepo()
	landed := e.finishedRun()
	if _, ref, code := e.landJSON(landed.ID); code != 0 {
		t.Fatalf("land: exit %d %+v", code, ref)
	}
	unlanded := e.finishedRun()
	e.git("branch", "loop/mine") // the user's own, with no record
	inPlace := e.start("goal", "--set", "isolation=in_place")
	if code := e.wait(inPlace); code != 0 {
		t.Fatalf("in-place run: exit %d", code)
	}
	if refs := e.git("for-each-ref", "--format=%(refname)", "refs/loop/"+inPlace+"/"); refs == "" {
		t.Fatal("the in-place run made no snapshot refs to clean")
	}

	out := e.must("clean", "--ended", "--branches")
	for _, want := range []string{"branch " + landed.Branch + " removed", "branch " + unlanded.Branch + " stays: ",
		"has not landed", "snapshot refs refs/loop/" + inPlace + "/*"} {
		if !strings.Contains(out, want) {
			t.Errorf("clean --branches output lacks %q:\n%s", want, out)
		}
	}
	branches := e.git("branch", "--list", "loop/*", "--format=%(refname:short)")
	if strings.Contains(branches, landed.Branch) {
		t.Errorf("the landed run's branch %s is still there", landed.Branch)
	}
	for _, b := range []string{unlanded.Branch, "loop/mine"} {
		if !strings.Contains(branches, b) {
			t.Errorf("branch %s was removed; it must stay (branches: %s)", b, branches)
		}
	}
	if refs := e.git("for-each-ref", "--format=%(refname)", "refs/loop/"); refs != "" {
		t.Errorf("snapshot refs left: %s", refs)
	}
	// Recorded: a second clean has nothing more of the landed run's.
	if out := e.must("clean", "--ended", "--branches"); strings.Contains(out, landed.Branch) {
		t.Errorf("the second clean visits the removed branch again:\n%s", out)
	}
	if r := e.loopctl("clean", "--help"); !strings.Contains(r.stdout, "only once the run has landed") {
		t.Errorf("clean --help does not say only landed branches go:\n%s", r.stdout)
	}
}
