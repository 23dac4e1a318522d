package trust

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/git"
)

// A fleet run is built from git: its API node never sees the clone it was
// started from, and its worker makes the run's worktree from the
// repository's base commit. So what the run's configuration and trust are
// made of is read as committed there, by loopctl (which sends it to the
// API node) and again by the worker (which checks that the commit holds
// exactly what was sent before anything of the repository runs). Both
// read it with ReadCommitted, so both read the same set of paths.

// Committed is one file of a repository as committed at a commit.
type Committed struct {
	Path string // relative to the repository's top level, with slashes
	Data []byte // the bytes checkout writes into a worktree
}

// Bounds of what ReadCommitted reads: a snapshot travels in one request.
const (
	maxSnapshotFiles = MaxSnapshotFiles
	maxSnapshotBytes = 4 << 20
)

// MaxSnapshotFiles is the most files a snapshot holds: ReadCommitted
// reads no more, and the API node stages no more (the bytes bound alone
// would let a request make hundreds of thousands of empty files there).
const MaxSnapshotFiles = 1000

// snapshotFileKeys are the config keys that name a file loopd reads when
// it creates or runs a run (the keys config checks exist): a relative
// value in .loop/config names a file of the repository, which the
// snapshot carries.
var snapshotFileKeys = []string{"prompt_file", "spec_file", "plan_file", "stop_file", "env_file", "tasks_file"}

// SnapshotRoots are the paths every snapshot covers, whether or not the
// commit has them: .loop/ (the config, the stop file), the workspace
// defaults PROMPT.md and .env, and the agents' own project files.
func SnapshotRoots() []string {
	roots := []string{".loop", "PROMPT.md", ".env"}
	for _, p := range AgentPaths() {
		roots = append(roots, strings.TrimSuffix(p, "/"))
	}
	return roots
}

// ReadCommitted reads, from the repository whose top level is dir, the
// files of commit under SnapshotRoots, extra (more paths relative to the
// top level: the files a start named) and the relative files
// .loop/config names there, sorted by path. The bytes are those checkout
// writes (git cat-file --filters: an eol or smudge attribute applies), so
// they hash as the worktree's files do. A symbolic link or a submodule
// among them is refused: what the worktree gets is then not these bytes.
func ReadCommitted(ctx context.Context, dir, commit string, extra []string) ([]Committed, error) {
	seen := map[string]bool{}
	var out []Committed
	total := 0
	read := func(paths []string) error {
		var want []string
		for _, p := range paths {
			if !seen[p] {
				seen[p] = true
				want = append(want, p)
			}
		}
		if len(want) == 0 {
			return nil
		}
		list, err := git.Cmd{Dir: dir}.Run(ctx, append([]string{"ls-tree", "-r", "-z", "--full-tree", commit, "--"}, want...)...)
		if err != nil {
			return fmt.Errorf("list %s in commit %s: %w", strings.Join(want, " "), short12(commit), err)
		}
		for rec := range bytes.SplitSeq(list, []byte{0}) {
			meta, name, ok := bytes.Cut(rec, []byte{'\t'})
			if !ok {
				continue
			}
			f := strings.Fields(string(meta)) // mode type object
			p := string(name)
			switch {
			case len(f) != 3:
				continue
			case slices.ContainsFunc(out, func(c Committed) bool { return c.Path == p }):
				continue
			case f[1] != "blob":
				return fmt.Errorf("%s: a %s in commit %s, not a file; loopd cannot vouch for what a worktree gets there", p, f[1], short12(commit))
			case f[0] == "120000":
				return fmt.Errorf("%s: a symbolic link in commit %s; loopd reads the files a run is made of only as regular files", p, short12(commit))
			}
			if len(out) >= maxSnapshotFiles {
				return fmt.Errorf("commit %s: more than %d files under %s: too many to send", short12(commit), maxSnapshotFiles, strings.Join(want, " "))
			}
			data, err := git.Cmd{Dir: dir}.Run(ctx, "cat-file", "--filters", commit+":"+p)
			if err != nil {
				return fmt.Errorf("read %s in commit %s: %w", p, short12(commit), err)
			}
			if total += len(data); len(data) > maxFileBytes || total > maxSnapshotBytes {
				return fmt.Errorf("%s in commit %s: the files a run is made of are larger than %d bytes together (%d bytes a file at most)", p, short12(commit), maxSnapshotBytes, maxFileBytes)
			}
			out = append(out, Committed{Path: p, Data: data})
		}
		return nil
	}
	for _, p := range extra {
		if !validSnapshotPath(p) {
			return nil, fmt.Errorf("%q is not a path inside the repository", p)
		}
	}
	if err := read(append(SnapshotRoots(), extra...)); err != nil {
		return nil, err
	}
	// Second round: what .loop/config names (its stop_file, prompt_file…).
	var named []string
	for _, c := range out {
		if c.Path != config.WorkspaceConfig {
			continue
		}
		entries, err := config.Parse(bytes.NewReader(c.Data), c.Path)
		if err != nil {
			break // reported by whoever loads it, with file and line
		}
		for _, e := range entries {
			if slices.Contains(snapshotFileKeys, e.Key) && e.Value != "" && validSnapshotPath(path.Clean(e.Value)) {
				named = append(named, path.Clean(e.Value))
			}
		}
	}
	if err := read(named); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Committed) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// validSnapshotPath reports whether p is a path a snapshot may hold: not
// empty, relative, with slashes, inside the top level, and nowhere in a
// .git: git never commits one, and a .git/config staged on the API node
// would be obeyed (core.fsmonitor runs a command) by any git run there.
func validSnapshotPath(p string) bool {
	if p == "" || p == "." || strings.ContainsRune(p, '\\') || path.IsAbs(p) || path.Clean(p) != p ||
		p == ".." || strings.HasPrefix(p, "../") || strings.ContainsRune(p, 0) {
		return false
	}
	for part := range strings.SplitSeq(p, "/") {
		if strings.EqualFold(part, ".git") {
			return false
		}
	}
	return true
}

// ValidSnapshotPath is validSnapshotPath for the API node, which stages
// a snapshot's files under a directory of its own.
func ValidSnapshotPath(p string) bool { return validSnapshotPath(p) }

// SnapshotMismatch compares what a commit holds (got, from ReadCommitted
// with the sent paths as extra) with the hashes sent (want: path to
// SHA-256). It returns one line per difference, none when they are the
// same files with the same bytes.
func SnapshotMismatch(got []Committed, want map[string]string) []string {
	var out []string
	have := map[string]string{}
	for _, c := range got {
		have[c.Path] = Sum(c.Data)
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		switch h, ok := have[p]; {
		case !ok:
			out = append(out, p+": sent, but not in the commit")
		case h != want[p]:
			out = append(out, fmt.Sprintf("%s: the commit's content (sha256 %s) is not the one sent (sha256 %s)", p, short12(h), short12(want[p])))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(have)) {
		if _, ok := want[p]; !ok {
			out = append(out, p+": in the commit, but not sent")
		}
	}
	return out
}
