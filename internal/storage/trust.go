package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// TrustedFile is a workspace file the user trusted (loopctl trust).
type TrustedFile struct {
	Workspace string `db:"workspace"`
	Path      string `db:"path"`
	Kind      string `db:"kind"`   // config, stop or env
	SHA256    string `db:"sha256"` // of the file's exact bytes
	Summary   string `db:"summary"`
	TrustedAt int64  `db:"trusted_at"`
}

// trustedFileColumns are the columns of a TrustedFile, in the order of its
// fields.
const trustedFileColumns = `workspace, path, kind, sha256, summary, trusted_at`

// TrustedFiles lists the trusted files of a workspace, by path.
func (s *Store) TrustedFiles(ctx context.Context, workspace string) ([]TrustedFile, error) {
	var out []TrustedFile
	err := s.sel(ctx, &out, `SELECT `+trustedFileColumns+`
		FROM trusted_files WHERE workspace = ? ORDER BY path`, workspace)
	if err != nil {
		return nil, fmt.Errorf("read trusted files: %w", err)
	}
	return out, nil
}

// TrustedFile returns the trust record of one file of a workspace, or
// ErrNotFound.
func (s *Store) TrustedFile(ctx context.Context, workspace, path string) (TrustedFile, error) {
	var f TrustedFile
	err := s.get(ctx, &f, `SELECT `+trustedFileColumns+`
		FROM trusted_files WHERE workspace = ? AND path = ?`, workspace, path)
	if errors.Is(err, sql.ErrNoRows) {
		return f, ErrNotFound
	}
	return f, err
}

// TrustFiles replaces the trust records of workspace with files (each
// stamped with the transaction's time): a file no longer among them is
// no longer trusted.
func (t *Tx) TrustFiles(workspace string, files []TrustedFile) error {
	if _, err := t.exec(`DELETE FROM trusted_files WHERE workspace = ?`, workspace); err != nil {
		return fmt.Errorf("trust files: %w", err)
	}
	for _, f := range files {
		_, err := t.exec(`INSERT INTO trusted_files (workspace, path, kind, sha256, summary, trusted_at)
			VALUES (?, ?, ?, ?, ?, ?)`, workspace, f.Path, f.Kind, f.SHA256, f.Summary, t.now)
		if err != nil {
			return fmt.Errorf("trust %s: %w", f.Path, err)
		}
	}
	return nil
}

// RevokeTrust forgets every trusted file of workspace and returns their
// paths.
func (t *Tx) RevokeTrust(workspace string) ([]string, error) {
	var paths []string
	if err := t.sel(&paths, `SELECT path FROM trusted_files WHERE workspace = ? ORDER BY path`, workspace); err != nil {
		return nil, fmt.Errorf("revoke trust: %w", err)
	}
	if _, err := t.exec(`DELETE FROM trusted_files WHERE workspace = ?`, workspace); err != nil {
		return nil, fmt.Errorf("revoke trust: %w", err)
	}
	return paths, nil
}

// RequireEnvTrust records that run loads the workspace's env file at path
// only while it is trusted (see RunEnvTrust).
func (t *Tx) RequireEnvTrust(runID, path string) error {
	if _, err := t.exec(`INSERT INTO run_env_trust (run_id, path) VALUES (?, ?)`, runID, path); err != nil {
		return fmt.Errorf("record env trust of %s: %w", runID, err)
	}
	return nil
}

// RunEnvTrust returns the env file run must find trusted before each
// step, or "" when its env file (if any) was the user's choice.
func (s *Store) RunEnvTrust(ctx context.Context, runID string) (string, error) {
	var path string
	err := s.get(ctx, &path, `SELECT path FROM run_env_trust WHERE run_id = ?`, runID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read env trust of %s: %w", runID, err)
	}
	return path, nil
}
