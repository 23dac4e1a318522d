package api

import (
	"context"
	"net/http"
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
}

// LandedRequest records a land loopctl made itself, in the user's clone,
// as RUN_LANDED (the payload's fields are the daemon's own land's).
type LandedRequest struct {
	Commit       string `json:"commit"`
	Mode         string `json:"mode"`
	Verified     bool   `json:"verified"`
	TestedCommit string `json:"tested_commit,omitempty"`
}

// LocalLand asks how to land a fleet run in the user's clone.
func (c *Client) LocalLand(ctx context.Context, ref RunRef) (LocalLand, error) {
	var out LocalLand
	err := c.do(ctx, http.MethodGet, ref.path("/land/local"), ref.query(), nil, &out)
	return out, err
}

// RecordLanded records a land made in the user's clone; the answer is the
// run as it is now. A run landed already is a conflict.
func (c *Client) RecordLanded(ctx context.Context, ref RunRef, req LandedRequest) (Run, error) {
	var out Run
	err := c.do(ctx, http.MethodPost, ref.path("/landed"), ref.query(), req, &out)
	return out, err
}
