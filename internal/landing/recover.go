package landing

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/supervise"
)

// landMarkerFile, in a run's directory, says a land is testing in the
// run's worktree (detached at the merge under test).
const landMarkerFile = "landing.json"

type landMarker struct {
	Tag        string `json:"tag"` // the verification's supervise tag
	Worktree   string `json:"worktree"`
	Branch     string `json:"branch"`
	StatusPath string `json:"status_path"`
}

func writeLandMarker(dir string, m landMarker) error {
	if err := writeJSONFile(filepath.Join(dir, landMarkerFile), m); err != nil {
		return fmt.Errorf("write land marker: %w", err)
	}
	return nil
}

// landedIntentFile, in a run's directory, says a land is about to move
// (or has moved) the base branch and not recorded it yet.
const landedIntentFile = "landed.json"

type landedIntent struct {
	Checkout   string         `json:"checkout"`
	BaseBranch string         `json:"base_branch"`
	Commit     string         `json:"commit"`  // what the base branch is moved to
	Payload    map[string]any `json:"payload"` // RUN_LANDED's
}

// recoverLandedIntents records the lands whose base branch moved just
// before the previous daemon died, before it could record them: the
// branch holds the commit the intent names. An intent whose commit is not
// on the branch never landed, and is dropped.
func (l *Lander) recoverLandedIntents(ctx context.Context) {
	intents, _ := filepath.Glob(filepath.Join(l.home, "runs", "*", landedIntentFile))
	for _, path := range intents {
		runID := filepath.Base(filepath.Dir(path))
		b, err := os.ReadFile(path)
		var in landedIntent
		if err == nil {
			err = json.Unmarshal(b, &in)
		}
		if err != nil || in.Commit == "" || in.BaseBranch == "" || in.Checkout == "" {
			// Written before git was run: a torn one never landed.
			l.log.Warn("unreadable land intent removed", zap.String("path", path), zap.Error(err))
			_ = os.Remove(path)
			continue
		}
		run, err := l.store.Run(ctx, runID)
		if err != nil {
			l.log.Warn("land intent of an unknown run removed", zap.String("path", path), zap.Error(err))
			_ = os.Remove(path)
			continue
		}
		landed := run.LandedCommit == in.Commit
		if !landed {
			_, err := git.Cmd{Dir: in.Checkout}.Output(ctx, "merge-base", "--is-ancestor", in.Commit, "refs/heads/"+in.BaseBranch)
			if err == nil {
				err = l.store.Write(ctx, func(tx *storage.Tx) error { return tx.RecordLanded(run.ID, in.Commit, in.Payload) })
				if err != nil {
					l.log.Error("could not record a land the previous daemon made", zap.String("run_id", run.ID), zap.Error(err))
					continue // the intent stays: the next start tries again
				}
				l.log.Info("recorded a land the previous daemon made but did not record",
					zap.String("run_id", run.ID), zap.String("base_branch", in.BaseBranch), zap.String("commit", in.Commit))
			}
		}
		_ = os.Remove(path)
	}
}

// recoverLands finishes what lands cut short by a daemon that died: the
// verification still running in a worktree is stopped (nothing will land
// it), and the worktree is put back on its run's branch, so that a resumed
// run never works on a detached merge. The user's checkout was never
// touched by them.
func (l *Lander) recoverLands(ctx context.Context) {
	marks, _ := filepath.Glob(filepath.Join(l.home, "runs", "*", landMarkerFile))
	for _, path := range marks {
		b, err := os.ReadFile(path)
		var m landMarker
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil || m.Tag == "" || m.Worktree == "" || m.Branch == "" {
			l.log.Warn("unreadable land marker removed", zap.String("path", path), zap.Error(err))
			_ = os.Remove(path)
			continue
		}
		if id, ok := supervise.Find(m.Tag); ok {
			if proc, err := supervise.Adopt(id, m.Tag, m.StatusPath); err == nil {
				proc.Terminate(l.grace)
				select {
				case <-proc.Done():
				case <-time.After(l.grace + 5*time.Second):
					l.log.Warn("a cut-short land's verification did not stop", zap.String("tag", m.Tag))
				}
			}
		}
		if _, err := os.Stat(m.Worktree); err == nil {
			l.clearStaleLocks(ctx, m.Worktree)
			if err := git.RestoreBranch(ctx, m.Worktree, m.Branch); err != nil {
				l.log.Error("could not put a worktree back on its branch after a cut-short land",
					zap.String("worktree", m.Worktree), zap.Error(err))
				continue
			}
		}
		_ = os.Remove(path)
		l.log.Info("a land cut short by the previous daemon was undone; nothing had landed",
			zap.String("worktree", m.Worktree), zap.String("branch", m.Branch))
	}
}
