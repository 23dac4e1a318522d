package scheduler

import (
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/stop"
)

func TestStartWarnings(t *testing.T) {
	cfg := func(mod func(*config.Config)) config.Config {
		c := config.Default()
		mod(&c)
		return c
	}
	capped := stop.Set{Conditions: []stop.Condition{stop.MaxCost{Dollars: 5}}}
	tests := []struct {
		name string
		cfg  config.Config
		set  stop.Set
		want []string // substrings, one per warning, in order
	}{
		{"claude, no checks, no cap", cfg(func(c *config.Config) {}), stop.Set{},
			[]string{"no verify_command", "no max_cost: the claude agent"}},
		{"codex with max_cost", cfg(func(c *config.Config) { c.Agent = config.AgentCodex; c.MaxCost = 3 }), stop.Set{},
			[]string{"no verify_command"}},
		{"a max_cost condition in stop.json counts", cfg(func(c *config.Config) { c.VerifyCommands = []string{"go test ./..."} }), capped,
			nil},
		{"a command agent costs nothing loopd can cap", cfg(func(c *config.Config) {
			c.Agent, c.AgentCommand, c.VerifyCommands = config.AgentCommand, "./agent", []string{"make test"}
		}), stop.Set{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := startWarnings(tt.cfg, tt.set)
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d %q lacks %q", i, got[i], w)
				}
			}
		})
	}
}

func TestGateDescriptionSaysWhatIsChecked(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*config.Config)
		want string
	}{
		{"nothing configured", func(c *config.Config) {},
			"when promise holds after an iteration; verify (no verify_command) and review (no review_command) check nothing"},
		{"verification configured", func(c *config.Config) { c.VerifyCommands = []string{"go test ./..."} },
			"when promise and verify hold after the same iteration; review (no review_command) checks nothing"},
		{"every gate real", func(c *config.Config) { c.VerifyCommands, c.ReviewCommand = []string{"t"}, "r" },
			"when promise, verify and review hold after the same iteration"},
		{"only vacuous gates", func(c *config.Config) { c.Completion = []config.Gate{config.GateVerify} },
			"when an iteration ends without a failure; verify (no verify_command) checks nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			tt.mod(&c)
			if got := gateDescription(c); got != tt.want {
				t.Fatalf("%q\nwant %q", got, tt.want)
			}
		})
	}
}
