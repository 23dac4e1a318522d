// Package homeguard refuses a LOOPD_HOME, or a socket directory, that a
// user other than the daemon's could change. Whoever can replace
// http.token, the database or the socket in the home controls the daemon,
// so the daemon checks before it writes anything (Check), makes the home
// owner-only once it holds the lock (Tighten, then Check again, then
// Prepare), and checks the socket's directory before it binds
// (CheckSocketDir).
package homeguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/loopd/loopd/internal/termtext"
)

// OwnerError is a LOOPD_HOME (or a file in it, or a directory above
// it) that someone other than the daemon's user could change. Whoever can
// replace http.token, the database or the socket in it controls the
// daemon: a root daemon on a home that uid 65534 owns would serve, with
// root's rights, whoever holds the token that user wrote.
type OwnerError struct {
	Path   string // what is wrong
	Reason string // why it is not safe, in words
	Fix    string // what to do
	// Wrote is what the daemon had written when it refused, in words;
	// "" when nothing was (every check but the one after the home is
	// made owner-only).
	Wrote string
}

// Error quotes the path's control characters: while the home was open to
// others, they chose the names in it.
func (e *OwnerError) Error() string {
	wrote := "nothing was written"
	if e.Wrote != "" {
		wrote = e.Wrote
	}
	return fmt.Sprintf("%s %s; refusing to start (%s). %s", termtext.Quote(e.Path), e.Reason, wrote, e.Fix)
}

// Check refuses a home that another user could change under the
// daemon. It writes nothing, so it runs before the home is created, locked
// or tightened. It checks:
//   - every existing directory above the home (and above the socket when
//     it lives elsewhere): owned by the daemon's user or root, and not
//     writable by others unless sticky (/tmp): whoever may rename entries
//     in a parent can swap the home for a directory of their own;
//   - the home itself: owned by the daemon's user;
//   - every entry directly in the home (http.token, loopd.db and its
//     -wal/-shm, loopd.lock, runs/, worktrees/, …): owned by the daemon's
//     user, and a symlink's target too. Another user could have put them
//     there while the home was open to others.
func Check(home, socket string) error {
	uid := os.Geteuid()
	if err := checkAncestors(home, uid); err != nil {
		return err
	}
	// The home as it really is: given as a symlink, the link's parent was
	// checked above, and what it leads to must be ours too.
	// A home given as a symlink: the link must be ours too, or its owner
	// (a link in /tmp) could point it elsewhere once the target is checked.
	if li, err := os.Lstat(home); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		if err := checkOwned(home, "LOOPD_HOME "+home+" (a symlink)", uid, home); err != nil {
			return err
		}
	}
	real, err := filepath.EvalSymlinks(home)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Created by the daemon, as its user.
	case err != nil:
		return fmt.Errorf("LOOPD_HOME %s: %w", home, err)
	default:
		label := "LOOPD_HOME " + home
		if real != home {
			label += " (" + real + ")"
		}
		if err := checkOwned(real, label, uid, home); err != nil {
			return err
		}
		if err := checkEntries(real, uid); err != nil {
			return err
		}
	}
	if dir := filepath.Dir(socket); socket != "" && !underHome(dir, home) {
		if err := checkAncestors(filepath.Join(dir, "x"), uid); err != nil {
			return err
		}
	}
	return nil
}

// checkAncestors checks the existing directories above path, both as
// given and with symlinks resolved.
func checkAncestors(path string, uid int) error {
	seen := map[string]bool{}
	for _, p := range []string{path, realPrefix(path)} {
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			if !seen[d] {
				seen[d] = true
				if fi, err := os.Stat(d); err == nil {
					if err := checkParent(d, fi, uid, path); err != nil {
						return err
					}
				}
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return nil
}

// realPrefix resolves the symlinks of the longest existing prefix of
// path and appends the rest as given.
func realPrefix(path string) string {
	rest := ""
	for p := path; ; p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(real, rest)
		}
		if filepath.Dir(p) == p {
			return path
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// checkParent refuses a directory above the home that another user owns
// or may write to (a sticky directory such as /tmp is fine: others cannot
// rename what is ours in it). Group write is allowed only to the user's
// private group (see privateGroup): being the daemon's group is not
// enough, when others are in it too (users, staff).
func checkParent(dir string, fi fs.FileInfo, uid int, home string) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if int(st.Uid) != uid && st.Uid != 0 {
		return &OwnerError{Path: dir,
			Reason: fmt.Sprintf("(above LOOPD_HOME %s) belongs to %s, not to %s that runs loopd or root: its owner can replace the home with a directory of their own", home, describeUID(int(st.Uid)), describeUID(uid)),
			Fix:    "Use a LOOPD_HOME in a directory of your own (unset LOOPD_HOME for the default)."}
	}
	perm := fi.Mode()
	sticky := perm&fs.ModeSticky != 0
	switch {
	case perm&0o002 != 0 && !sticky:
		return &OwnerError{Path: dir,
			Reason: fmt.Sprintf("(above LOOPD_HOME %s) is writable by every user (mode %04o, not sticky): anyone can replace the home", home, perm.Perm()),
			Fix:    fmt.Sprintf("Run `chmod o-w %s` (or `chmod +t` it), or use a LOOPD_HOME elsewhere.", dir)}
	case perm&0o020 != 0 && !sticky && !groupWriteOK(fi):
		return &OwnerError{Path: dir,
			Reason: fmt.Sprintf("(above LOOPD_HOME %s) is writable by group %d (mode %04o, not sticky): its members can replace the home", home, st.Gid, perm.Perm()),
			Fix:    fmt.Sprintf("Run `chmod g-w %s`, or use a LOOPD_HOME elsewhere.", dir)}
	}
	return nil
}

// checkOwned refuses a file that the daemon's user does not own; label
// names it in the message.
func checkOwned(path, label string, uid int, home string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil // gone since it was listed: nothing of another user's to use
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == uid {
		return nil
	}
	return &OwnerError{Path: label,
		Reason: fmt.Sprintf("belongs to %s, not to %s that runs loopd: its owner could replace the daemon's token, database or socket",
			describeUID(int(st.Uid)), describeUID(uid)),
		Fix: fmt.Sprintf("Use a LOOPD_HOME of your own (unset LOOPD_HOME for the default), or, if %s is yours, take it back: `chown -R %d %s`.", home, uid, home)}
}

// checkEntries checks the owner of every entry directly in the home and
// of a symlink's target.
func checkEntries(home string, uid int) error {
	entries, err := os.ReadDir(home)
	if err != nil {
		return fmt.Errorf("read LOOPD_HOME %s: %w", home, err)
	}
	for _, e := range entries {
		p := filepath.Join(home, e.Name())
		if err := checkOwned(p, p, uid, home); err != nil {
			return err
		}
		if e.Type()&fs.ModeSymlink != 0 {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				if err := checkOwned(real, p+" (a symlink to "+real+")", uid, home); err != nil {
					return err
				}
			}
		}
	}
	return nil
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

// underHome reports whether dir is home or below it.
func underHome(dir, home string) bool {
	rel, err := filepath.Rel(home, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// groupWriteOK reports whether a directory's group write bit is harmless:
// its group is the daemon's user's private group.
func groupWriteOK(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && privateGroup(int(st.Gid), os.Geteuid(), "/etc/group", "/etc/passwd")
}

// privateGroup reports whether gid is uid's user-private group (Debian's
// default: each user a group of their own name, umask 002, so the user's
// own directories are group-writable): a group of the user's name whose
// only member is the user, and no other account's primary group. Any
// group with other members lets them rename what is in a directory it may
// write to. A group that cannot be read from the files (NSS, LDAP) is not
// taken to be private.
func privateGroup(gid, uid int, groupFile, passwdFile string) bool {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return false
	}
	groups, err := os.ReadFile(groupFile)
	if err != nil {
		return false
	}
	found := false
	for line := range strings.Lines(string(groups)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) < 4 || f[2] != strconv.Itoa(gid) {
			continue
		}
		if f[0] != u.Username {
			return false
		}
		for _, m := range strings.Split(f[3], ",") {
			if m != "" && m != u.Username {
				return false
			}
		}
		found = true
	}
	if !found {
		return false
	}
	accounts, err := os.ReadFile(passwdFile)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(accounts)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) >= 4 && f[3] == strconv.Itoa(gid) && f[0] != u.Username {
			return false
		}
	}
	return true
}

// Tighten makes LOOPD_HOME owner-only (an existing home that others
// can read is tightened, because it holds the socket and every run's
// output). Called with the lock held; the home was checked to be the
// daemon's user's.
func Tighten(home string) error {
	fi, err := os.Stat(home)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(home, 0o700); err != nil {
			return fmt.Errorf("make %s owner-only: %w", home, err)
		}
	}
	return nil
}

// Prepare makes LOOPD_HOME/runs owner-only. Called with the lock held
// on an owner-only home whose entries were checked: runs/ is not another
// user's symlink.
func Prepare(home string) error {
	runs := filepath.Join(home, "runs")
	if err := os.MkdirAll(runs, 0o700); err != nil {
		return fmt.Errorf("create LOOPD_HOME %s: %w", home, err)
	}
	fi, err := os.Stat(runs)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(runs, 0o700); err != nil {
			return fmt.Errorf("make %s owner-only: %w", runs, err)
		}
	}
	return nil
}

// CheckSocketDir refuses a socket directory that another user could
// change. The home's check at start saw it only if it existed then; made
// afterwards by another user (LOOPD_SOCKET in /tmp: they win the race to
// mkdir it), or open to others, they could remove the daemon's socket and
// bind their own in its place, and loopctl would talk to them.
func CheckSocketDir(dir string) error {
	uid := os.Geteuid()
	refuse := func(reason, fix string) error {
		return &OwnerError{Path: "socket directory " + dir, Reason: reason, Fix: fix,
			Wrote: "no socket was bound in it"}
	}
	li, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if li.Mode()&fs.ModeSymlink != 0 {
		if owner := fileUID(li); owner != uid {
			return refuse(fmt.Sprintf("is a symlink of %s, not of %s that runs loopd", describeUID(owner), describeUID(uid)),
				"Use a socket path in a directory of your own (unset LOOPD_SOCKET for LOOPD_HOME/loopd.sock).")
		}
		if li, err = os.Stat(dir); err != nil {
			return fmt.Errorf("socket directory: %w", err)
		}
	}
	switch owner := fileUID(li); {
	case !li.IsDir():
		return fmt.Errorf("socket directory %s is not a directory", dir)
	case owner != uid && owner != 0: // root's: /tmp, /run/user
		return refuse(fmt.Sprintf("belongs to %s, not to %s that runs loopd or root: its owner could put a socket of their own in the daemon's place",
			describeUID(owner), describeUID(uid)),
			"Use a socket path in a directory of your own (unset LOOPD_SOCKET for LOOPD_HOME/loopd.sock).")
	// Sticky (/tmp itself): others cannot remove or rename the daemon's
	// socket there, and loopctl checks whose process serves it.
	case li.Mode()&fs.ModeSticky == 0 && (li.Mode().Perm()&0o002 != 0 || li.Mode().Perm()&0o020 != 0 && !groupWriteOK(li)):
		return refuse(fmt.Sprintf("is writable by others (mode %04o, not sticky): they could put a socket of their own in the daemon's place", li.Mode().Perm()),
			fmt.Sprintf("Run `chmod go-w %s` (0700 is best), or use a socket path elsewhere.", dir))
	}
	return nil
}

// fileUID is the owner of a file; -1 when unknown.
func fileUID(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
