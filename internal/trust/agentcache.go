package trust

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// AgentCache answers InspectAgentsIn for the steps of one run without
// reading the agents' files again when nothing they are read from has
// changed. The runner asks before every agent step; reading every file and
// walking every parent directory, each time, was a tenth of the daemon's
// work between two no-op steps.
//
// With each answer it keeps a stamp of every path the inspection looked
// at, taken before it looked: for each agent path in the directory and in
// each parent up to /, the lstat(2) (size, mode, owner, device, inode,
// mtime and ctime to the nanosecond) of each directory on the way to it
// as far as they exist, of the first that does not (stamped as absent),
// of the path itself, and of everything below it when it is an agent
// directory (a new file there changes the directory's times too). The
// directories themselves are not stamped: a parent such as /tmp changes
// all the time, and what appears in it under another name is not read.
//
// Hazards, and what answers them:
//   - A file rewritten with the same size and its mtime set back (touch -r,
//     tar, rsync) still gets a new ctime, which no user can set; a file
//     replaced by a rename gets a new inode, and its directory new times.
//   - A change within one tick of the file system's clock after the stamp
//     keeps the stamped times: a stamp that holds any time within
//     agentRacyMargin of when it was taken (agentRacyCoarse for a file
//     system with whole seconds) is not kept, and the next step inspects
//     in full (git's "racy" rule).
//   - A symbolic link on the way (or as the file) is followed by the
//     reader: the stat of what it leads to is in the stamp beside the
//     link's own.
//   - The trust records are not cached: the caller checks the files
//     against them every time (a revoke applies at the next step).
//   - The cache lives in memory, for one runner: a restarted daemon
//     inspects in full.
//
// An AgentCache is not safe for concurrent use.
type AgentCache struct {
	key   [3]string // ws, dir, envFile of the kept answer
	paths []string  // what the stamp covers, in order
	sum   *[32]byte // the stamp's SHA-256 (a thousand runs keep one each); nil: no answer kept
	files []File
}

// agentRacyMargin and agentRacyCoarse are how recent a time in a stamp
// makes it untrusted (see AgentCache); variables for tests only.
var (
	agentRacyMargin = 100 * time.Millisecond
	agentRacyCoarse = 3 * time.Second
)

// inspectAgentsIn is InspectAgentsIn; a test counts the calls.
var inspectAgentsIn = InspectAgentsIn

// agentStampMax bounds what a stamp covers: past it (an agent directory of
// thousands of files, which the inspection refuses anyway) nothing is kept.
const agentStampMax = 2 * maxDirFiles

// InspectAgentsIn is the package's InspectAgentsIn, answered from the
// cache when nothing the last answer was read from has changed since.
func (c *AgentCache) InspectAgentsIn(ws, dir, envFile string) ([]File, error) {
	key := [3]string{ws, dir, envFile}
	if c.sum != nil && c.key == key && c.unchanged() {
		return slices.Clone(c.files), nil
	}
	c.sum, c.paths, c.files = nil, nil, nil
	// Stamped before reading: a change made while the files are read
	// shows at the next step as a difference from this stamp.
	paths, stamp, ok := agentStamp(dir)
	files, err := inspectAgentsIn(ws, dir, envFile)
	if err != nil {
		return nil, err
	}
	if ok {
		sum := sha256.Sum256(stamp)
		c.key, c.paths, c.sum, c.files = key, paths, &sum, slices.Clone(files)
	}
	return files, nil
}

// unchanged reports whether every stamped path is as it was.
func (c *AgentCache) unchanged() bool {
	var buf []byte
	for _, p := range c.paths {
		buf, _, _ = appendStat(buf, p, nil)
	}
	return sha256.Sum256(buf) == *c.sum
}

// agentStamp stamps what InspectAgentsIn(…, dir, …) reads (see
// AgentCache). ok is false when the stamp cannot be trusted: something in
// it changed within the racy margin, or it covers too much.
func agentStamp(dir string) (paths []string, stamp []byte, ok bool) {
	now := time.Now()
	recent, recentCoarse := now.Add(-agentRacyMargin).UnixNano(), now.Add(-agentRacyCoarse).UnixNano()
	racy := false
	racyCheck := func(st *unix.Stat_t) {
		r := recent
		if st.Mtim.Nsec == 0 && st.Ctim.Nsec == 0 {
			r = recentCoarse
		}
		if st.Mtim.Nano() >= r || st.Ctim.Nano() >= r {
			racy = true
		}
	}
	type found struct{ exists, isDir bool }
	seen := map[string]found{}
	// add stamps p, once.
	add := func(p string) found {
		if f, done := seen[p]; done {
			return f
		}
		var f found
		var isDir bool
		stamp, f.exists, isDir = appendStat(stamp, p, racyCheck)
		f.isDir = isDir
		seen[p] = f
		paths = append(paths, p)
		return f
	}
	// under stamps everything below an agent directory.
	var under func(d string) bool
	under = func(d string) bool {
		names, err := readDirNames(d)
		if err != nil {
			return false
		}
		for _, n := range names {
			p := filepath.Join(d, n)
			if add(p).isDir && !under(p) || len(paths) > agentStampMax {
				return false
			}
		}
		return true
	}
	// rel stamps the way to x/rel as far as it exists, and what is below
	// it when it is a directory.
	rel := func(x, rel string) bool {
		p := x
		comps := strings.Split(rel, "/")
		for i, c := range comps {
			p = filepath.Join(p, c)
			f := add(p)
			if !f.exists {
				return true
			}
			if i == len(comps)-1 && f.isDir {
				return under(p)
			}
		}
		return true
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, false
	}
	for _, p := range agentPaths {
		if !rel(dir, p.rel) {
			return nil, nil, false
		}
	}
	inParents := slices.Concat(parentPaths, firstEnvPaths)
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		for _, p := range inParents {
			if !rel(d, p.rel) {
				return nil, nil, false
			}
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if len(paths) > agentStampMax {
		return nil, nil, false
	}
	return paths, stamp, !racy
}

// appendStat appends p's name and lstat to buf and, for a symbolic link,
// the stat of what it leads to; each stat is also given to check (nil:
// none). exists is false when p does not exist; isDir reports a directory
// (a link to one is not).
func appendStat(buf []byte, p string, check func(*unix.Stat_t)) (_ []byte, exists, isDir bool) {
	buf = append(buf, p...)
	buf = append(buf, 0)
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return append(buf, 0xff), false, false
	}
	buf = appendStatT(buf, &st)
	if check != nil {
		check(&st)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		var to unix.Stat_t
		if err := unix.Stat(p, &to); err != nil {
			buf = append(buf, 0xfe)
		} else {
			buf = appendStatT(buf, &to)
			if check != nil {
				check(&to)
			}
		}
	}
	return buf, true, st.Mode&unix.S_IFMT == unix.S_IFDIR
}

func appendStatT(buf []byte, st *unix.Stat_t) []byte {
	for _, v := range []uint64{uint64(st.Mode), uint64(st.Uid), uint64(st.Size), st.Ino, st.Dev,
		uint64(st.Mtim.Nano()), uint64(st.Ctim.Nano())} {
		buf = binary.LittleEndian.AppendUint64(buf, v)
	}
	return buf
}

// readDirNames lists a directory's names, sorted.
func readDirNames(d string) ([]string, error) {
	f, err := os.Open(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}
