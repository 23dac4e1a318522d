package config

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"
)

func TestAgentCommandLine(t *testing.T) {
	tests := []struct {
		name       string
		agent      Agent
		model      string
		command    string
		wantLine   string
		wantBinary string
	}{
		{
			name: "claude preset", agent: AgentClaude, model: "claude-sonnet-4-5",
			wantLine:   "claude -p --output-format stream-json --verbose --include-partial-messages --model claude-sonnet-4-5 --dangerously-skip-permissions",
			wantBinary: "claude",
		},
		{
			name: "codex preset", agent: AgentCodex, model: "gpt-5.1-codex",
			wantLine:   "codex exec --json --model gpt-5.1-codex --sandbox workspace-write -",
			wantBinary: "codex",
		},
		{
			name: "gemini preset", agent: AgentGemini, model: "gemini-2.5-pro",
			wantLine:   `gemini -p "" --skip-trust --yolo --output-format stream-json -m gemini-2.5-pro`,
			wantBinary: "gemini",
		},
		{
			name: "model is shell-quoted", agent: AgentClaude, model: "my model; rm -rf ~",
			wantLine:   "claude -p --output-format stream-json --verbose --include-partial-messages --model 'my model; rm -rf ~' --dangerously-skip-permissions",
			wantBinary: "claude",
		},
		{
			name: "single quotes in the model", agent: AgentCodex, model: "it's",
			wantLine:   `codex exec --json --model 'it'\''s' --sandbox workspace-write -`,
			wantBinary: "codex",
		},
		{
			name: "command", agent: AgentCommand, model: "m", command: "./agent.sh --fast",
			wantLine: "./agent.sh --fast", wantBinary: "",
		},
		{
			name: "agent_command overrides a preset", agent: AgentClaude, model: "m", command: "npx claude -p",
			wantLine: "npx claude -p", wantBinary: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Agent, c.Model, c.AgentCommand = tt.agent, tt.model, tt.command
			if got := c.AgentCommandLine(); got != tt.wantLine {
				t.Errorf("AgentCommandLine() = %q, want %q", got, tt.wantLine)
			}
			if got := c.AgentBinary(); got != tt.wantBinary {
				t.Errorf("AgentBinary() = %q, want %q", got, tt.wantBinary)
			}
		})
	}
}

func TestHasGate(t *testing.T) {
	c := Default()
	for g, want := range map[Gate]bool{GatePromise: true, GateVerify: true, GateReview: true, GatePlan: false} {
		if got := c.HasGate(g); got != want {
			t.Errorf("HasGate(%q) = %v, want %v", g, got, want)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		d    Duration
		json string
	}{
		{Duration(60 * time.Minute), `"1h"`},
		{Duration(90 * time.Second), `"1m 30s"`},
		{0, `"0s"`},
		{Duration(26 * time.Hour), `"1day 2h"`},
	}
	for _, tt := range tests {
		data, err := json.Marshal(tt.d)
		if err != nil || string(data) != tt.json {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tt.d.Std(), data, err, tt.json)
		}
		var back Duration
		if err := json.Unmarshal(data, &back); err != nil || back != tt.d {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", data, back.Std(), err, tt.d.Std())
		}
	}
	var d Duration
	for in, want := range map[string]time.Duration{`"60m"`: time.Hour, `"1h30m"`: 90 * time.Minute, `"2 hours"`: 2 * time.Hour} {
		if err := json.Unmarshal([]byte(in), &d); err != nil || d.Std() != want {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", in, d.Std(), err, want)
		}
	}
	if err := json.Unmarshal([]byte(`"2hx"`), &d); err == nil {
		t.Error("Unmarshal of a bad duration succeeded")
	}
}

func TestConfigErrorFormat(t *testing.T) {
	tests := []struct {
		err  ConfigError
		want string
	}{
		{ConfigError{File: "/ws/.loop/config", Line: 3, Key: "max_iterations", Msg: `must be a whole number ≥ 0, got "abc"`},
			`/ws/.loop/config:3: max_iterations: must be a whole number ≥ 0, got "abc"`},
		{ConfigError{File: SetFile, Line: 2, Key: "modle", Msg: `unknown key (did you mean "model"?)`},
			`--set 2: modle: unknown key (did you mean "model"?)`},
		{ConfigError{File: DefaultsFile, Key: "prompt", Msg: "no goal"}, `defaults: prompt: no goal`},
		{ConfigError{File: "/ws/.loop/config", Line: 7, Msg: `missing "="`}, `/ws/.loop/config:7: missing "="`},
		{ConfigError{File: "/ws/.env", Msg: "cannot read: permission denied"}, `/ws/.env: cannot read: permission denied`},
		{ConfigError{Key: "model", Msg: "must not be empty"}, `model: must not be empty`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// TestValidate checks configs built in code or decoded from JSON, which do
// not pass through the key parsers.
func TestValidate(t *testing.T) {
	w := newWorkspace(t, map[string]string{"PROMPT.md": "g"})
	valid := Default()
	valid.Prompt = "goal"
	if err := valid.Validate(w.dir); err != nil {
		t.Fatalf("Validate(valid) = %v", err)
	}

	tests := []struct {
		name    string
		change  func(c *Config)
		wantErr string
	}{
		{"unknown agent", func(c *Config) { c.Agent = "aider" }, `run config: agent: must be one of claude, codex, gemini, command, got "aider"`},
		{"gemini with a claude model", func(c *Config) { c.Agent = AgentGemini }, `run config: model: "claude-sonnet-4-5" is a Claude model, which agent "gemini" cannot run; set model to a model Gemini CLI runs`},
		{"negative count", func(c *Config) { c.MaxIterations = -1 }, `run config: max_iterations: must be a whole number ≥ 0, got -1`},
		{"negative tokens", func(c *Config) { c.MaxOutputTokens = -2 }, `run config: max_output_tokens: must be a whole number ≥ 0, got -2`},
		{"zero step timeout", func(c *Config) { c.StepTimeout = 0 }, `run config: step_timeout: must be at least 1s, got 0s`},
		{"short idle timeout", func(c *Config) { c.IdleTimeout = Duration(time.Millisecond) }, `run config: idle_timeout: must be 0 (off) or at least 1s, got 1ms`},
		{"negative max duration", func(c *Config) { c.MaxDuration = Duration(-time.Hour) }, `run config: max_duration: must be ≥ 0 (0 is off), got -1h`},
		{"NaN cost", func(c *Config) { c.MaxCost = math.NaN() }, `run config: max_cost: must be an amount in USD ≥ 0, got NaN`},
		{"bad pattern", func(c *Config) { c.ReviewApprovePattern = "a[" }, "run config: review_approve_pattern: must be a valid regular expression (Go RE2 syntax): error parsing regexp: missing closing ]: `[`"},
		{"empty verify command", func(c *Config) { c.VerifyCommands = []string{"go test", " "} }, `run config: verify_command: command 2 of 2 is empty`},
		{"no gates", func(c *Config) { c.Completion = nil }, `run config: completion: must list at least one gate of promise, verify, review, plan, changes`},
		{"multi-line promise", func(c *Config) { c.CompletionPromise = "a\nb" }, `run config: completion_promise: must be a single line`},
		{"negative price", func(c *Config) { c.Prices = map[string]Price{"m": {Input: 1, Output: -1}} }, `run config: price.m: output price must be an amount ≥ 0, got -1`},
		{"price without model", func(c *Config) { c.Prices = map[string]Price{"": {}} }, `run config: price.: the model name must not be empty`},
		{"both prompt and prompt_file", func(c *Config) { c.PromptFile = w.path("PROMPT.md") }, `run config: prompt_file: set only one of prompt and prompt_file`},
		{"relative path resolved against the workspace", func(c *Config) { c.Prompt, c.SpecFile = "", "PROMPT.md"; c.PromptFile = "PROMPT.md" }, ``},
		{"relative missing path", func(c *Config) { c.SpecFile = "nope.md" }, `run config: spec_file: ` + w.path("nope.md") + ` does not exist`},
		{"two problems", func(c *Config) { c.MaxTaskFailures, c.Agent = -1, AgentCommand },
			"run config: max_task_failures: must be a whole number ≥ 0, got -1\nrun config: agent: agent \"command\" needs agent_command, the shell command to run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid.clone()
			tt.change(&c)
			err := c.Validate(w.dir)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("Validate error:\n%v\nwant:\n%s", err, tt.wantErr)
			}
			for _, e := range flatten(err) {
				var ce *ConfigError
				if !errors.As(e, &ce) {
					t.Fatalf("%v is not a *ConfigError", e)
				}
			}
		})
	}

	if err := valid.Validate("relative"); err == nil {
		t.Fatal("Validate accepted a relative workspace")
	}
}

// Claude Code refuses --dangerously-skip-permissions as root: the claude
// preset passes it, and so may an agent_command.
func TestSkipsPermissions(t *testing.T) {
	for _, tc := range []struct {
		agent   Agent
		command string
		want    bool
	}{
		{AgentClaude, "", true},
		{AgentCodex, "", false},
		{AgentCommand, "./my-agent.sh", false},
		{AgentClaude, "claude -p --output-format stream-json --verbose --dangerously-skip-permissions", true},
		{AgentClaude, "claude -p --permission-mode acceptEdits", false},
	} {
		c := Config{Agent: tc.agent, AgentCommand: tc.command}
		if got := c.SkipsPermissions(); got != tc.want {
			t.Errorf("agent %q, command %q: SkipsPermissions = %v, want %v", tc.agent, tc.command, got, tc.want)
		}
	}
}
