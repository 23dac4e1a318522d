package api

import (
	"context"
	"net/http"
	"strconv"
)

// LocalLand is what loopctl needs from an API node to land a fleet run in
// the user's own clone (loopctl land through LOOPD_URL): the run's
// verification as it was trusted when the run was created, read from the
// run's frozen config, never from the clone.
type LocalLand struct {
	// VerifyCommands are the run's verify_command, in order (none: the
	// run has no verification).
	VerifyCommands []string `json:"verify_commands"`
	// EnvFile is the run's env_file relative to its workspace ("" when
	// the run loads none), and EnvSHA256 the content the user trusted
	// ("" when no content of it is trusted): loopctl loads the clone's
	// file for the verification only when its bytes hash to that.
	EnvFile   string `json:"env_file,omitempty"`
	EnvSHA256 string `json:"env_sha256,omitempty"`
	// EnvGuarded says the workspace picked the env file (not the user):
	// it loads only with EnvSHA256's content, or when it sets nothing.
	EnvGuarded bool `json:"env_guarded,omitempty"`
	// LastVerified says the run's own last verification passed on its
	// last commit, TestedCommit (what stands when the base has not moved).
	LastVerified bool   `json:"last_verified"`
	TestedCommit string `json:"tested_commit,omitempty"`
	// Iteration is the run's last iteration (LOOP_ITERATION of the
	// verification).
	Iteration int `json:"iteration"`
	// ConfigSHA256 is the content of the workspace's .loop/config the
	// user trusted ("" when none): a pr_command the clone's .loop/config
	// sets runs (land --push) only when that file's bytes hash to it.
	ConfigSHA256 string `json:"config_sha256,omitempty"`
	// PRTitle and PRBody are what a push hands to pr_command
	// (LOOP_TITLE, LOOP_BODY_FILE), as the daemon's own push would, for
	// the verification given in the request (?verified, ?tested_commit,
	// ?note, ?push=1).
	PRTitle string `json:"pr_title,omitempty"`
	PRBody  string `json:"pr_body,omitempty"`
}

// LocalLandQuery asks, with LocalLand, for the body of a pull request
// about a push verified (or not) as said.
type LocalLandQuery struct {
	Push         bool
	Verified     bool
	TestedCommit string
	Note         string
}

// LandedRequest records a land loopctl made itself, in the user's clone,
// as RUN_LANDED (the payload's fields are the daemon's own land's).
type LandedRequest struct {
	Commit       string `json:"commit"`
	Mode         string `json:"mode"`
	Verified     bool   `json:"verified"`
	TestedCommit string `json:"tested_commit,omitempty"`
	// A push (mode "push"): where the branch went, and what pr_command
	// did; recorded without landed_commit (the base did not move).
	Push      *PushResult      `json:"push,omitempty"`
	PRURL     string           `json:"pr_url,omitempty"`
	PRCommand *PRCommandResult `json:"pr_command,omitempty"`
}

// LocalLand asks how to land a fleet run in the user's clone.
func (c *Client) LocalLand(ctx context.Context, ref RunRef, lq LocalLandQuery) (LocalLand, error) {
	var out LocalLand
	q := ref.query()
	if lq.Push {
		q.Set("push", "1")
		q.Set("verified", strconv.FormatBool(lq.Verified))
		q.Set("tested_commit", lq.TestedCommit)
		q.Set("note", lq.Note)
	}
	err := c.do(ctx, http.MethodGet, ref.path("/land/local"), q, nil, &out)
	return out, err
}

// RecordLanded records a land made in the user's clone; the answer is the
// run as it is now. A run landed already is a conflict.
func (c *Client) RecordLanded(ctx context.Context, ref RunRef, req LandedRequest) (Run, error) {
	var out Run
	err := c.do(ctx, http.MethodPost, ref.path("/landed"), ref.query(), req, &out)
	return out, err
}
