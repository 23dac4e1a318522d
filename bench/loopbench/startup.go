package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
)

// startup: a daemon starting on a home with runs×steps persisted steps
// (running of them left RUNNING, their last step RUNNING and its process
// gone, as after a reboot), timed from exec until every RUNNING run has
// resumed: recovered, its lost step marked INTERRUPTED, and its next step
// started.
func (b *bench) startup(runs, steps, running int) error {
	t0 := time.Now()
	home, ids, remove, err := generatedHome(runs, steps, running)
	if err != nil {
		return err
	}
	defer remove()
	fi, _ := os.Stat(filepath.Join(home, "loopd.db"))
	fmt.Printf("generated %d runs, %d steps, %d events in %s (%d MB)\n", runs, runs*steps, 2*runs*steps,
		time.Since(t0).Round(time.Second), fi.Size()>>20)

	start := time.Now()
	d, err := b.startDaemon(home)
	if err != nil {
		return err
	}
	answered := time.Since(start)
	defer func() {
		// Stop the re-run steps with the daemon.
		_ = d.client.StopDaemon(context.Background(), api.DaemonStopRequest{KillSteps: true})
		_ = d.cmd.Wait()
	}()
	ctx := context.Background()
	pending := map[string]bool{}
	for _, id := range ids {
		pending[id] = true
	}
	for len(pending) > 0 {
		for id := range pending {
			r, err := d.client.GetRun(ctx, api.RunRef{Ref: id}, false)
			if err != nil {
				return err
			}
			if r.CurrentStep != nil && r.CurrentStep.Seq == steps+1 {
				delete(pending, id)
			}
		}
		if time.Since(start) > time.Minute {
			return fmt.Errorf("%d runs did not resume within a minute", len(pending))
		}
		time.Sleep(2 * time.Millisecond)
	}
	took := time.Since(start)
	fmt.Printf("daemon answered after %s\n", answered.Round(time.Millisecond))
	fmt.Printf("RESULT start with %d steps over %d runs until all %d RUNNING runs resumed: %s (target <= 1s)\n",
		runs*steps, runs, running, took.Round(time.Millisecond))
	return nil
}

// generatedHome is a daemon home in a temporary folder whose database
// generate fills with runs×steps steps of runs on a temporary workspace
// (running of them left RUNNING); remove deletes both folders.
func generatedHome(runs, steps, running int) (home string, ids []string, remove func(), err error) {
	home, err = os.MkdirTemp("", "lb")
	if err != nil {
		return "", nil, nil, err
	}
	ws, err := os.MkdirTemp("", "lbws")
	if err != nil {
		os.RemoveAll(home)
		return "", nil, nil, err
	}
	remove = func() {
		os.RemoveAll(ws)
		os.RemoveAll(home)
	}
	if ids, err = generate(filepath.Join(home, "loopd.db"), ws, runs, steps, running); err != nil {
		remove()
		return "", nil, nil, err
	}
	return home, ids, remove, nil
}

// generate writes the database through loopd's own schema (storage.Open
// migrates it) and then bulk-inserts history directly: a benchmark
// fixture, not product code, so it takes the shortest path.
func generate(path, ws string, runs, steps, running int) ([]string, error) {
	st, err := storage.Open(context.Background(), path, storage.Options{})
	if err != nil {
		return nil, err
	}
	st.Close()
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	cfg := config.Default()
	cfg.Agent, cfg.AgentCommand, cfg.Prompt = config.AgentCommand, "sleep 600", "bench"
	cfg.MaxIterations, cfg.MaxConsecutiveImplementationFailures, cfg.MaxConsecutiveVerificationFailures = 0, 0, 0
	cfg.VerifyCommands = []string{"true"}
	cfgJSON, _ := json.Marshal(cfg)
	condJSON, _ := json.Marshal(stop.Set{})
	tx, err := db.Begin()
	if err != nil {
		return nil, err
	}
	runStmt, err := tx.Prepare(`INSERT INTO runs (id, workspace, goal, config, conditions, status, reason, exit_code,
		created_at, started_at, ended_at, updated_at, postmortem_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return nil, err
	}
	stepStmt, err := tx.Prepare(`INSERT INTO steps (run_id, seq, phase, iteration, status, exit_code, started_at, ended_at,
		log_path, input_tokens, output_tokens) VALUES (?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return nil, err
	}
	evStmt, err := tx.Prepare(`INSERT INTO events (run_id, step_id, type, ts, payload) VALUES (?,?,?,?,?)`)
	if err != nil {
		return nil, err
	}
	base := time.Now().Add(-24 * time.Hour).UnixMilli()
	var stepID int64
	var live []string
	for r := range runs {
		id := fmt.Sprintf("%016x", 0xb0000000+r)
		status, reason, exit := api.RunCompleted, "completed:promise+verify", any(0)
		var ended, pm any = base, base
		if r >= runs-running {
			status, reason, exit, ended, pm = api.RunRunning, "", nil, nil, nil
			live = append(live, id)
		}
		if _, err := runStmt.Exec(id, ws, "bench", string(cfgJSON), string(condJSON), status, reason, exit,
			base, base, ended, base, pm); err != nil {
			return nil, err
		}
		for s := 1; s <= steps; s++ {
			stepID++
			phase, stStatus := api.PhaseImplementation, api.StepSucceeded
			if s%2 == 0 {
				phase, stStatus = api.PhaseVerification, api.StepFailed
			}
			var end, code any = base + int64(s), 0
			if status == api.RunRunning && s == steps {
				stStatus, end, code = api.StepRunning, nil, nil
				phase = api.PhaseImplementation
			}
			if _, err := stepStmt.Exec(id, s, phase, (s+1)/2, stStatus, code, base+int64(s), end,
				"/nonexistent/"+strings.Repeat("x", 8), 1000, 200); err != nil {
				return nil, err
			}
			for _, typ := range []string{"STEP_STARTED", "STEP_FINISHED"} {
				if _, err := evStmt.Exec(id, stepID, typ, base+int64(s), `{"seq":1}`); err != nil {
					return nil, err
				}
			}
		}
	}
	return live, tx.Commit()
}
