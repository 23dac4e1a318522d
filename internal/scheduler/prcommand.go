package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/trust"
	loopdir "github.com/loopd/loopd/internal/workspace"
)

var _ landing.PRCommander = (*Scheduler)(nil)

// PRCommand is the pr_command a push of run runs (loopctl land --push).
// It is read when the push is made, from the layers a new run in the
// workspace reads (the user's config, the workspace's .loop/config), not
// from the run's frozen config: a user sets up the pull request after
// seeing what the run did. When the workspace's .loop/config sets it,
// that file must be trusted in its present content (else a
// *landing.UntrustedCommandError): whoever wrote the repository wrote it.
func (s *Scheduler) PRCommand(ctx context.Context, run storage.Run) (landing.PRCommand, error) {
	ws := run.Workspace
	// Another user's .loop is never read, so it names no command either.
	if _, err := loopdir.LoopDir(ws); err != nil {
		return landing.PRCommand{}, fmt.Errorf("read pr_command: %w", err)
	}
	path := filepath.Join(ws, config.WorkspaceConfig)
	data, err := trust.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return landing.PRCommand{}, fmt.Errorf("read pr_command: %w", err)
	}
	// The bytes hashed below are the bytes the command is read from.
	cfg, err := loadLayers(config.LoadOptions{Workspace: ws, WorkspaceConfigGiven: true, WorkspaceConfigData: data})
	if err != nil {
		return landing.PRCommand{}, fmt.Errorf("read pr_command: %w", err)
	}
	if cfg.PRCommand == "" {
		return landing.PRCommand{}, nil
	}
	entries, err := config.Parse(bytes.NewReader(data), path)
	if err != nil {
		return landing.PRCommand{}, err
	}
	fromWorkspace := false
	for _, e := range entries {
		if e.Key == "pr_command" {
			fromWorkspace = true
		}
	}
	if !fromWorkspace {
		user, _ := config.UserConfigPath()
		return landing.PRCommand{Command: cfg.PRCommand, Source: user}, nil
	}
	f, err := trust.DescribeConfig(path, data)
	if err != nil {
		return landing.PRCommand{}, err
	}
	recs, err := s.records(ctx, ws)
	if err != nil {
		return landing.PRCommand{}, err
	}
	if bad := trust.Untrusted(trust.Check([]trust.File{f}, recs)); len(bad) > 0 {
		return landing.PRCommand{}, &landing.UntrustedCommandError{
			Err: fmt.Errorf("pr_command comes from %s, which you have not trusted in its present content (%s)", path, bad[0].Problem())}
	}
	return landing.PRCommand{Command: cfg.PRCommand, Source: path}, nil
}

// loadLayers is config.Load for a read of one key outside a start: the
// files judged on their own, as loadForTrust judges them (a goal, an
// agent_command or a model that start would supply is not their error).
func loadLayers(opts config.LoadOptions) (config.Config, error) {
	cfg, err := config.Load(opts)
	if err == nil {
		return cfg, nil
	}
	goal := "prompt=loopctl land"
	for _, sets := range [][]string{{goal}, {goal, "agent_command=" + atStart}, {goal, "model=" + atStart},
		{goal, "agent_command=" + atStart, "model=" + atStart}} {
		o := opts
		o.Sets = sets
		if cfg, err2 := config.Load(o); err2 == nil {
			return cfg, nil
		}
	}
	return cfg, err
}
