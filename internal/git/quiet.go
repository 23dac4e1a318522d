package git

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The quiet check: most of the steps a ledger records in a small
// workspace change nothing (a no-op agent, a step that only read), and
// finding that out with git costs four process starts (~5 ms), on the path
// between one step and the next. So an in-place Ledger remembers, with
// each tree it records, the lstat(2) of every file and directory below the
// repository's top level (and of the git configuration and ignore files
// that decide what `git add -A` takes) as it was right before `git add`.
// When the next step's snapshot finds every one of them exactly as it was
// (size, mode, inode, mtime and ctime to the nanosecond), the workspace
// holds what that tree holds, and the step changed nothing: no git runs.
//
// Hazards, and what answers them:
//   - A file rewritten within one tick of the file system's clock, with the
//     same size, keeps its mtime. As git's "racy" rule does, a record that
//     holds any time within quietMargin of when it was taken is not
//     trusted: the next snapshot runs git. The kernel stamps files from a
//     clock that lags by at most one scheduler tick (≤ 10 ms); a file
//     system that keeps whole seconds only (FAT keeps two) shows it in
//     times without nanoseconds, which get quietCoarseMargin instead.
//   - ctime cannot be set by a user (touch -r, tar and rsync set mtime
//     only), and a rename or a new file changes its directory's mtime.
//   - A large tree (node_modules) would make the walk cost what git does:
//     past quietMaxEntries the check is given up for the Ledger's life.
//   - The record lives in memory only: a restarted daemon, or any step
//     recorded after a crash, runs git in full.
const quietMaxEntries = 5000

// quietMargin is how recent a time in the record makes it untrusted, and
// quietCoarseMargin the same for a time in whole seconds; variables for
// tests only.
var (
	quietMargin       = 100 * time.Millisecond
	quietCoarseMargin = 3 * time.Second
)

// quiet is the record of the workspace's state at the Ledger's last
// recorded tree.
type quiet struct {
	off    bool   // given up: the tree is too large, or the check failed
	top    string // the repository's top level
	extra  []string
	point  string // the commit whose tree the workspace held at sig; "" when there is no trusted record
	sig    []byte
	loaded bool
}

// quietInit finds what the check walks, once per Ledger: the repository's
// top level and the files outside it that decide what git takes.
func (l *Ledger) quietInit(ctx context.Context) bool {
	q := &l.q
	if l.Index == "" {
		return false // a worktree run's ledger commits on its branch: HEAD matters too
	}
	if q.loaded {
		return !q.off
	}
	q.loaded = true
	c := Cmd{Dir: l.Dir}
	out, err := c.Output(ctx, "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir")
	lines := strings.Split(out, "\n")
	if err != nil || len(lines) != 3 {
		q.off = true
		return false
	}
	q.top = lines[0]
	common := lines[2]
	if !filepath.IsAbs(common) {
		common = filepath.Join(l.Dir, common)
	}
	for _, d := range []string{lines[1], common} {
		q.extra = append(q.extra, filepath.Join(d, "config"), filepath.Join(d, "config.worktree"),
			filepath.Join(d, "info", "exclude"), filepath.Join(d, "info", "attributes"))
	}
	home, _ := os.UserHomeDir()
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	if home != "" {
		q.extra = append(q.extra, filepath.Join(home, ".gitconfig"))
	}
	if xdg != "" {
		q.extra = append(q.extra, filepath.Join(xdg, "git", "config"), filepath.Join(xdg, "git", "ignore"),
			filepath.Join(xdg, "git", "attributes"))
	}
	q.extra = append(q.extra, "/etc/gitconfig")
	for _, k := range []string{"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"} {
		if v := os.Getenv(k); v != "" {
			q.extra = append(q.extra, v)
		}
	}
	if ex, err := c.Output(ctx, "config", "--path", "--get", "core.excludesFile"); err == nil && ex != "" {
		if !filepath.IsAbs(ex) {
			ex = filepath.Join(q.top, ex)
		}
		q.extra = append(q.extra, ex)
	}
	return true
}

// quietSig lstat's the repository's files and directories (all of them,
// ignored ones too, but not .git at the top) and the extra files. ok is
// false when the check cannot be trusted now: the tree is too large
// (which turns the check off), a walk failed, or something was modified
// within quietMargin of now (racy: sig is still returned, for nothing
// but inequality).
func (l *Ledger) quietSig() (sig []byte, ok bool) {
	q := &l.q
	start := time.Now()
	recent := start.Add(-quietMargin).UnixNano()
	recentCoarse := start.Add(-quietCoarseMargin).UnixNano()
	var buf []byte
	entries := 0
	racy := false
	// record appends path's lstat to buf; isDir reports a directory to
	// walk, full that the tree has too many entries to check.
	record := func(path string) (isDir, full bool) {
		entries++
		if entries > quietMaxEntries {
			return false, true
		}
		buf = append(buf, path...)
		buf = append(buf, 0)
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			buf = append(buf, 0xff) // absent (an extra file that does not exist)
			return false, false
		}
		mt, ct := st.Mtim.Nano(), st.Ctim.Nano()
		r := recent
		if st.Mtim.Nsec == 0 && st.Ctim.Nsec == 0 {
			r = recentCoarse
		}
		if mt >= r || ct >= r {
			racy = true
		}
		for _, v := range []uint64{uint64(st.Mode), uint64(st.Size), st.Ino, st.Dev, uint64(mt), uint64(ct)} {
			buf = binary.LittleEndian.AppendUint64(buf, v)
		}
		return st.Mode&unix.S_IFMT == unix.S_IFDIR, false
	}
	for _, p := range q.extra {
		record(p)
	}
	var walk func(dir string, top bool) bool
	walk = func(dir string, top bool) bool {
		f, err := os.Open(dir)
		if err != nil {
			return false
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return false
		}
		// Readdir's order is the directory's; sorted, the signature does
		// not depend on it.
		slices.Sort(names)
		for _, name := range names {
			if top && name == ".git" {
				continue
			}
			p := dir + "/" + name
			isDir, full := record(p)
			if full || isDir && !walk(p, false) {
				return false
			}
		}
		return true
	}
	if _, full := record(q.top); full {
		q.off = true
		return nil, false
	}
	if !walk(q.top, true) {
		if entries > quietMaxEntries {
			q.off = true
		}
		return nil, false
	}
	return buf, !racy
}
