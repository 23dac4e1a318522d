package git

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/loopd/loopd/internal/shquote"
)

// Refusals of a push (loopctl land --push); like a land's, each leaves
// the user's checkout and the remote as they were.
const (
	RefusedNoRemote       RefusalKind = "no_remote"            // no remote to push to
	RefusedRemoteMoved    RefusalKind = "remote_moved"         // the remote branch is not where loopd left it (the lease failed)
	RefusedPushFailed     RefusalKind = "push_failed"          // git push failed (network, authentication, a hook of the remote)
	RefusedUntrustedPRCmd RefusalKind = "untrusted_pr_command" // pr_command comes from a workspace file the user has not trusted
	RefusedBadConfig      RefusalKind = "bad_config"           // the config pr_command is read from is invalid
)

// Remote is where a push goes: the remote's name, when it is one of the
// repository's remotes ("" for a URL or path given as it is), and the URL
// git pushes to.
type Remote struct {
	Name string
	URL  string
}

// String names the remote for a message: its name and URL, or the URL.
func (r Remote) String() string {
	if r.Name == "" {
		return r.URL
	}
	return r.Name + " (" + r.URL + ")"
}

// ResolveRemote finds where to push from checkout: arg when given (a
// remote of the repository, else a URL or a path), else the remote of
// baseBranch's upstream, else origin. A remote that cannot be found is a
// *Refusal naming what was tried.
func ResolveRemote(ctx context.Context, checkout, baseBranch, arg string) (Remote, error) {
	co := Cmd{Dir: checkout}
	if strings.HasPrefix(arg, "-") {
		// git would read it as an option (--receive-pack=… runs a command).
		return Remote{}, &Refusal{Kind: RefusedNoRemote, Message: fmt.Sprintf("remote %q starts with '-': name a remote, a URL or a path", arg)}
	}
	name := arg
	if name == "" {
		name = "origin"
		if up, err := co.Output(ctx, "config", "--get", "branch."+baseBranch+".remote"); err == nil && up != "" && up != "." {
			name = up // "." is the repository itself: a local upstream, not a remote
		}
	}
	if url, err := co.Output(ctx, "remote", "get-url", "--push", "--", name); err == nil && url != "" {
		return Remote{Name: name, URL: url}, nil
	}
	if arg != "" {
		switch {
		case strings.Contains(arg, "://") || filepath.IsAbs(arg) || scpLike(arg):
			return Remote{URL: arg}, nil
		case strings.Contains(arg, "/") || arg == "." || arg == "..":
			// The daemon has no working directory of the user's to
			// resolve it against (loopctl sends an existing path absolute).
			return Remote{}, &Refusal{Kind: RefusedNoRemote, Message: fmt.Sprintf("remote %q is a relative path: give it absolute", arg)}
		}
		return Remote{}, &Refusal{Kind: RefusedNoRemote,
			Message: fmt.Sprintf("the repository %s has no remote named %q: name one of its remotes (git remote -v lists them), a URL or a path", checkout, arg)}
	}
	return Remote{}, &Refusal{Kind: RefusedNoRemote,
		Message: fmt.Sprintf("%s has no upstream remote and the repository %s has no remote named origin: name where to push (loopctl land RUN --push REMOTE)", baseBranch, checkout),
		Hand:    []string{"git -C " + shquote.Quote(checkout) + " remote add origin <url>   # then land --push again"}}
}

// scpLike reports whether s is git's scp-like remote syntax,
// [user@]host:path: a colon before any slash.
func scpLike(s string) bool {
	i := strings.IndexByte(s, ':')
	return i > 0 && !strings.Contains(s[:i], "/")
}

// RemoteBranch returns the commit branch points to on remote ("" when the
// remote has no such branch). It reads the remote (git ls-remote): a
// network call when the remote is elsewhere.
func RemoteBranch(ctx context.Context, dir string, remote Remote, branch string) (string, error) {
	ref := "refs/heads/" + branch
	out, err := Cmd{Dir: dir, Group: true}.Output(ctx, "ls-remote", "--", remote.URL, ref)
	if err != nil {
		return "", fmt.Errorf("read %s on %s: %w", branch, remote, err)
	}
	for line := range strings.SplitSeq(out, "\n") {
		if commit, name, ok := strings.Cut(line, "\t"); ok && name == ref {
			return commit, nil
		}
	}
	return "", nil
}

// PushInput says what to push where.
type PushInput struct {
	Dir    string // a directory of the repository (the user's checkout)
	Remote Remote
	Branch string // the branch on the remote, refs/heads/<Branch>
	Commit string // what the branch is set to
	// Expect is the commit the remote branch must point to for the push
	// to go ahead ("" — it must not exist): --force-with-lease on it, so
	// that work someone else pushed there is never overwritten.
	Expect string
}

// Push sets Branch on the remote to Commit, with a lease on Expect. It
// pushes to the remote's URL, not its name, so that git writes no
// remote-tracking ref (and so takes no lock) in the user's repository,
// and it runs no pre-push hook: a run's worktree shares the repository's
// hooks directory, and a hook the agent wrote there must not run with the
// user's push credentials. upToDate says the remote branch was at Commit
// already. A lease that fails is a *Refusal of kind remote_moved; other
// failures are a *Refusal of kind push_failed.
//
// The push belongs to ctx: ended, git is killed. That leaves nothing
// behind here (a push to a URL writes nothing in the repository), but the
// remote may or may not have taken it: the error is then ctx's, not a
// *Refusal, and the caller must find out from the remote (RemoteBranch).
func Push(ctx context.Context, in PushInput) (upToDate bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	ref := "refs/heads/" + in.Branch
	out, err := Cmd{Dir: in.Dir, Group: true}.Run(ctx, "push", "--porcelain", "--no-verify",
		"--force-with-lease="+ref+":"+in.Expect, "--", in.Remote.URL, in.Commit+":"+ref)
	if err == nil {
		// --porcelain: "=" flags a ref that was up to date.
		for line := range strings.SplitSeq(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "=" && strings.HasSuffix(f[1], ":"+ref) {
				return true, nil
			}
		}
		return false, nil
	}
	if ctx.Err() != nil {
		return false, fmt.Errorf("push of %s to %s cut short, the remote may or may not have taken it: %w", in.Branch, in.Remote, ctx.Err())
	}
	var ge *Error
	if !errors.As(err, &ge) {
		return false, fmt.Errorf("push %s to %s: %w", in.Branch, in.Remote, err)
	}
	if strings.Contains(string(out), "(stale info)") || strings.Contains(ge.Stderr, "(stale info)") {
		was := "not exist"
		if in.Expect != "" {
			was = "be at " + short(in.Expect) + ", where loopd last pushed it"
		}
		return false, &Refusal{Kind: RefusedRemoteMoved,
			Message: fmt.Sprintf("%s on %s is not where loopd expected it (it should %s): someone else pushed there; nothing was pushed, so as not to overwrite their work",
				in.Branch, in.Remote, was),
			Hand: []string{"git fetch " + shquote.Quote(in.Remote.URL) + " " + shquote.Quote(in.Branch) + "   # see what is there",
				"git push " + shquote.Quote(in.Remote.URL) + " " + shquote.Quote(in.Branch) + ":<another-branch>   # or push the run's work under another name"}}
	}
	msg := strings.TrimSpace(ge.Stderr)
	if msg == "" {
		msg = strings.TrimSpace(string(out))
	}
	return false, &Refusal{Kind: RefusedPushFailed,
		Message: fmt.Sprintf("git push of %s to %s failed: %s", in.Branch, in.Remote, msg),
		Hand:    []string{"git -C " + shquote.Quote(in.Dir) + " push " + shquote.Quote(in.Remote.URL) + " " + shquote.Quote(in.Branch)}}
}
