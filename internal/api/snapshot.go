package api

// Snapshot is what a fleet's API node needs of a clone it cannot see:
// the files a run's configuration and trust are made of, as committed at
// the run's base commit (never the clone's working tree). loopctl sends
// it through LOOPD_URL with `start` and `trust`; the API node validates
// and judges trust on these bytes alone, and the worker that makes the
// run's worktree checks that the commit holds exactly them before
// anything of the repository runs.
type Snapshot struct {
	// Commit is the commit the files were read at (the run's base
	// commit): a full object id.
	Commit string `json:"commit"`
	// Files are the files, by path relative to the workspace (the clone's
	// top level), with slashes.
	Files []SnapshotFile `json:"files"`
	// UserConfig is the sender's own ~/.config/loop/config (absent: none).
	// Like --set, it is the user's and needs no trust.
	UserConfig *string `json:"user_config,omitempty"`
}

// SnapshotFile is one committed file of a Snapshot.
type SnapshotFile struct {
	Path string `json:"path"`
	Data []byte `json:"data"` // base64 in JSON
}
