package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/termtext"
	"github.com/loopd/loopd/internal/trust"
)

// canonicalIn renames p, a path in the workspace ws as the user named
// it, to the same file under the workspace's canonical path (symbolic
// links resolved), which is how the API node names the clone.
func canonicalIn(ws, p string) string {
	if p == "" {
		return p
	}
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return p
	}
	if rp, err := filepath.EvalSymlinks(p); err == nil {
		if rel, err := filepath.Rel(real, rp); err == nil && filepath.IsLocal(rel) {
			return rp
		}
	}
	if rel, err := filepath.Rel(ws, p); err == nil && filepath.IsLocal(rel) {
		return filepath.Join(real, rel)
	}
	return p
}

// fleetSnapshot reads what a fleet's API node needs of the clone ws, which
// it cannot see: the files a run's config and trust are made of, as
// committed at commit (never the working tree: the fleet's workers make
// the run's worktree from the commit, and what is trusted must be what
// they get). named are more files of the clone the command line names
// (absolute). A file among them that differs in the working tree — a
// tracked file changed, a new one not committed — is refused: the user
// would trust or start something other than what they see. One that git
// ignores (a local .env, .claude/settings.local.json) is left out with a
// warning: no worker will ever have it.
func fleetSnapshot(ctx context.Context, ws, commit string, named []string) (*api.Snapshot, []string, error) {
	top, err := git.TopLevel(ctx, ws)
	if err != nil {
		return nil, nil, usageErrorf("%s: not a git clone: through LOOPD_URL a workspace's files are read from its commits", termtext.Quote(ws))
	}
	if real, err := filepath.EvalSymlinks(top); err == nil {
		top = real
	}
	if real, err := filepath.EvalSymlinks(ws); err == nil {
		ws = real
	}
	if top != ws {
		return nil, nil, usageErrorf("%s is below its repository's top level %s: a fleet run works at the top of its repository (the worker's worktree); start it there (loopctl start -C %s) with .loop/ there",
			termtext.Quote(ws), termtext.Quote(top), shellWord(top))
	}
	var extra []string
	for _, p := range named {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		rel, err := filepath.Rel(ws, p)
		if err != nil || !filepath.IsLocal(rel) {
			return nil, nil, usageErrorf("%s is outside the clone %s: a fleet run gets only files committed in its repository", termtext.Quote(p), termtext.Quote(ws))
		}
		extra = append(extra, filepath.ToSlash(rel))
	}
	files, err := trust.ReadCommitted(ctx, ws, commit, extra)
	if err != nil {
		return nil, nil, usageErrorf("%s", termtext.QuoteLines(err.Error()))
	}
	paths := append(trust.SnapshotRoots(), extra...)
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	changed, ignored, err := workingTreeChanges(ctx, ws, paths)
	if err != nil {
		return nil, nil, err
	}
	if len(changed) > 0 {
		return nil, nil, usageErrorf("%s differs from its commit %s in %s\n  through LOOPD_URL a run's config and the files it trusts are read as committed, never from the working tree: commit them (and git push), or discard the changes (git checkout -- FILE), then try again",
			termtext.Quote(ws), commit[:12], termtext.Quote(strings.Join(changed, ", ")))
	}
	var warnings []string
	if len(ignored) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s: not committed (git ignores it), so the fleet's workers never have it: it is not part of the run", strings.Join(ignored, ", ")))
	}
	snap := &api.Snapshot{Commit: commit, Files: []api.SnapshotFile{}}
	for _, f := range files {
		snap.Files = append(snap.Files, api.SnapshotFile{Path: f.Path, Data: f.Data})
	}
	// The user's own config needs no trust, and is the sender's, not the
	// API node's user's.
	if p, err := config.UserConfigPath(); err == nil {
		switch data, err := trust.ReadFile(p); {
		case err == nil:
			s := string(data)
			snap.UserConfig = &s
		case !errors.Is(err, fs.ErrNotExist):
			return nil, nil, fmt.Errorf("read your config: %w", err)
		}
	}
	return snap, warnings, nil
}

// workingTreeChanges lists which of paths (relative to the top level ws)
// differ in the working tree from HEAD: changed (tracked and changed, or
// untracked) and ignored by git.
func workingTreeChanges(ctx context.Context, ws string, paths []string) (changed, ignored []string, err error) {
	out, err := git.Cmd{Dir: ws}.Run(ctx, append([]string{"status", "--porcelain=v1", "-z", "--ignored=matching", "--untracked-files=all", "--"}, paths...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("git status in %s: %w", ws, err)
	}
	recs := bytes.Split(out, []byte{0})
	for i := 0; i < len(recs); i++ {
		rec := string(recs[i])
		if len(rec) < 4 {
			continue
		}
		xy, p := rec[:2], rec[3:]
		switch {
		case xy == "!!":
			ignored = append(ignored, p)
		default:
			changed = append(changed, p)
		}
		if (xy[0] == 'R' || xy[0] == 'C') && i+1 < len(recs) {
			i++ // the source path of a rename or copy follows
			if xy[0] == 'R' {
				changed = append(changed, string(recs[i])) // gone from where it was
			}
		}
	}
	slices.Sort(changed)
	slices.Sort(ignored)
	return changed, ignored, nil
}

// snapshotNamed are the files of the clone a start names: its flags (as
// given, absolute) and the relative file keys of its --set arguments.
func snapshotNamed(ws string, flags []string, sets []string) []string {
	var out []string
	for _, p := range flags {
		if p != "" {
			out = append(out, p)
		}
	}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"'`)
		if !ok || v == "" || !strings.HasSuffix(k, "_file") {
			continue
		}
		if !filepath.IsAbs(v) {
			v = filepath.Join(ws, v)
		}
		if rel, err := filepath.Rel(ws, v); err == nil && filepath.IsLocal(rel) {
			if fi, err := os.Lstat(v); err == nil && fi.Mode().IsRegular() {
				out = append(out, v)
			}
		}
	}
	return out
}
