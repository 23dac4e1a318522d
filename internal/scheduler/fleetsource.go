package scheduler

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// commitID is a full SHA-1 or SHA-256 object name.
var commitID = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// fleetSource records who created a run (req.CreatedBy, the name of the
// user token the daemon was called with) and where a fleet run comes from (req.RepoURL and
// req.BaseCommit, which loopctl read from the user's clone): both or
// neither, a full commit id, a URL of at most 2 kB with no control
// character (it ends up in git's command line on the workers). The base
// commit replaces the one isolate read from the workspace.
func fleetSource(run *storage.Run, req api.CreateRunRequest) error {
	run.CreatedBy = req.CreatedBy
	if req.RepoURL == "" && req.BaseCommit == "" {
		return nil
	}
	var problems []string
	switch {
	case req.RepoURL == "":
		problems = append(problems, "base_commit needs repo_url: the repository it is a commit of")
	case len(req.RepoURL) > 2048 || strings.ContainsFunc(req.RepoURL, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		problems = append(problems, "repo_url must be a URL of at most 2048 bytes without control characters")
	case strings.HasPrefix(req.RepoURL, "-"):
		problems = append(problems, fmt.Sprintf("repo_url %q must not start with '-' (git would read it as an option)", req.RepoURL))
	}
	if !commitID.MatchString(req.BaseCommit) {
		problems = append(problems, fmt.Sprintf("base_commit %q must be a full commit id (40 or 64 hex digits)", req.BaseCommit))
	}
	if len(problems) > 0 {
		return &InputError{Msg: "invalid fleet run source; nothing was created", Problems: problems}
	}
	run.RepoURL, run.BaseCommit = req.RepoURL, req.BaseCommit
	return nil
}
