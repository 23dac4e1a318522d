package scheduler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/trust"
)

// A run started through LOOPD_URL comes with a snapshot of its clone's
// files at the base commit (api.Snapshot): the API node may be on another
// machine, and must never read the path the request names — on this
// machine it is nobody's, or worse, someone else's. The snapshot is
// written into a private directory under LOOPD_HOME and the run is
// validated, judged for trust and frozen from there, by the very code
// that does it for a local workspace; every path that comes out (the
// frozen config, the trusted files, errors and warnings) is renamed back
// to the clone's path, the workspace's name in the records (trust is
// keyed by it). The directory is removed before the request is answered.

// staged is a snapshot written out for one request.
type staged struct {
	dir  string // the staged workspace, this node's own
	name string // the clone's path on the sender's machine
	// userConfig is the sender's user config written out, or a path
	// that does not exist: this node's own user's is not the sender's.
	userConfig string
	// manifest is each file's SHA-256 by path, kept in the run's
	// RUN_CREATED event: the worker checks the commit against it.
	manifest map[string]string
	commit   string
	root     string
}

// snapshotManifest is the RUN_CREATED payload's "snapshot".
type snapshotManifest struct {
	Commit string            `json:"commit"`
	Files  map[string]string `json:"files"`
}

// stage writes snap into a new private directory and returns it.
// Bad input (a path outside the workspace, a file twice, too much) is an
// *InputError naming it.
func (s *Scheduler) stage(name string, snap *api.Snapshot) (*staged, error) {
	bad := func(format string, a ...any) error {
		return &InputError{Msg: "invalid snapshot of the clone's files; nothing was changed", Problems: []string{fmt.Sprintf(format, a...)}}
	}
	switch {
	case name == "" || !filepath.IsAbs(name) || filepath.Clean(name) != name:
		return nil, bad("workspace %q must be a clean absolute path (the clone's, on your machine)", name)
	case !commitID.MatchString(snap.Commit):
		return nil, bad("commit %q must be a full commit id (40 or 64 hex digits)", snap.Commit)
	}
	s.removeStaleSnapshots()
	root, err := os.MkdirTemp(s.opts.Home, ".snapshot-") // 0700: this node's user's alone
	if err != nil {
		return nil, fmt.Errorf("stage the clone's files: %w", err)
	}
	// EvalSymlinks: the workspace is resolved as a local one is, so the
	// renaming below finds every path that comes out.
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	st := &staged{root: root, dir: filepath.Join(root, "ws"), name: name, userConfig: filepath.Join(root, "no-user-config"),
		manifest: map[string]string{}, commit: snap.Commit}
	fail := func(err error) (*staged, error) {
		st.remove()
		return nil, err
	}
	if err := os.Mkdir(st.dir, 0o700); err != nil {
		return fail(err)
	}
	if len(snap.Files) > trust.MaxSnapshotFiles {
		return fail(bad("files: more than %d files (%d)", trust.MaxSnapshotFiles, len(snap.Files)))
	}
	total := 0
	for i, f := range snap.Files {
		if !trust.ValidSnapshotPath(f.Path) {
			return fail(bad("files[%d].path %q must be a relative path inside the workspace, with slashes", i, f.Path))
		}
		if _, dup := st.manifest[f.Path]; dup {
			return fail(bad("files[%d].path %q is there twice", i, f.Path))
		}
		if total += len(f.Data); total > maxSnapshot {
			return fail(bad("files: more than %d bytes together", maxSnapshot))
		}
		st.manifest[f.Path] = trust.Sum(f.Data)
		p := filepath.Join(st.dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			// A file where a directory must be (".loop" and ".loop/config").
			return fail(bad("files[%d].path %q: %v", i, f.Path, err))
		}
		if err := os.WriteFile(p, f.Data, 0o600); err != nil {
			return fail(bad("files[%d].path %q: %v", i, f.Path, err))
		}
	}
	// Before anything reads them: a path a layer names must be a file of
	// the snapshot (confine).
	for _, f := range snap.Files {
		if f.Path == config.WorkspaceConfig {
			if err := st.confineFile(f.Data, st.name+"/"+config.WorkspaceConfig); err != nil {
				return fail(err)
			}
		}
	}
	if snap.UserConfig != nil {
		if err := st.confineFile([]byte(*snap.UserConfig), "your user config (user_config)"); err != nil {
			return fail(err)
		}
		st.userConfig = filepath.Join(root, "user-config")
		if err := os.WriteFile(st.userConfig, []byte(*snap.UserConfig), 0o600); err != nil {
			return fail(err)
		}
	}
	return st, nil
}

// stagedFileKeys are the keys whose value is a file loopd reads when it
// creates a run, or carries in its frozen config for the worker to read.
var stagedFileKeys = []string{"prompt_file", "spec_file", "plan_file", "stop_file", "env_file", "tasks_file"}

// confine refuses a file key of entries (a layer of the sender's config)
// whose path is not inside the staged workspace. On one machine a path
// the user types may lead anywhere: it is their disk. Here the sender is
// any token holder, and a path outside the snapshot (absolute, or
// "../../http.token" out of the staging directory) names a file of the
// API node: read as the goal, the plan, the stop file or the env file,
// its content (the node's own token, another user's files) would be
// stored in the run and shown to the sender. It would also be a file the
// worker's check of the commit never sees. where names the layer.
func (st *staged) confine(entries []config.Entry, where func(config.Entry) string) error {
	var probs []string
	for _, e := range entries {
		if !slices.Contains(stagedFileKeys, e.Key) || e.Value == "" {
			continue
		}
		p := e.Value
		if !filepath.IsAbs(p) {
			p = filepath.Join(st.dir, p)
		}
		if rel, err := filepath.Rel(st.dir, filepath.Clean(p)); err != nil || !filepath.IsLocal(rel) {
			probs = append(probs, fmt.Sprintf("%s: %s %q is not a file of the clone %s: a run started through LOOPD_URL reads only the clone's committed files",
				where(e), e.Key, e.Value, st.name))
		}
	}
	if len(probs) > 0 {
		return &InputError{Msg: "a path outside the clone; nothing was changed", Problems: probs}
	}
	return nil
}

// confineFile is confine for a config file's content, named file. Its
// lines that do not parse are left to whoever loads it, which reports
// them with file and line; the lines that do are confined, since Load
// goes on to validate (and read) what they name.
func (st *staged) confineFile(data []byte, file string) error {
	entries, _ := config.Parse(bytes.NewReader(data), file)
	return st.confine(entries, func(e config.Entry) string { return fmt.Sprintf("%s:%d", file, e.Line) })
}

// removeStaleSnapshots removes what a node killed in the middle of a
// request left staged: a request lasts seconds, so a staging directory an
// hour old is nobody's.
func (s *Scheduler) removeStaleSnapshots() {
	old, _ := filepath.Glob(filepath.Join(s.opts.Home, ".snapshot-*"))
	for _, dir := range old {
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > time.Hour {
			_ = os.RemoveAll(dir)
		}
	}
}

// maxSnapshot bounds a snapshot's bytes (loopctl sends at most 4 MiB).
const maxSnapshot = 4 << 20

// remove deletes the staged directory.
func (st *staged) remove() { _ = os.RemoveAll(st.root) }

// named renames the staged workspace to the clone's path in s.
func (st *staged) named(s string) string {
	if st == nil {
		return s
	}
	// The sender's user config is staged beside the workspace: its
	// errors name it as the sender knows it, never by the staging
	// directory (a path of the API node's home).
	s = strings.ReplaceAll(s, st.userConfig, "user_config (your ~/.config/loop/config)")
	return strings.ReplaceAll(s, st.dir, st.name)
}

// namedJSON renames inside encoded JSON, where both paths appear escaped.
func (st *staged) namedJSON(b []byte) []byte {
	if st == nil {
		return b
	}
	from, _ := json.Marshal(st.dir)
	to, _ := json.Marshal(st.name)
	return []byte(strings.ReplaceAll(string(b), string(from[1:len(from)-1]), string(to[1:len(to)-1])))
}

// inside maps a path the sender named in its clone (a --plan flag) into
// the staged workspace; one outside the clone is refused: the API node
// has nothing of the sender's disk but the snapshot.
func (st *staged) inside(key, p string) (string, error) {
	rel, err := filepath.Rel(st.name, p)
	if err != nil || !filepath.IsLocal(rel) {
		return "", &InputError{Msg: fmt.Sprintf("%s %s is outside the clone %s; a fleet run gets only files committed in its repository", key, p, st.name)}
	}
	return filepath.Join(st.dir, rel), nil
}

// namedErr renames the paths in an error for the sender.
func (st *staged) namedErr(err error) error {
	if st == nil || err == nil {
		return err
	}
	var ie *InputError
	if errors.As(err, &ie) {
		out := &InputError{Msg: st.named(ie.Msg)}
		for _, p := range ie.Problems {
			out.Problems = append(out.Problems, st.named(p))
		}
		return out
	}
	var se *StateError
	if errors.As(err, &se) {
		return &StateError{Msg: st.named(se.Msg)}
	}
	var ue *UntrustedError
	if errors.As(err, &ue) {
		return err // built with the clone's names already (nameFiles)
	}
	if !strings.Contains(err.Error(), st.dir) {
		return err // kept whole: the API maps some errors by their type
	}
	return errors.New(st.named(err.Error()))
}

// nameFiles renames the staged files to the clone's paths, which trust
// records are keyed by.
func (st *staged) nameFiles(files []trust.File) {
	if st == nil {
		return
	}
	for i := range files {
		files[i].Path = st.named(files[i].Path)
		files[i].Commit = st.commit // read as committed there
	}
}
