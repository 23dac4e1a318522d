package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxFiles bounds the file list a Change keeps; the counts cover every
// file all the same.
const MaxFiles = 200

// bigFile is the size above which a file's diff is not computed: git
// counts it as binary (core.bigFileThreshold), so a step that wrote a huge
// generated file costs the hashing of it, never a line diff.
const bigFile = "4m"

// Change is what one step changed, from the change ledger.
type Change struct {
	Commit       string   // the ledger commit; "" when nothing changed
	FilesChanged int      // every changed file
	Insertions   int      // added lines (binary files count none)
	Deletions    int      // deleted lines
	BinaryFiles  int      // changed files git counts no lines for
	Files        []string // the first MaxFiles changed paths
}

// Ledger records what a run's steps change, one commit per implementation
// step (docs/workspaces.md):
//
//   - worktree runs: a commit on the run's branch, made in the run's
//     worktree with its own index;
//   - in-place runs: a snapshot commit under refs/loop/<run-id>/<iteration>,
//     made with a private index file (Index), so that the user's HEAD,
//     index, branches and stash never change.
//
// Commits are made with plumbing (write-tree, commit-tree, update-ref): no
// hook runs (as with git commit --no-verify, and no post-commit or
// signing prompt either, which would hang a daemon without a terminal).
// Every commit carries the trailer "Loop-Step: <run-id>/<seq>", so that
// recording a step again (after a daemon crash between the commit and its
// database record) finds the commit instead of making a second one.
type Ledger struct {
	Dir   string // where git runs: the run's worktree, or the in-place workspace
	Index string // in-place: the private index file; "" for a worktree (its own index)
	RunID string
	Short string // the run's short id, in commit messages
	// Epoch, for a fleet run, is the lease epoch its commits are made
	// under: each commit then also carries "Loop-Lease: <epoch>", by which
	// a push a worker made after it lost the run is told from a person's
	// (StalePush). 0: no such trailer.
	Epoch int64

	// Merging makes CommitWorktree look for a merge in progress (left by
	// MergeBase with conflicts) and complete it: the commit gets the
	// merged commit as its second parent. Only runs that merged their
	// base pay for the extra git command.
	Merging bool

	ident []string // identity variables when the user has none configured
	known bool

	q quiet // in-place: the workspace's state at the last recorded tree (see quiet.go)
	// The tree of a commit this Ledger made or read last: the next step's
	// "before" is almost always that commit, and its tree is then known
	// without a git command.
	lastCommit, lastTree string
}

// SnapshotRef is the ref of an in-place run's snapshot for an iteration
// (0: the workspace as the run found it).
func SnapshotRef(runID string, iteration int) string {
	return "refs/loop/" + runID + "/" + strconv.Itoa(iteration)
}

func (l *Ledger) trailer(seq int) string { return fmt.Sprintf("Loop-Step: %s/%d", l.RunID, seq) }

// trailers are the trailer lines of step seq's commit.
func (l *Ledger) trailers(seq int) string {
	if l.Epoch > 0 {
		return l.trailer(seq) + "\n" + leaseTrailer + strconv.FormatInt(l.Epoch, 10)
	}
	return l.trailer(seq)
}

func (l *Ledger) cmd(ctx context.Context) Cmd {
	c := Cmd{Dir: l.Dir}
	if l.Index != "" {
		c.Env = append(c.Env, "GIT_INDEX_FILE="+l.Index)
	}
	c.Env = append(c.Env, l.identity(ctx)...)
	return c
}

// identity returns author and committer variables for what the user has
// not configured (name or email), so that a machine without a git identity
// still records its ledger, as "loopd <loopd@localhost>".
func (l *Ledger) identity(ctx context.Context) []string {
	if l.known {
		return l.ident
	}
	l.known = true
	out, _ := Cmd{Dir: l.Dir}.Output(ctx, "config", "--get-regexp", `^user\.(name|email)$`)
	if !strings.Contains(out, "user.name ") && os.Getenv("GIT_AUTHOR_NAME") == "" {
		l.ident = append(l.ident, "GIT_AUTHOR_NAME=loopd", "GIT_COMMITTER_NAME=loopd")
	}
	if !strings.Contains(out, "user.email ") && os.Getenv("GIT_AUTHOR_EMAIL") == "" && os.Getenv("EMAIL") == "" {
		l.ident = append(l.ident, "GIT_AUTHOR_EMAIL=loopd@localhost", "GIT_COMMITTER_EMAIL=loopd@localhost")
	}
	return l.ident
}

// CommitWorktree records step seq of iteration n in a worktree run: it
// commits everything the step left in the worktree (tracked or not, as
// .gitignore allows) on the worktree's branch. before is the previous
// ledger point (the last recorded change, or the run's base commit); the
// change is counted from there, so commits the agent made itself count
// too. Nothing changed: a Change with no commit.
func (l *Ledger) CommitWorktree(ctx context.Context, seq, n int, before string) (Change, error) {
	c := l.cmd(ctx)
	// One command for HEAD, its tree and its message (each git command
	// costs a process start: see BenchmarkSpawn).
	out, err := c.Run(ctx, "log", "-1", "--format=%H%n%T%n%B", "HEAD")
	if err != nil {
		return Change{}, fmt.Errorf("ledger: read HEAD: %w", err)
	}
	head, rest, _ := bytes.Cut(out, []byte("\n"))
	headTree, body, _ := bytes.Cut(rest, []byte("\n"))
	after := string(head)
	mergeHead := ""
	if l.Merging {
		mergeHead, _ = c.Output(ctx, "rev-parse", "-q", "--verify", "MERGE_HEAD")
	}
	if !hasLine(body, l.trailer(seq)) {
		if _, err := c.Run(ctx, "add", "-A"); err != nil {
			return Change{}, fmt.Errorf("ledger: %w", err)
		}
		tree, err := c.Output(ctx, "write-tree")
		if err != nil {
			return Change{}, fmt.Errorf("ledger: %w", err)
		}
		// A merge in progress is completed even when the resolution
		// kept the branch's tree: the commit records the base as merged.
		if tree != string(headTree) || mergeHead != "" {
			msg := fmt.Sprintf("loop %s: iteration %d\n\n%s\n", l.Short, n, l.trailers(seq))
			args := []string{"commit-tree", tree, "-p", after}
			if mergeHead != "" {
				args = append(args, "-p", mergeHead)
			}
			commit, err := c.Output(ctx, append(args, "-m", msg)...)
			if err != nil {
				return Change{}, fmt.Errorf("ledger: %w", err)
			}
			// Compare-and-set: the branch moves only from the HEAD read above.
			if _, err := c.Run(ctx, "update-ref", "-m", "loopd: iteration "+strconv.Itoa(n), "HEAD", commit, after); err != nil {
				return Change{}, fmt.Errorf("ledger: %w", err)
			}
			after = commit
		}
	}
	if mergeHead != "" && isAncestor(ctx, c, mergeHead, after) {
		// Completed (by this commit, or by one made before a crash):
		// the merge state goes, the files and the index stay.
		if _, err := c.Run(ctx, "merge", "--quit"); err != nil {
			return Change{}, fmt.Errorf("ledger: %w", err)
		}
	}
	if before == "" {
		before = string(head)
	}
	if after == before {
		return Change{Files: []string{}}, nil
	}
	return l.stat(ctx, before, after)
}

// Snapshot records step seq of iteration n of an in-place run: a commit of
// the workspace's files (tracked or not, as .gitignore allows) whose parent
// is before (the previous snapshot; the baseline for the first), kept under
// SnapshotRef(run, n). It is built in the private index, so the user's
// HEAD, index and branches do not change. Nothing changed since before: a
// Change with no commit, and no ref. A step recorded before (by a daemon
// that died before its database record) is found, not recorded twice.
func (l *Ledger) Snapshot(ctx context.Context, seq, n int, before string) (Change, error) {
	return l.snapshot(ctx, seq, n, before, false)
}

// SnapshotNew is Snapshot for a step the caller knows was never recorded
// (a step this daemon started and watched to its end): it does not look
// for an earlier record, and when the workspace is exactly as this Ledger
// last recorded it (see quiet.go), it runs no git at all.
func (l *Ledger) SnapshotNew(ctx context.Context, seq, n int, before string) (Change, error) {
	return l.snapshot(ctx, seq, n, before, true)
}

func (l *Ledger) snapshot(ctx context.Context, seq, n int, before string, fresh bool) (Change, error) {
	c := l.cmd(ctx)
	ref := SnapshotRef(l.RunID, n)
	if !fresh {
		// A snapshot of this step already (recorded before a crash): one
		// command reads the ref's commit and message, and fails when there
		// is no such ref.
		out, err := c.Run(ctx, "log", "-1", "--format=%H%n%B", ref, "--")
		if id, body, _ := bytes.Cut(out, []byte("\n")); err == nil && hasLine(body, l.trailer(seq)) {
			l.q.point = ""
			existing := string(id)
			if before == "" {
				before, _ = c.Output(ctx, "rev-parse", "--verify", "-q", existing+"^1")
			}
			if before == "" || existing == before {
				return Change{Commit: existing, Files: []string{}}, nil
			}
			return l.stat(ctx, before, existing)
		}
	}
	// The workspace's state, taken before git add reads it: a change
	// made meanwhile makes the next signature differ.
	var sig []byte
	trusted := false
	if l.quietInit(ctx) {
		sig, trusted = l.quietSig()
		if fresh && trusted && before != "" && before == l.q.point && bytes.Equal(sig, l.q.sig) {
			return Change{Files: []string{}}, nil
		}
	}
	l.q.point = "" // no trusted record until this snapshot is made
	tree, err := l.writeTree(ctx)
	if err != nil {
		return Change{}, err
	}
	if before == "" {
		before, _ = c.Output(ctx, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	}
	if before != "" {
		if prevTree, err := l.treeOf(ctx, before); err == nil && prevTree == tree {
			l.remember(before, tree, sig, trusted)
			return Change{Files: []string{}}, nil
		}
	}
	msg := fmt.Sprintf("loop %s: iteration %d\n\n%s\n", l.Short, n, l.trailers(seq))
	commit, err := l.commitTree(ctx, tree, before, msg)
	if err != nil {
		return Change{}, err
	}
	if _, err := c.Run(ctx, "update-ref", ref, commit); err != nil {
		return Change{}, fmt.Errorf("ledger: %w", err)
	}
	l.remember(commit, tree, sig, trusted)
	if before == "" {
		before, err = c.Output(ctx, "hash-object", "-t", "tree", "--stdin")
		if err != nil {
			return Change{}, fmt.Errorf("ledger: %w", err)
		}
	}
	return l.stat(ctx, before, commit)
}

// treeOf is the tree of commit, known without git when it is the commit
// this Ledger recorded or read last.
func (l *Ledger) treeOf(ctx context.Context, commit string) (string, error) {
	if commit == l.lastCommit && l.lastTree != "" {
		return l.lastTree, nil
	}
	tree, err := Cmd{Dir: l.Dir}.Output(ctx, "rev-parse", commit+"^{tree}")
	if err != nil {
		return "", err
	}
	l.lastCommit, l.lastTree = commit, tree
	return tree, nil
}

// remember notes that the workspace held commit's tree when sig was
// taken (trusted: see quietSig).
func (l *Ledger) remember(commit, tree string, sig []byte, trusted bool) {
	l.lastCommit, l.lastTree = commit, tree
	if trusted {
		l.q.point, l.q.sig = commit, sig
	}
}

// Baseline records the workspace as an in-place run found it, under
// SnapshotRef(run, 0), and returns that commit; an existing baseline is
// kept. Its parent is HEAD (none in a repository without a commit).
func (l *Ledger) Baseline(ctx context.Context) (string, error) {
	c := l.cmd(ctx)
	ref := SnapshotRef(l.RunID, 0)
	if existing, err := c.Output(ctx, "rev-parse", "--verify", "-q", ref+"^{commit}"); err == nil {
		return existing, nil
	}
	var sig []byte
	trusted := false
	if l.quietInit(ctx) {
		sig, trusted = l.quietSig()
	}
	l.q.point = ""
	tree, err := l.writeTree(ctx)
	if err != nil {
		return "", err
	}
	head, _ := c.Output(ctx, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	commit, err := l.commitTree(ctx, tree, head, fmt.Sprintf("loop %s: baseline\n", l.Short))
	if err != nil {
		return "", err
	}
	if _, err := c.Run(ctx, "update-ref", ref, commit); err != nil {
		return "", fmt.Errorf("ledger: %w", err)
	}
	l.remember(commit, tree, sig, trusted)
	return commit, nil
}

// writeTree stages the workspace's files into the private index and writes
// its tree. The private index starts as a copy of the user's (so git's
// stat cache makes staging cost only the changed files); it is updated
// in place afterwards, and the user's index is only ever read.
func (l *Ledger) writeTree(ctx context.Context) (string, error) {
	c := l.cmd(ctx)
	if _, err := os.Stat(l.Index); errors.Is(err, os.ErrNotExist) {
		if err := l.seedIndex(ctx); err != nil {
			return "", err
		}
	}
	if _, err := c.Run(ctx, "add", "-A"); err != nil {
		// A private index that git cannot use (a split index copied
		// without its shared part, a truncated file) is rebuilt once.
		os.Remove(l.Index)
		if err := l.seedIndexFromHead(ctx); err != nil {
			return "", err
		}
		if _, err := c.Run(ctx, "add", "-A"); err != nil {
			return "", fmt.Errorf("ledger: %w", err)
		}
	}
	tree, err := c.Output(ctx, "write-tree")
	if err != nil {
		return "", fmt.Errorf("ledger: %w", err)
	}
	return tree, nil
}

func (l *Ledger) seedIndex(ctx context.Context) error {
	userIndex, err := Cmd{Dir: l.Dir}.Output(ctx, "rev-parse", "--path-format=absolute", "--git-path", "index")
	if err == nil {
		if err := copyFile(userIndex, l.Index); err == nil {
			return nil
		}
	}
	return l.seedIndexFromHead(ctx)
}

func (l *Ledger) seedIndexFromHead(ctx context.Context) error {
	c := l.cmd(ctx)
	if _, err := c.Run(ctx, "rev-parse", "--verify", "-q", "HEAD^{commit}"); err != nil {
		return nil // no commit yet: git add starts from an empty index
	}
	if _, err := c.Run(ctx, "read-tree", "HEAD"); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

func (l *Ledger) commitTree(ctx context.Context, tree, parent, msg string) (string, error) {
	args := []string{"commit-tree", tree}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	commit, err := l.cmd(ctx).Output(ctx, append(args, "-m", msg)...)
	if err != nil {
		return "", fmt.Errorf("ledger: %w", err)
	}
	return commit, nil
}

// hasLine reports whether text holds line as a whole line.
func hasLine(text []byte, line string) bool {
	for l := range bytes.SplitSeq(text, []byte("\n")) {
		if string(l) == line {
			return true
		}
	}
	return false
}

// stat counts the change between two commits: files, added and deleted
// lines (binary and big files count as changed, with no lines). Only
// numstat output is read, never a diff.
func (l *Ledger) stat(ctx context.Context, from, to string) (Change, error) {
	out, err := Cmd{Dir: l.Dir}.Run(ctx, "-c", "core.bigFileThreshold="+bigFile,
		"diff-tree", "-r", "-z", "--numstat", "--no-renames", "--no-commit-id", from, to)
	if err != nil {
		return Change{}, fmt.Errorf("ledger: %w", err)
	}
	ch := parseNumstat(out)
	ch.Commit = to
	return ch, nil
}

// parseNumstat reads `git diff-tree -z --numstat`: per file
// "added<TAB>deleted<TAB>path<NUL>", "-" for binary counts.
func parseNumstat(out []byte) Change {
	ch := Change{Files: []string{}}
	for len(out) > 0 {
		i := bytes.IndexByte(out, 0)
		if i < 0 {
			i = len(out)
		}
		rec := out[:i]
		out = out[min(i+1, len(out)):]
		add, rest, ok1 := bytes.Cut(rec, []byte("\t"))
		del, path, ok2 := bytes.Cut(rest, []byte("\t"))
		if !ok1 || !ok2 {
			continue
		}
		ch.FilesChanged++
		if string(add) == "-" && string(del) == "-" {
			ch.BinaryFiles++
		}
		if n, err := strconv.Atoi(string(add)); err == nil {
			ch.Insertions += n
		}
		if n, err := strconv.Atoi(string(del)); err == nil {
			ch.Deletions += n
		}
		if len(ch.Files) < MaxFiles {
			ch.Files = append(ch.Files, string(path))
		}
	}
	return ch
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	return out.Close()
}
