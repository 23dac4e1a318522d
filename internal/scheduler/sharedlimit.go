package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/loopd/loopd/internal/agent"
	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
)

// credentialOf is the fingerprint of an agent step's preset and
// credentials in env (the step's environment): a SHA-256 of the preset,
// its config home and its key variables' values, so that runs sharing an
// account share its usage limit. The key itself is never stored. "" when
// the preset's credentials are unknown (agent=command).
func credentialOf(preset config.Agent, env []string) string {
	a, ok := agent.Lookup(string(preset))
	if !ok || a.Credentials == nil {
		return ""
	}
	src := a.Credentials
	home := lookupEnv(env, src.HomeVar)
	if home == "" {
		home = filepath.Join(lookupEnv(env, "HOME"), src.HomeDefault)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s", preset, filepath.Clean(home))
	for _, k := range src.Keys {
		fmt.Fprintf(h, "\x00%s=%s", k, lookupEnv(env, k))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sharedLimit is the decision to wait for a usage limit another run hit
// with the same agent and credentials, before this run's next agent step
// would spend an attempt on it; nil when there is none in effect.
func (r *runner) sharedLimit(credential string) (*decision, error) {
	if credential == "" {
		return nil, nil
	}
	now := r.s.opts.Now()
	l, err := r.s.store.SharedLimit(r.ctx, credential, r.id, now.UnixMilli())
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	until := l.Until
	desc := fmt.Sprintf("shares the usage limit of run %s (the same %s agent and credentials): no agent step until its reset at %s",
		shortOf(l.RunID), r.cfg.Agent, time.UnixMilli(until).Format(time.RFC3339))
	return &decision{status: api.RunWaiting, waitUntil: &until, event: events.RunWaiting, reason: "usage_limit", description: desc,
		payload: map[string]any{"run_id": r.id, "until": api.Millis(until), "reason": desc, "kind": "usage_limit", "shared_with": l.RunID}}, nil
}
