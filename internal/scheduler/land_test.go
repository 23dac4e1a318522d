package scheduler

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/storage"
)

func TestLandVerificationUsesTheRunsEnvironment(t *testing.T) {
	dir := t.TempDir()
	envFile := dir + "/.env"
	if err := writeFile(envFile, "MARK=from-env-file\n"); err != nil {
		t.Fatal(err)
	}
	run := storage.Run{ID: "abc123", Workspace: "/checkout", Config: `{"verify_command":["sh check.sh","true"],"env_file":"` + envFile + `"}`, Conditions: "{}"}
	st, err := storage.Open(t.Context(), filepath.Join(dir, "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(Options{Store: st, Home: dir})
	lv, err := s.LandVerification(t.Context(), run, "/worktree", 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lv.Commands, []string{"sh check.sh", "true"}) {
		t.Errorf("commands = %q", lv.Commands)
	}
	for _, want := range []string{"MARK=from-env-file", "LOOP_RUN_ID=abc123", "LOOP_PHASE=verification", "LOOP_ITERATION=3", "LOOP_WORKSPACE=/worktree"} {
		if !slices.Contains(lv.Env, want) {
			t.Errorf("env lacks %s: %s", want, strings.Join(lv.Env, " "))
		}
	}
	run.Config = `{"env_file":"` + dir + `/missing"}`
	if _, err := s.LandVerification(t.Context(), run, "/worktree", 1); err == nil || !strings.Contains(err.Error(), "env_file") {
		t.Errorf("a missing env_file: %v", err)
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// The land's verification is judged as a verification step is: test
// failures in its output fail it even when the commands exited 0.
func TestLandVerificationJudge(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.Open(t.Context(), filepath.Join(dir, "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(Options{Store: st, Home: dir})
	run := storage.Run{ID: "abc123", Workspace: dir, Config: `{"verify_command":["go test ./..."]}`, Conditions: "{}"}
	lv, err := s.LandVerification(t.Context(), run, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "land.log")
	gotest := "=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n--- FAIL: TestB (0.00s)\nFAIL\nFAIL\texample.com/x\t0.002s\n"
	if err := writeFile(log, gotest); err != nil {
		t.Fatal(err)
	}
	if ok, why := lv.Judge(0, log, time.Now()); ok || !strings.Contains(why, "tests failed") {
		t.Errorf("Judge of failing tests that exited 0 = %v, %q", ok, why)
	}
	if err := writeFile(log, "all good\n"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := lv.Judge(0, log, time.Now()); !ok {
		t.Error("Judge of a clean exit 0 failed")
	}
	if ok, why := lv.Judge(2, log, time.Now()); ok || why != "exit code 2" {
		t.Errorf("Judge of exit 2 = %v, %q", ok, why)
	}
}

// An env_file that sets variables the user has not trusted is a
// *landing.UntrustedEnvError, which land turns into its untrusted_env
// refusal; the message is the step's own.
func TestLandVerificationRefusesAnUntrustedEnvFile(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, ".env")
	if err := writeFile(envFile, "SECRET=1\n"); err != nil {
		t.Fatal(err)
	}
	st, err := storage.Open(t.Context(), filepath.Join(dir, "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run := storage.Run{ID: "abc123", Workspace: dir, Goal: "g", Config: `{"verify_command":["true"],"env_file":"` + envFile + `"}`,
		Conditions: "{}", Status: api.RunPending}
	err = st.Write(t.Context(), func(tx *storage.Tx) error {
		if err := tx.InsertRun(run, nil); err != nil {
			return err
		}
		return tx.RequireEnvTrust(run.ID, envFile)
	})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Store: st, Home: dir})
	_, err = s.LandVerification(t.Context(), run, dir, 1)
	ue, ok := errors.AsType[*landing.UntrustedEnvError](err)
	if !ok || !strings.Contains(ue.Error(), "run abc123: env_file: env file "+envFile+" sets variables but is not trusted") {
		t.Fatalf("LandVerification with an untrusted env_file = %v", err)
	}
}

// With verify_baseline a land's verification of the combination ignores
// the tests the run's baseline found failing, as the run's verifications
// did; a failure not in the baseline still refuses the land.
func TestLandVerificationIgnoresTheBaselinesFailures(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.Open(t.Context(), filepath.Join(dir, "loopd.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(Options{Store: st, Home: dir})
	run := storage.Run{ID: "abc123", Workspace: dir, Status: api.RunCompleted, Config: `{"verify_command":["go test ./..."],"verify_baseline":true}`,
		Conditions: "{}", CreatedAt: 1, UpdatedAt: 1}
	one := 1
	base := &storage.Step{RunID: run.ID, Seq: 1, Phase: api.PhaseBaseline, LogPath: "/l"}
	err = st.Write(t.Context(), func(tx *storage.Tx) error {
		if err := tx.InsertRun(run, nil); err != nil {
			return err
		}
		if err := tx.InsertStep(base, nil); err != nil {
			return err
		}
		base.Status, base.TestsFailed, base.TestsFailedNames = api.StepFailed, &one, storage.Strings{"TestOld"}
		return tx.FinishStep(base, "STEP_FINISHED", nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	lv, err := s.LandVerification(t.Context(), run, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "land.log")
	gotest := func(failing ...string) string {
		out := "=== RUN   TestA\n--- PASS: TestA (0.00s)\n"
		for _, f := range failing {
			out += "=== RUN   " + f + "\n--- FAIL: " + f + " (0.00s)\n"
		}
		return out + "FAIL\nFAIL\texample.com/x\t0.002s\n"
	}
	if err := writeFile(log, gotest("TestOld")); err != nil {
		t.Fatal(err)
	}
	if ok, why := lv.Judge(1, log, time.Now()); !ok {
		t.Errorf("Judge of only the baseline's failure = false, %q; want passed", why)
	}
	if err := writeFile(log, gotest("TestOld", "TestNew")); err != nil {
		t.Fatal(err)
	}
	if ok, _ := lv.Judge(1, log, time.Now()); ok {
		t.Error("Judge of a failure not in the baseline passed")
	}
	// Killed (no exit code of its own): never passed for old failures.
	if err := writeFile(log, gotest("TestOld")); err != nil {
		t.Fatal(err)
	}
	if ok, _ := lv.Judge(-1, log, time.Now()); ok {
		t.Error("Judge of a killed verification passed")
	}
}
