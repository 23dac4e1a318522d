package main

import (
	"path/filepath"
	"strings"

	"github.com/loopd/loopd/internal/api"
)

// isRunID reports whether s is a full run id (16 lowercase hex digits),
// the name of a run's worktree directory.
func isRunID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// worktreeRun returns the id of the run whose worktree holds ws, when ws is
// inside LOOPD_HOME/worktrees/<run-id>. A user who cds into a run's
// worktree to look at it, or an agent working there, means that run by
// "last": no run has the worktree itself as its workspace, so "last"
// resolved there would only answer "no runs".
func worktreeRun(ws string) (string, bool) {
	home, err := api.Home()
	if err != nil {
		return "", false
	}
	root := filepath.Join(home, "worktrees")
	for _, pair := range [][2]string{{root, ws}, {evalOr(root), evalOr(ws)}} {
		rel, err := filepath.Rel(pair[0], pair[1])
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		id, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if isRunID(id) {
			return id, true
		}
	}
	return "", false
}

// evalOr is path with its symlinks resolved, or path itself when that fails.
func evalOr(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}
