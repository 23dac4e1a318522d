package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
)

// DiffOptions selects what StreamDiff prints.
type DiffOptions struct {
	Stat  bool // `git diff --stat` instead of the patch
	Color bool // colored for a terminal
}

// StreamDiff writes the diff from..to (commits) of the repository at dir to
// w as git prints it, never holding it in memory: a huge diff costs the
// daemon a pipe buffer, not its size.
func StreamDiff(ctx context.Context, dir, from, to string, opts DiffOptions, w io.Writer) error {
	args := []string{"diff", "--no-ext-diff", "--no-textconv"}
	if opts.Color {
		args = append(args, "--color=always")
	} else {
		args = append(args, "--no-color")
	}
	if opts.Stat {
		args = append(args, "--stat")
	}
	args = append(args, from, to, "--")
	return Cmd{Dir: dir}.streamTo(ctx, w, args...)
}

// streamTo runs git with its stdout written straight to w; stderr is
// captured (bounded) for the error.
func (c Cmd) streamTo(ctx context.Context, w io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = c.Dir
	cmd.Env = append(baseEnv(), c.Env...)
	var stderr capped
	stderr.limit = 64 << 10
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Run(); err != nil {
		code := -1
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
		return &Error{Args: args, Code: code, Stderr: stderr.String(), Err: err}
	}
	return nil
}

// FileStat is one file's share of a diff; Binary files count no lines.
type FileStat struct {
	Path       string `json:"path"`
	Insertions int    `json:"insertions"`
	Deletions  int    `json:"deletions"`
	Binary     bool   `json:"binary,omitempty"`
}

// DiffStat is the size of a diff, from `git diff --numstat`.
type DiffStat struct {
	FilesChanged int        `json:"files_changed"`
	Insertions   int        `json:"insertions"`
	Deletions    int        `json:"deletions"`
	Files        []FileStat `json:"files"`
}

// maxStatFiles caps the files a DiffStat lists; the totals count them all.
const maxStatFiles = 10_000

// Stat measures the diff from..to without reading its content into
// memory (git counts; the daemon reads one line per file).
func Stat(ctx context.Context, dir, from, to string) (DiffStat, error) {
	out, err := Cmd{Dir: dir}.Run(ctx, "diff", "--no-ext-diff", "--no-textconv", "--numstat", "-z", "--no-renames", from, to, "--")
	if err != nil {
		return DiffStat{}, fmt.Errorf("diff --numstat %s..%s: %w", short(from), short(to), err)
	}
	return parseNumstatZ(string(out)), nil
}

// parseNumstatZ reads `--numstat -z` (without renames): "ins\tdel\tpath\0"
// per file, "-\t-\t" for a binary file.
func parseNumstatZ(out string) DiffStat {
	var st DiffStat
	for rec := range strings.SplitSeq(out, "\x00") {
		ins, rest, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		del, path, ok := strings.Cut(rest, "\t")
		if !ok {
			continue
		}
		f := FileStat{Path: path}
		if ins == "-" && del == "-" {
			f.Binary = true
		} else {
			f.Insertions, _ = strconv.Atoi(ins)
			f.Deletions, _ = strconv.Atoi(del)
		}
		st.FilesChanged++
		st.Insertions += f.Insertions
		st.Deletions += f.Deletions
		if len(st.Files) < maxStatFiles {
			st.Files = append(st.Files, f)
		}
	}
	return st
}

// CommitExists reports whether commit names a commit in the repository at dir.
func CommitExists(ctx context.Context, dir, commit string) bool {
	if commit == "" {
		return false
	}
	_, err := Cmd{Dir: dir}.Run(ctx, "cat-file", "-e", commit+"^{commit}")
	return err == nil
}

// Resolve returns the commit a revision names in the repository at dir.
func Resolve(ctx context.Context, dir, rev string) (string, error) {
	return Cmd{Dir: dir}.Output(ctx, "rev-parse", "-q", "--verify", rev+"^{commit}")
}

// FirstParent returns commit's first parent, or the empty tree when it is a
// root commit, so a diff against it shows the commit's whole content.
func FirstParent(ctx context.Context, dir, commit string) (string, error) {
	if p, err := Resolve(ctx, dir, commit+"^1"); err == nil {
		return p, nil
	}
	if !CommitExists(ctx, dir, commit) {
		return "", fmt.Errorf("commit %s is not in the repository at %s", short(commit), dir)
	}
	return emptyTree(ctx, dir)
}

func emptyTree(ctx context.Context, dir string) (string, error) {
	return Cmd{Dir: dir, Stdin: []byte{}}.Output(ctx, "hash-object", "-t", "tree", "--stdin")
}
