package api

import (
	"context"
	"net/http"
	"net/url"
)

// CodeUntrusted refuses a run whose workspace files name commands or
// environment the user has not trusted (or changed since): `loopctl
// trust` reviews and trusts them. Details lists each file and what
// changed.
const CodeUntrusted ErrorCode = "untrusted"

// TrustRequest asks the daemon to trust a workspace's files.
type TrustRequest struct {
	Workspace string `json:"workspace"` // absolute
	// Show records nothing: the report says what would be trusted, with
	// the agents' command lines (loopctl trust --show).
	Show bool `json:"show,omitempty"`
	// TasksFile is a backlog's task list (absolute) to trust with the
	// workspace's files (loopctl trust --tasks FILE): a list that names
	// commands is under trust like .loop/config.
	TasksFile string `json:"tasks_file,omitempty"`
	// Snapshot (loopctl through LOOPD_URL) holds the clone's files as
	// committed at its HEAD: they are judged and trusted instead of
	// Workspace's, which the API node never reads.
	Snapshot *Snapshot `json:"snapshot,omitempty"`
}

// TrustAgent is the command line loopd runs for an agent in a workspace.
type TrustAgent struct {
	Agent   string `json:"agent"`
	Command string `json:"command"`
	// Default marks the workspace's own agent (start with no --set agent).
	Default bool `json:"default,omitempty"`
}

// TrustCommand is one command a trusted file names.
type TrustCommand struct {
	Key     string `json:"key"` // config key, or a custom_script's JSON path in a stop file
	Command string `json:"command"`
}

// TrustFile is one workspace file that needs trust and what it sets.
type TrustFile struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"` // config, stop, env, agent
	SHA256 string `json:"sha256"`
	// Status is the file's state before this trust: "new", "changed" or
	// "trusted" (unchanged).
	Status string `json:"status"`
	// PreviouslyTrustedAt is when the earlier content was trusted
	// (changed, trusted); null for new files.
	PreviouslyTrustedAt *Time          `json:"previously_trusted_at"`
	Changes             []string       `json:"changes,omitempty"`
	Commands            []TrustCommand `json:"commands"`
	Env                 []string       `json:"env"`      // variable names only, never values
	Settings            []string       `json:"settings"` // config keys that are not commands
	// Values are the settings' entries with their values, in file order.
	Values []TrustSetting `json:"values"`
	// EnvShown are the env file's variables that steer which program runs
	// or where it connects (PATH, LD_PRELOAD, *_BASE_URL…), with their
	// values; other env values are never shown.
	EnvShown []TrustSetting `json:"env_shown"`
	// Agent is the agent CLI that reads an agent file (claude, gemini,
	// codex) and runs what it names; empty for loopd's own files.
	Agent string `json:"agent,omitempty"`
	// Files are an agent directory's files (.claude/skills…), relative to
	// it: its hash covers them all.
	Files []string `json:"files,omitempty"`
	// Parent says the agent CLI reads the file from a parent directory
	// of the workspace (it walks up to /).
	Parent bool `json:"parent,omitempty"`
}

// TrustSetting is one config entry that is not a command, with its value.
type TrustSetting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// TrustReport answers POST /v1/trust: the files now trusted.
type TrustReport struct {
	Workspace string      `json:"workspace"`
	TrustedAt Time        `json:"trusted_at"`
	Files     []TrustFile `json:"files"`
	// Recorded is false for a Show request: nothing was trusted.
	Recorded bool `json:"recorded"`
	// Agents (Show only) are the agent command lines a run would run.
	Agents []TrustAgent `json:"agents,omitempty"`
}

// RevokeReport answers DELETE /v1/trust: the files no longer trusted.
type RevokeReport struct {
	Workspace string   `json:"workspace"`
	Revoked   []string `json:"revoked"`
}

// Trust records the content of a workspace's files as trusted.
func (c *Client) Trust(ctx context.Context, req TrustRequest) (TrustReport, error) {
	var rep TrustReport
	err := c.do(ctx, http.MethodPost, "/v1/trust", nil, req, &rep)
	return rep, err
}

// Revoke forgets what was trusted in a workspace.
func (c *Client) Revoke(ctx context.Context, workspace string) (RevokeReport, error) {
	var rep RevokeReport
	err := c.do(ctx, http.MethodDelete, "/v1/trust", url.Values{"workspace": {workspace}}, nil, &rep)
	return rep, err
}
