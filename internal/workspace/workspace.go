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
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	gitcmd "github.com/loopd/loopd/internal/git"
	"github.com/loopd/loopd/internal/termtext"
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

// MaxPlanBytes bounds a plan file: it is read at every iteration, and one
// that never ends (a link to /dev/zero) would otherwise be read forever.
const MaxPlanBytes = 4 << 20

// OpenRegular opens the file path for reading, as the daemon re-reads a
// run's goal and plan while its agent works in the workspace and can
// replace them: with a FIFO (opening it would block the daemon until a
// writer came, and `stop --now` with it), a device that never ends, or a
// symlink to /proc/self/environ (the daemon's environment, API keys and
// all, would become the goal). A path inside dir is opened through dir as
// an os.Root, so neither a symlink nor ".." leads out of it; a path
// outside dir is one the user named and is opened as it is. The open never
// blocks, and anything but a regular file is refused.
func OpenRegular(dir, path string) (*os.File, error) {
	var f *os.File
	var err error
	if rel, rerr := filepath.Rel(dir, path); dir != "" && filepath.IsAbs(path) && rerr == nil && filepath.IsLocal(rel) {
		var root *os.Root
		if root, err = os.OpenRoot(dir); err != nil {
			return nil, err
		}
		f, err = root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		root.Close()
		if err != nil {
			return nil, fmt.Errorf("open %s inside %s: %w", path, dir, err)
		}
	} else if f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, info.Mode().Type())
	}
	return f, nil
}

// ReadPlan reads a plan file's checklist, opened by [OpenRegular] (path
// stays inside dir, the workspace) and of at most MaxPlanBytes.
func ReadPlan(dir, path string) (Plan, error) {
	f, err := OpenRegular(dir, path)
	if err != nil {
		return Plan{}, fmt.Errorf("read plan: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPlanBytes+1))
	if err != nil {
		return Plan{}, fmt.Errorf("read plan %s: %w", path, err)
	}
	if len(data) > MaxPlanBytes {
		return Plan{}, fmt.Errorf("read plan %s: larger than %d MiB", path, MaxPlanBytes>>20)
	}
	var p Plan
	sc := bufio.NewScanner(bytes.NewReader(data))
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
// nearest ancestor of dir (dir included) holding a .loop directory of the
// user's own (LoopDir), else the top-level of the git working tree holding
// dir, else dir itself. So a command run from src/deep/dir of a repository
// uses the repository's .loop/config. dir must be absolute; the result is
// cleaned, with symlinks as given.
//
// A .loop that is not the user's is passed over: in a shared directory
// (/tmp/.loop) it would otherwise turn every run started below it into a
// run in that directory, with that user's PROMPT.md as its goal. Resolve
// never fails; ResolveChecked also refuses what Resolve passes over
// silently.
func Resolve(ctx context.Context, dir string) string {
	ws, _ := resolve(ctx, dir, false)
	return ws
}

// ResolveChecked is Resolve for starting a run or trusting a workspace: it
// refuses, naming the path and its owners, a .loop whose link and target
// belong to different users (a link another user made to a directory of
// the user's, or the user's own link to another user's directory) found on
// the way up, and a .loop in the workspace itself that is not the user's
// (it would be read as the workspace's config).
func ResolveChecked(ctx context.Context, dir string) (string, error) {
	ws, err := resolve(ctx, dir, true)
	if err != nil {
		return "", err
	}
	if _, err := LoopDir(ws); err != nil {
		return "", err
	}
	return ws, nil
}

// resolve walks up from dir; strict refuses a .loop of mixed ownership
// instead of passing it over.
func resolve(ctx context.Context, dir string, strict bool) (string, error) {
	dir = filepath.Clean(dir)
	for d := dir; ; {
		ok, err := LoopDir(d)
		if ok {
			return d, nil
		}
		var fe *ForeignLoopError
		if errors.As(err, &fe) && fe.Mixed && strict {
			return "", err
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if top, err := gitcmd.TopLevel(ctx, dir); err == nil && top != "" {
		return top, nil
	}
	return dir, nil
}

// ForeignLoopError is a .loop that is not the user's: owned by another
// user, or a symlink whose link or target is.
type ForeignLoopError struct {
	Path string // dir/.loop
	// Mixed: a symlink whose link and target have different owners. Never
	// innocent when the link is another user's (it points into the user's
	// files to make them look like the user's own .loop).
	Mixed  bool
	Detail string // who owns what
}

// Error names the paths with their control characters quoted: another
// user chose them.
func (e *ForeignLoopError) Error() string {
	return fmt.Sprintf("%s is not yours: %s; a .loop counts only when it (and, for a symlink, its target) belongs to you (uid %d), "+
		"so it is not read. Remove it (or ask its owner to), or give your workspace a .loop of its own (mkdir .loop), which is found first",
		termtext.Quote(e.Path), termtext.Quote(e.Detail), os.Getuid())
}

// LoopDir reports whether dir/.loop is a .loop of the user's: a directory
// the user owns, or a symlink the user owns to a directory the user owns.
// The link is checked with lstat: stat alone follows it, and another user
// who can write to dir could link .loop to a directory of the user's and
// have dir (with that user's PROMPT.md and Makefile) taken for the user's
// workspace. A missing .loop, or one that is not a directory, is (false,
// nil); one that is not the user's is (false, *ForeignLoopError).
func LoopDir(dir string) (bool, error) {
	path := filepath.Join(dir, ".loop")
	uid := os.Getuid()
	li, err := os.Lstat(path)
	if err != nil {
		return false, nil
	}
	if li.Mode()&fs.ModeSymlink == 0 {
		if !li.IsDir() {
			return false, nil
		}
		if o := owner(li); o != uid {
			return false, &ForeignLoopError{Path: path, Detail: "it belongs to " + describeUID(o)}
		}
		return true, nil
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return false, nil
	}
	target, _ := filepath.EvalSymlinks(path)
	lo, to := owner(li), owner(fi)
	switch {
	case lo != uid && to != uid:
		return false, &ForeignLoopError{Path: path, Mixed: lo != to,
			Detail: fmt.Sprintf("it is a symlink of %s to %s, which belongs to %s", describeUID(lo), target, describeUID(to))}
	case lo != uid:
		return false, &ForeignLoopError{Path: path, Mixed: true,
			Detail: fmt.Sprintf("it is a symlink of %s to your %s", describeUID(lo), target)}
	case to != uid:
		return false, &ForeignLoopError{Path: path, Mixed: true,
			Detail: fmt.Sprintf("it is your symlink to %s, which belongs to %s", target, describeUID(to))}
	}
	if link, o := foreignLink(dir, uid); link != "" {
		return false, &ForeignLoopError{Path: path, Mixed: true,
			Detail: fmt.Sprintf("it leads to %s through %s, a symlink of %s, who can point it elsewhere", target, link, describeUID(o))}
	}
	return true, nil
}

// foreignLink follows dir/.loop as the kernel would, component by
// component, and returns the first symlink on the way that neither the
// user nor root owns, with its owner ("" when there is none). The link
// and the final directory being the user's is not enough: a link in the
// middle (ws/.loop -> shared/.loop -> the user's directory) belongs to
// whoever made it, and they can point it anywhere.
func foreignLink(dir string, uid int) (string, int) {
	resolved, rest := dir, []string{".loop"}
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		p := filepath.Join(resolved, c)
		li, err := os.Lstat(p)
		if err != nil {
			return "", 0
		}
		if li.Mode()&fs.ModeSymlink == 0 {
			resolved = p
			continue
		}
		if o := owner(li); o != uid && o != 0 {
			return p, o
		}
		if hops++; hops > 40 { // ELOOP: the kernel gives up too
			return "", 0
		}
		t, err := os.Readlink(p)
		if err != nil {
			return "", 0
		}
		if filepath.IsAbs(t) {
			resolved = "/"
		}
		rest = append(strings.Split(t, "/"), rest...)
	}
	return "", 0
}

// owner is a file's uid (the user's own where the platform does not say).
func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return os.Getuid()
}

// describeUID names a uid with its user name when there is one: "uid
// 65534 (nobody)".
func describeUID(uid int) string {
	s := "uid " + strconv.Itoa(uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		s += " (" + u.Username + ")"
	}
	return s
}
