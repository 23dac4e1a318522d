package scheduler

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/loopd/loopd/internal/agent"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/termtext"
)

// shortLen is the length of a run's short id: in its branch name
// (loop/<short-id>), its ledger commits and loopctl's output.
const shortLen = 8

func shortOf(id string) string { return id[:min(len(id), shortLen)] }

// WorktreePath is where a worktree run's worktree lives.
func (s *Scheduler) WorktreePath(runID string) string {
	return filepath.Join(s.opts.Home, "worktrees", runID)
}

// isolate fills in how a new run uses its workspace (docs/workspaces.md) and
// returns the repository's common git directory (worktree runs) and what
// the user should be warned of. A worktree run needs a git repository
// with a commit: its base is HEAD now, when the user typed start (the
// worktree itself is added when the run starts, see prepareWorktree).
func (s *Scheduler) isolate(ctx context.Context, run *storage.Run, cfg config.Config) (string, []string, error) {
	run.Isolation = string(cfg.Isolation)
	repo, err := git.Inspect(ctx, run.Workspace)
	notGit := errors.Is(err, git.ErrNotRepository)
	if err != nil && !notGit {
		return "", nil, fmt.Errorf("inspect the workspace's repository: %w", err)
	}
	if notGit && cfg.HasGate(config.GateChanges) {
		// The gate reads the change ledger, which only a git repository
		// has: without one the run could never complete.
		return "", nil, &InputError{Msg: "completion gate \"changes\" needs a git repository; nothing was created",
			Problems: []string{fmt.Sprintf("%s is not inside a git working tree: run `git init`, or drop changes from completion", run.Workspace)}}
	}
	if cfg.Isolation != config.IsolationWorktree {
		var warnings []string
		if cfg.SetupCommand != "" {
			warnings = append(warnings, "setup_command is ignored: it runs only in a new worktree (isolation=worktree)")
		}
		if !notGit {
			run.BaseCommit, run.BaseBranch = repo.Head, repo.Branch
		}
		return "", warnings, nil
	}
	switch {
	case notGit:
		return "", nil, &InputError{Msg: "isolation=worktree needs a git repository; nothing was created",
			Problems: []string{fmt.Sprintf("%s is not inside a git working tree: run `git init` and commit once, or use isolation=in_place", run.Workspace)}}
	case repo.Head == "":
		return "", nil, &InputError{Msg: "isolation=worktree needs a git repository with a commit; nothing was created",
			Problems: []string{fmt.Sprintf("the repository at %s has no commit yet: commit once (git commit), or use isolation=in_place", repo.TopLevel)}}
	}
	run.Worktree = s.WorktreePath(run.ID)
	run.Branch = "loop/" + shortOf(run.ID)
	run.BaseCommit, run.BaseBranch = repo.Head, repo.Branch
	var warnings []string
	if files := changesThatMatter(ctx, repo.TopLevel, run.Workspace, cfg); len(files) > 0 {
		warnings = append(warnings, fmt.Sprintf("the checkout %s has uncommitted changes in %s; they are not part of this run, which starts from %s (%s)",
			repo.TopLevel, fileCount(files), shortOf(repo.Head), branchOrDetached(repo.Branch)))
	}
	if repo.Branch == "" {
		// Found out only at the end otherwise: land has no base branch to
		// move, and refuses.
		warnings = append(warnings, fmt.Sprintf("the checkout %s is on a detached HEAD: loopctl land will have no base branch to land into; "+
			"merge %s by hand when the run ends (or switch to a branch and start again)", repo.TopLevel, run.Branch))
	}
	return repo.CommonDir, warnings, nil
}

// changesThatMatter lists the checkout's uncommitted changes that the user
// may expect in a worktree run: every tracked file, and the untracked ones
// that are not loopd's own. The untracked .loop/, env file and prompt file
// the getting-started guide has the user create are not part of the
// project, and warning of them at every start teaches users to skip the
// warning.
func changesThatMatter(ctx context.Context, top, ws string, cfg config.Config) []string {
	changes, err := git.Uncommitted(ctx, top)
	if err != nil {
		return nil
	}
	own := map[string]bool{filepath.Join(ws, ".loop") + "/": true}
	for _, f := range []string{cfg.EnvFile, cfg.PromptFile, cfg.TasksFile} {
		if f != "" {
			own[f] = true
		}
	}
	var files []string
	for _, c := range changes {
		abs := filepath.Join(top, c.Path)
		if strings.HasSuffix(c.Path, "/") {
			abs += "/"
		}
		if c.Untracked && (own[abs] || strings.HasPrefix(abs, filepath.Join(ws, ".loop")+"/")) {
			continue
		}
		files = append(files, c.Path)
	}
	return files
}

// fileCount names up to three files and counts the rest.
func fileCount(files []string) string {
	const shown = 3
	quoted := make([]string, 0, shown)
	for _, f := range files[:min(len(files), shown)] {
		quoted = append(quoted, termtext.Quote(f))
	}
	s := strings.Join(quoted, ", ")
	if len(files) > shown {
		s += fmt.Sprintf(" and %d more", len(files)-shown)
	}
	return s
}

func branchOrDetached(b string) string {
	if b == "" {
		return "detached HEAD"
	}
	return b
}

// startWarnings are what a user starting an overnight run should never be
// surprised by: an agent's word alone completing it, or no cost cap.
func startWarnings(cfg config.Config, set stop.Set) []string {
	var out []string
	if len(cfg.VerifyCommands) == 0 {
		out = append(out, "no verify_command: nothing checks the agent's work; the run completes on "+
			gateWords(cfg)+" (set verify_command in .loop/config)")
	}
	if a, _ := agent.Lookup(string(cfg.Agent)); a != nil && a.Paid && cfg.MaxCost == 0 && !set.Uses(stop.TypeMaxCost) {
		out = append(out, fmt.Sprintf("no max_cost: the %s agent's spending is not capped (set max_cost, e.g. --set max_cost=20)", cfg.Agent))
	}
	return out
}

// gateWords says what the completion gate really checks when no
// verification (and perhaps no review) is configured.
func gateWords(cfg config.Config) string {
	var parts []string
	for _, g := range cfg.Completion {
		switch g {
		case config.GatePromise:
			parts = append(parts, "the agent's promise")
		case config.GateReview:
			if cfg.ReviewCommand != "" {
				parts = append(parts, "the review")
			}
		case config.GatePlan:
			parts = append(parts, "the plan's checklist")
		}
	}
	if len(parts) == 0 {
		return "its first iteration that ends without a failure"
	}
	return joinAnd(parts)
}

// busyWorkspace refuses a second active in-place run in a workspace.
func busyWorkspace(ws string, active storage.Run) error {
	return &StateError{Msg: fmt.Sprintf("workspace %s already has an active run %s (%s); two in-place runs would edit the same files.\n"+
		"  wait for it (loopctl wait %s), stop it (loopctl stop %s),\n"+
		"  or give this run its own git worktree and branch: loopctl start --set isolation=worktree …",
		ws, shortOf(active.ID), active.Status, shortOf(active.ID), shortOf(active.ID))}
}
