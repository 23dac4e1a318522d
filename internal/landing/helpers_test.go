package landing

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
)

// The tests' git, and the Lander's, read no configuration of the machine
// they run on.
func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// world is a LOOPD_HOME with a real SQLite store, a real git checkout on
// main, and a Lander over them.
type world struct {
	t        *testing.T
	home     string
	checkout string
	store    *storage.Store
	lander   *Lander
	verifier *cmdVerifier
}

func newWorld(t *testing.T) *world {
	t.Helper()
	root := t.TempDir()
	w := &world{t: t, home: filepath.Join(root, "home"), checkout: filepath.Join(root, "repo"), verifier: &cmdVerifier{}}
	if err := os.MkdirAll(filepath.Join(w.home, "runs"), 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open(t.Context(), filepath.Join(w.home, "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w.store = st
	w.lander = New(Options{Store: st, Home: w.home, Verifier: w.verifier, Grace: time.Second})
	w.git(root, "init", "-q", "-b", "main", w.checkout)
	w.write(w.checkout, "a.txt", "one\ntwo\nthree\n")
	w.commitAll(w.checkout, "first")
	return w
}

func (w *world) git(dir string, args ...string) string {
	w.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		w.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (w *world) write(dir, name, content string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) commitAll(dir, msg string) string {
	w.t.Helper()
	w.git(dir, "add", "-A")
	w.git(dir, "commit", "-q", "-m", msg)
	return w.git(dir, "rev-parse", "HEAD")
}

// checkoutState is everything a refused land must leave as it was: the
// checkout's HEAD, every ref, its status.
func (w *world) checkoutState() string {
	w.t.Helper()
	return w.git(w.checkout, "symbolic-ref", "-q", "HEAD") + "\n" +
		w.git(w.checkout, "for-each-ref", "--format=%(refname) %(objectname)") + "\n" +
		w.git(w.checkout, "status", "--porcelain")
}

// stepSpec is one finished step of a run.
type stepSpec struct {
	phase     api.Phase
	iteration int
	status    api.StepStatus
	change    string // the ledger commit of an implementation step
}

// worktreeRun records a worktree run the way the scheduler makes one: a
// branch loop/<id> from main, its worktree under home/worktrees, both
// recorded, and one implementation step per change committed on the
// branch (files maps each change's file to its content), then a
// verification step with status verified. The run has ended (INTERRUPTED)
// unless active.
func (w *world) worktreeRun(id string, verified api.StepStatus, active bool, files ...string) storage.Run {
	w.t.Helper()
	base := w.git(w.checkout, "rev-parse", "HEAD")
	wt := filepath.Join(w.home, "worktrees", id)
	w.git(w.checkout, "worktree", "add", "-q", "-b", "loop/"+id, wt)
	var steps []stepSpec
	for i, f := range files {
		w.write(wt, f, f+" from the run\n")
		steps = append(steps, stepSpec{api.PhaseImplementation, i + 1, api.StepSucceeded, w.commitAll(wt, "change "+f)})
	}
	if verified != "" {
		steps = append(steps, stepSpec{api.PhaseVerification, len(files), verified, ""})
	}
	run := storage.Run{ID: id, Workspace: w.checkout, Goal: "make the change\nin detail", Config: "{}", Conditions: "{}",
		Status: api.RunPending, Isolation: "worktree", Worktree: wt, Branch: "loop/" + id, BaseBranch: "main",
		BaseCommit: base, WorktreeState: "present"}
	w.insertRun(run, active, steps)
	repo := filepath.Join(w.checkout, ".git")
	err := w.store.Write(w.t.Context(), func(tx *storage.Tx) error {
		if err := tx.RecordGitObject(storage.GitObject{RunID: id, Kind: storage.GitWorktree, Repo: repo, Name: wt}); err != nil {
			return err
		}
		return tx.RecordGitObject(storage.GitObject{RunID: id, Kind: storage.GitBranch, Repo: repo, Name: "loop/" + id})
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return w.run(id)
}

// insertRun inserts run with its steps, ended unless active, and makes
// its directory, as the scheduler does when it creates a run.
func (w *world) insertRun(run storage.Run, active bool, steps []stepSpec) {
	w.t.Helper()
	if err := os.MkdirAll(filepath.Join(w.home, "runs", run.ID), 0o700); err != nil {
		w.t.Fatal(err)
	}
	err := w.store.Write(w.t.Context(), func(tx *storage.Tx) error {
		if err := tx.InsertRun(run, nil); err != nil {
			return err
		}
		for i, sp := range steps {
			st := &storage.Step{RunID: run.ID, Seq: i + 1, Phase: sp.phase, Iteration: sp.iteration,
				LogPath: filepath.Join(w.home, "runs", run.ID, fmt.Sprintf("%04d.log", i+1))}
			if err := tx.InsertStep(st, nil); err != nil {
				return err
			}
			st.Status, st.ChangeCommit = sp.status, sp.change
			if err := tx.FinishStep(st, events.StepFinished, nil); err != nil {
				return err
			}
		}
		if active {
			return nil
		}
		return tx.TransitionRun(storage.Transition{RunID: run.ID, From: []api.RunStatus{api.RunPending}, To: api.RunInterrupted,
			Reason: "user_stop", Event: events.RunInterrupted})
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) run(id string) storage.Run {
	w.t.Helper()
	run, err := w.store.Run(w.t.Context(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return run
}

// landedEvents are the run's RUN_LANDED payloads.
func (w *world) landedEvents(id string) []string {
	w.t.Helper()
	evs, err := w.store.Events(w.t.Context(), id, 0, 1000)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Type == events.RunLanded {
			out = append(out, e.Payload)
		}
	}
	return out
}

// cmdVerifier builds a Verification that runs commands (none: the run
// has no verify_command) and judges them by their exit code alone; the
// scheduler's own builder is tested in internal/scheduler.
type cmdVerifier struct {
	commands []string
	err      error
	calls    int
}

func (v *cmdVerifier) LandVerification(_ context.Context, run storage.Run, dir string, iteration int) (Verification, error) {
	v.calls++
	if v.err != nil {
		return Verification{}, v.err
	}
	return Verification{Commands: v.commands, Dir: dir, Env: append(os.Environ(), "LOOP_RUN_ID="+run.ID),
		Judge: func(code int, _ string, _ time.Time) (bool, string) {
			if code == 0 {
				return true, ""
			}
			return false, fmt.Sprintf("exit code %d", code)
		}}, nil
}

// progressLog collects a land's progress lines.
type progressLog struct{ bytes.Buffer }

func (p *progressLog) add(s string) { p.WriteString(s + "\n") }
