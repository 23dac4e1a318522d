package git

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Source is where a fleet run comes from: a clone's origin and its HEAD.
type Source struct {
	RepoURL    string // remote.origin.url
	BaseCommit string // HEAD, a commit some origin branch contains
}

// SourceError is a clone a fleet cannot start a run from; Hint says what
// to do.
type SourceError struct {
	Dir, Msg, Hint string
}

func (e *SourceError) Error() string {
	if e.Hint == "" {
		return e.Dir + ": " + e.Msg
	}
	return e.Dir + ": " + e.Msg + "\n  " + e.Hint
}

// FleetSource reads the source of a fleet run from the clone at dir: its
// origin's URL and its HEAD, which must be on the remote as far as the
// clone knows (a remote-tracking branch of origin contains it), since the
// fleet's workers fetch it from there. A local path as origin is refused:
// a worker on another machine cannot reach it. Nothing is fetched.
func FleetSource(ctx context.Context, dir string) (Source, error) {
	c := Cmd{Dir: dir}
	if _, err := TopLevel(ctx, dir); err != nil {
		if errors.Is(err, ErrNotRepository) {
			return Source{}, &SourceError{Dir: dir, Msg: "not a git clone: a fleet runs from a repository its workers can fetch",
				Hint: "clone the repository, or start the run on your own daemon (unset LOOPD_URL)"}
		}
		return Source{}, err
	}
	url, err := c.Output(ctx, "config", "--get", "remote.origin.url")
	if err != nil || strings.TrimSpace(url) == "" {
		return Source{}, &SourceError{Dir: dir, Msg: "the clone has no origin remote: the fleet's workers fetch the run's commit from origin",
			Hint: "git remote add origin URL && git push -u origin HEAD"}
	}
	url = strings.TrimSpace(url)
	if strings.HasPrefix(url, "/") || strings.HasPrefix(url, ".") {
		return Source{}, &SourceError{Dir: dir, Msg: fmt.Sprintf("origin is a local path (%s), which the fleet's workers cannot reach", url),
			Hint: "use a URL the workers can fetch (https://, ssh://, git@host:…, or file:// on a shared file system)"}
	}
	head, err := c.Output(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil || head == "" {
		return Source{}, &SourceError{Dir: dir, Msg: "the clone has no commit yet", Hint: "commit, then git push"}
	}
	on, err := c.Output(ctx, "for-each-ref", "--contains", head, "--count=1", "--format=%(refname)", "refs/remotes/origin/")
	if err != nil {
		return Source{}, err
	}
	if strings.TrimSpace(on) == "" {
		return Source{}, &SourceError{Dir: dir,
			Msg:  fmt.Sprintf("HEAD %s is not on origin (%s): the fleet's workers could not fetch it", short(head), url),
			Hint: "git push (or git fetch, if it is there already), then start again"}
	}
	return Source{RepoURL: url, BaseCommit: head}, nil
}
