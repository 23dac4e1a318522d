// Package workspace reads the progress signals of a workspace without
// writing to it: a fingerprint of its files (to tell whether an iteration
// changed anything) and the state of its plan file.
package workspace

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	gitcmd "github.com/loopd/loopd/internal/git"
)

// maxFiles bounds the walk of a non-git workspace.
const maxFiles = 200_000

// skipDirs are not part of a non-git workspace's fingerprint: caches and
// dependency trees change without the work progressing.
var skipDirs = map[string]bool{".git": true, "node_modules": true, ".venv": true, "__pycache__": true}

// Fingerprint returns a digest that changes whenever the workspace's files
// change. In a git work tree it covers HEAD, the status of every changed or
// untracked file and their sizes and modification times (so editing an
// already modified file again counts); elsewhere it covers the path, size
// and modification time of every file. It never writes to the workspace
// (no git objects, no index refresh).
func Fingerprint(ctx context.Context, dir string) (string, error) {
	h := sha256.New()
	if head, ok := gitOutput(ctx, dir, "rev-parse", "--verify", "-q", "HEAD"); ok || isGit(ctx, dir) {
		fmt.Fprintf(h, "git\x00%s\x00", head)
		// --no-optional-locks: do not refresh the index (a write).
		status, ok := gitOutput(ctx, dir, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all")
		if !ok {
			return "", fmt.Errorf("git status in %s failed", dir)
		}
		h.Write([]byte(status))
		for entry := range strings.SplitSeq(status, "\x00") {
			if len(entry) < 4 {
				continue
			}
			path := entry[3:]
			if fi, err := os.Lstat(filepath.Join(dir, path)); err == nil {
				fmt.Fprintf(h, "%s\x00%d\x00%d\x00", path, fi.Size(), fi.ModTime().UnixNano())
			}
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable entries are skipped, not fatal
		}
		if d.IsDir() {
			if path != dir && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if n++; n > maxFiles {
			return fs.SkipAll
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", rel, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("fingerprint %s: %w", dir, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func isGit(ctx context.Context, dir string) bool {
	out, ok := gitOutput(ctx, dir, "rev-parse", "--is-inside-work-tree")
	return ok && strings.TrimSpace(out) == "true"
}

func gitOutput(ctx context.Context, dir string, args ...string) (string, bool) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		return "", false
	}
	return strings.TrimRight(string(out), "\n"), true
}

// Plan is the state of a markdown plan file's task list.
type Plan struct {
	Checked   int    // "- [x]" items
	Unchecked int    // "- [ ]" items
	Current   string // the first unchecked item's text: the task being worked on
}

var planItem = regexp.MustCompile(`^\s*[-*+]\s+\[([ xX])\]\s+(.*?)\s*$`)

// ReadPlan reads a plan file's checklist.
func ReadPlan(path string) (Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return Plan{}, fmt.Errorf("read plan: %w", err)
	}
	defer f.Close()
	var p Plan
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		m := planItem.FindSubmatch(sc.Bytes())
		if m == nil {
			continue
		}
		if bytes.Equal(m[1], []byte(" ")) {
			if p.Unchecked == 0 {
				p.Current = string(m[2])
			}
			p.Unchecked++
		} else {
			p.Checked++
		}
	}
	if err := sc.Err(); err != nil {
		return Plan{}, fmt.Errorf("read plan %s: %w", path, err)
	}
	return p, nil
}

// Resolve finds the workspace of dir the way git finds a repository: the
// nearest ancestor of dir (dir included) holding a .loop directory, else
// the top-level of the git working tree holding dir, else dir itself. So
// a command run from src/deep/dir of a repository uses the repository's
// .loop/config. dir must be absolute; the result is cleaned, with
// symlinks as given.
func Resolve(ctx context.Context, dir string) string {
	dir = filepath.Clean(dir)
	for d := dir; ; {
		if fi, err := os.Stat(filepath.Join(d, ".loop")); err == nil && fi.IsDir() {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if top, err := gitcmd.TopLevel(ctx, dir); err == nil && top != "" {
		return top
	}
	return dir
}
