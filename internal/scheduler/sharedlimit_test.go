package scheduler

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/events"
	"github.com/loopd/loopd/internal/storage"
)

func TestCredentialOf(t *testing.T) {
	base := []string{"HOME=/home/ann", "ANTHROPIC_API_KEY=sk-ant-one"}
	fp := credentialOf(config.AgentClaude, base)
	tests := []struct {
		name  string
		agent config.Agent
		env   []string
		same  bool
	}{
		{"the same account", config.AgentClaude, []string{"PATH=/bin", "HOME=/home/ann", "ANTHROPIC_API_KEY=sk-ant-one"}, true},
		{"the default config home spelled out", config.AgentClaude, []string{"HOME=/home/ann", "CLAUDE_CONFIG_DIR=/home/ann/.claude/", "ANTHROPIC_API_KEY=sk-ant-one"}, true},
		{"the env file's key wins", config.AgentClaude, []string{"HOME=/home/ann", "ANTHROPIC_API_KEY=sk-ant-two", "ANTHROPIC_API_KEY=sk-ant-one"}, true},
		{"another key", config.AgentClaude, []string{"HOME=/home/ann", "ANTHROPIC_API_KEY=sk-ant-two"}, false},
		{"another config home", config.AgentClaude, []string{"HOME=/home/bob", "ANTHROPIC_API_KEY=sk-ant-one"}, false},
		{"a subscription token besides", config.AgentClaude, append(base[:2:2], "CLAUDE_CODE_OAUTH_TOKEN=t"), false},
		{"another preset", config.AgentCodex, base, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := credentialOf(tt.agent, tt.env)
			if (got == fp) != tt.same {
				t.Errorf("fingerprint equal = %v, want %v", got == fp, tt.same)
			}
		})
	}
	if credentialOf(config.AgentCommand, base) != "" {
		t.Error("a command agent has a fingerprint")
	}
	if strings.Contains(fp, "sk-ant-one") || len(fp) != 64 {
		t.Errorf("fingerprint %q is not a SHA-256 hex", fp)
	}
}

// limitedStep records a step of run id that hit a usage limit until
// until with credential cred.
func limitedStep(t testing.TB, h *harness, id string, seq int, cred string, until int64) {
	t.Helper()
	err := h.store.Write(context.Background(), func(tx *storage.Tx) error {
		st := &storage.Step{RunID: id, Seq: seq, Phase: api.PhaseImplementation, Iteration: 1, LogPath: os.DevNull,
			Outcome: storage.Outcome{Credential: cred}}
		if err := tx.InsertStep(st, nil); err != nil {
			return err
		}
		st.Status, st.RateLimitedUntil = api.StepFailed, &until
		return tx.FinishStep(st, events.StepFinished, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The planner's check: a run whose account another run found limited
// waits for that reset without a step, naming the other run; one whose
// credentials differ, or whose limit has reset, goes on.
func TestSharedLimitWaitsBeforeTheAgentStep(t *testing.T) {
	fx := newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{} })
	h := newHarness(t, fx)
	now := time.Now()
	h.s.opts.Now = func() time.Time { return now }
	env := []string{"HOME=/home/ann", "ANTHROPIC_API_KEY=sk-ant-one"}
	cred := credentialOf(config.AgentClaude, env)
	other := h.start("", "agent=command", "agent_command=agent", "max_iterations=1")
	until := now.Add(time.Hour).UnixMilli()
	limitedStep(t, h, other, 1, cred, until)
	limitedStep(t, h, other, 2, credentialOf(config.AgentClaude, []string{"HOME=/home/bob"}), now.Add(2*time.Hour).UnixMilli())
	limitedStep(t, h, other, 3, cred, now.Add(-time.Minute).UnixMilli()) // reset already

	id := h.start("", "agent=command", "agent_command=agent", "max_iterations=1")
	r := newRunner(h.s, id)
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	r.cfg.Agent = config.AgentClaude
	d, err := r.sharedLimit(credentialOf(r.cfg.Agent, env))
	if err != nil || d == nil {
		t.Fatalf("no shared limit: %v", err)
	}
	if d.status != api.RunWaiting || d.reason != "usage_limit" || *d.waitUntil != until ||
		!strings.Contains(d.description, "shares the usage limit of run "+shortOf(other)) {
		t.Fatalf("decision %+v (%s)", d, d.description)
	}
	if d, _ := r.sharedLimit(credentialOf(r.cfg.Agent, []string{"HOME=/home/cat"})); d != nil {
		t.Errorf("another account waits: %s", d.description)
	}
	now = now.Add(2 * time.Hour)
	if d, _ := r.sharedLimit(cred); d != nil {
		t.Errorf("waits after the reset: %s", d.description)
	}
	// A run's own limit is its own step's wait, not a shared one.
	own := newRunner(h.s, other)
	if err := own.load(); err != nil {
		t.Fatal(err)
	}
	now = now.Add(-2 * time.Hour)
	if d, _ := own.sharedLimit(cred); d != nil {
		t.Errorf("a run shares its own limit: %s", d.description)
	}
}

// BenchmarkSharedLimitCheck is what the shared usage-limit check adds
// before every agent step of a claude, codex or gemini run: the
// fingerprint of the step's environment and one indexed read, with 1,000
// limited steps of other accounts in the database.
//
//	go test ./internal/scheduler/ -run '^$' -bench SharedLimitCheck -benchmem
func BenchmarkSharedLimitCheck(b *testing.B) {
	fx := &fakeExec{script: func(api.Phase, int) fakeStep { return fakeStep{} }, held: make(chan struct{}, 1)}
	h := newBenchHarness(b, fx)
	other := h.start("", "agent=command", "agent_command=true")
	for i := range 1000 {
		limitedStep(b, h, other, i+1, credentialOf(config.AgentClaude, []string{"HOME=/home/" + string(rune('a'+i%26)), "ANTHROPIC_API_KEY=k" + string(rune(i))}),
			time.Now().Add(time.Hour).UnixMilli())
	}
	id := h.start("", "agent=command", "agent_command=true")
	r := newRunner(h.s, id)
	if err := r.load(); err != nil {
		b.Fatal(err)
	}
	r.cfg.Agent = config.AgentClaude
	env := os.Environ()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := r.sharedLimit(credentialOf(r.cfg.Agent, env)); d != nil || err != nil {
			b.Fatal(d, err)
		}
	}
}
