package config

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadDefaults(t *testing.T) {
	w := newWorkspace(t, map[string]string{"PROMPT.md": "goal"})
	c, err := w.load()
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.PromptFile = w.path("PROMPT.md")
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("Load =\n%+v\nwant\n%+v", c, want)
	}
	// The documented defaults, spelled out once.
	if c.Agent != AgentClaude || c.Model != "claude-sonnet-4-5" || c.ReviewApprovePattern != "APPROVED" ||
		!reflect.DeepEqual(c.Completion, []Gate{GatePromise, GateVerify, GateReview}) ||
		c.CompletionPromise != "<promise>COMPLETE</promise>" || c.StepTimeout != Duration(time.Hour) ||
		c.IdleTimeout != Duration(15*time.Minute) || c.MaxIterations != 50 || c.MaxDuration != 0 ||
		c.MaxTokens != 0 || c.MaxCost != 0 || c.MaxConsecutiveImplementationFailures != 3 ||
		c.MaxConsecutiveReviewFailures != 0 || c.MaxConsecutiveVerificationFailures != 3 ||
		c.MaxTaskFailures != 3 || c.NoProgressIterations != 0 || c.PostmortemTimeout != Duration(10*time.Minute) ||
		c.StopFile != "" || c.EnvFile != "" || c.VerifyCommands != nil || c.Prices != nil {
		t.Fatalf("defaults differ from the documented ones: %+v", c)
	}
}

// TestLoadPrecedence sets keys in every layer and checks who wins.
func TestLoadPrecedence(t *testing.T) {
	w := newWorkspace(t, map[string]string{
		"PROMPT.md": "goal",
		".loop/config": "# workspace\n" +
			"max_iterations=20\n" +
			"model=claude-opus-4-5\n" +
			"price.gpt-4o=1,2\n",
	})
	writeFile(t, w.userConfig, "max_iterations=10\nmax_cost=5\nstep_timeout=30m\nmodel=claude-haiku-4-5\nprice.gpt-4o=9,9\nprice.my-model=3,4\n")

	c, err := w.load("max_iterations=30", "max_iterations=40")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"defaults when no layer sets a key", c.MaxConsecutiveImplementationFailures, 3},
		{"user config over defaults", c.StepTimeout, Duration(30 * time.Minute)},
		{"user config kept when later layers are silent", c.MaxCost, 5.0},
		{"workspace over user config", c.Model, "claude-opus-4-5"},
		{"--set over workspace, last --set wins", c.MaxIterations, 40},
		{"prices merge per model", c.Prices, map[string]Price{
			"gpt-4o":   {Input: 1, Output: 2, CacheRead: 1, CacheWrite: 1},
			"my-model": {Input: 3, Output: 4, CacheRead: 3, CacheWrite: 3},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Fatalf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestLoadUserConfigLocation(t *testing.T) {
	tests := []struct {
		name string
		xdg  func(home string) string // XDG_CONFIG_HOME
		file func(home string) string // where the user config is found
	}{
		{
			name: "XDG_CONFIG_HOME",
			xdg:  func(home string) string { return filepath.Join(home, "xdg") },
			file: func(home string) string { return filepath.Join(home, "xdg", "loop", "config") },
		},
		{
			name: "HOME when XDG_CONFIG_HOME is unset",
			xdg:  func(string) string { return "" },
			file: func(home string) string { return filepath.Join(home, ".config", "loop", "config") },
		},
		{
			name: "HOME when XDG_CONFIG_HOME is relative",
			xdg:  func(string) string { return "relative/dir" },
			file: func(home string) string { return filepath.Join(home, ".config", "loop", "config") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			ws := t.TempDir()
			t.Setenv("HOME", home)
			t.Setenv("XDG_CONFIG_HOME", tt.xdg(home))
			writeFile(t, tt.file(home), "prompt=from the user config\n")

			path, err := UserConfigPath()
			if err != nil || path != tt.file(home) {
				t.Fatalf("UserConfigPath() = %q, %v; want %q", path, err, tt.file(home))
			}
			c, err := Load(LoadOptions{Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			if c.Prompt != "from the user config" {
				t.Fatalf("prompt = %q: the user config was not read", c.Prompt)
			}
		})
	}

	t.Run("explicit UserConfig", func(t *testing.T) {
		w := newWorkspace(t, nil)
		writeFile(t, w.userConfig, "prompt=default location\n")
		other := filepath.Join(t.TempDir(), "other")
		writeFile(t, other, "prompt=explicit file\n")
		c, err := Load(LoadOptions{Workspace: w.dir, UserConfig: other})
		if err != nil || c.Prompt != "explicit file" {
			t.Fatalf("Load = %q, %v; want the explicit user config", c.Prompt, err)
		}
		c, err = Load(LoadOptions{Workspace: w.dir, UserConfig: filepath.Join(t.TempDir(), "missing"), Sets: []string{"prompt=x"}})
		if err != nil || c.Prompt != "x" {
			t.Fatalf("Load with a missing user config = %q, %v; want no error", c.Prompt, err)
		}
	})
}

// TestLoadVerifyCommandLayers checks the repeatable key across layers.
func TestLoadVerifyCommandLayers(t *testing.T) {
	tests := []struct {
		name      string
		user      string
		workspace string
		sets      []string
		want      []string
	}{
		{
			name: "one layer appends in order",
			user: "verify_command=a\nverify_command=b\nverify_command=c",
			want: []string{"a", "b", "c"},
		},
		{
			name:      "a later layer replaces the list",
			user:      "verify_command=a\nverify_command=b",
			workspace: "verify_command=c\nverify_command=d",
			want:      []string{"c", "d"},
		},
		{
			name:      "a layer that does not set it keeps the list",
			user:      "verify_command=a",
			workspace: "max_iterations=3",
			want:      []string{"a"},
		},
		{
			name:      "--set replaces the files' list",
			user:      "verify_command=a",
			workspace: "verify_command=b",
			sets:      []string{"verify_command=c", "max_iterations=2", "verify_command=d"},
			want:      []string{"c", "d"},
		},
		{
			name:      "an empty value clears the list",
			workspace: "verify_command=a\nverify_command=",
			want:      nil,
		},
		{
			name: "an empty value clears what the layers below set",
			user: "verify_command=a",
			sets: []string{"verify_command="},
			want: nil,
		},
		{
			name:      "entries after an empty value start a new list",
			workspace: "verify_command=a\nverify_command=\nverify_command=b",
			want:      []string{"b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkspace(t, map[string]string{"PROMPT.md": "goal"})
			if tt.user != "" {
				writeFile(t, w.userConfig, tt.user+"\n")
			}
			if tt.workspace != "" {
				writeFile(t, w.config(), tt.workspace+"\n")
			}
			c, err := w.load(tt.sets...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.VerifyCommands, tt.want) {
				t.Fatalf("verify_command = %q, want %q", c.VerifyCommands, tt.want)
			}
		})
	}
}

// TestLoadPromptLayers checks that prompt and prompt_file act as one setting.
func TestLoadPromptLayers(t *testing.T) {
	tests := []struct {
		name           string
		files          map[string]string
		user           string
		workspace      string
		sets           []string
		wantPrompt     string
		wantPromptFile string // relative to the workspace
		wantErr        string
	}{
		{
			name:           "PROMPT.md by default",
			files:          map[string]string{"PROMPT.md": "goal"},
			wantPromptFile: "PROMPT.md",
		},
		{
			name:       "a prompt replaces the PROMPT.md default",
			files:      map[string]string{"PROMPT.md": "goal"},
			sets:       []string{"prompt=do this"},
			wantPrompt: "do this",
		},
		{
			name:       "a later prompt clears an earlier prompt_file",
			files:      map[string]string{"GOAL.md": "goal"},
			workspace:  "prompt_file=GOAL.md",
			sets:       []string{"prompt=do this instead"},
			wantPrompt: "do this instead",
		},
		{
			name:           "a later prompt_file clears an earlier prompt",
			files:          map[string]string{"GOAL.md": "goal"},
			user:           "prompt=the user's usual goal",
			sets:           []string{"prompt_file=GOAL.md"},
			wantPromptFile: "GOAL.md",
		},
		{
			name:    "both in one --set layer",
			files:   map[string]string{"GOAL.md": "goal"},
			sets:    []string{"prompt_file=GOAL.md", "prompt=x"},
			wantErr: `--set 2: prompt: conflicts with prompt_file at --set 1: set only one of prompt and prompt_file`,
		},
		{
			name:    "no goal anywhere",
			wantErr: `defaults: prompt: no goal: set prompt or prompt_file, or add PROMPT.md to the workspace`,
		},
		{
			name:    "PROMPT.md default turned off",
			files:   map[string]string{"PROMPT.md": "goal"},
			sets:    []string{"prompt_file="},
			wantErr: `--set 1: prompt_file: no goal: set prompt or prompt_file, or add PROMPT.md to the workspace`,
		},
		{
			name:    "a PROMPT.md directory is not a default",
			files:   map[string]string{"PROMPT.md/x": ""},
			wantErr: `defaults: prompt: no goal: set prompt or prompt_file, or add PROMPT.md to the workspace`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkspace(t, tt.files)
			if tt.user != "" {
				writeFile(t, w.userConfig, tt.user+"\n")
			}
			if tt.workspace != "" {
				writeFile(t, w.config(), tt.workspace+"\n")
			}
			c, err := w.load(tt.sets...)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Load error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantFile := ""
			if tt.wantPromptFile != "" {
				wantFile = w.path(tt.wantPromptFile)
			}
			if c.Prompt != tt.wantPrompt || c.PromptFile != wantFile {
				t.Fatalf("prompt, prompt_file = %q, %q; want %q, %q", c.Prompt, c.PromptFile, tt.wantPrompt, wantFile)
			}
		})
	}
}

// TestLoadWorkspaceDefaults checks the defaults that depend on the
// workspace's files.
func TestLoadWorkspaceDefaults(t *testing.T) {
	tests := []struct {
		name         string
		files        map[string]string
		sets         []string
		wantStopFile string // relative to the workspace
		wantEnvFile  string
		wantErr      string
	}{
		{
			name:  "absent files give no defaults",
			files: map[string]string{"PROMPT.md": "g"},
		},
		{
			name:         "present files are the defaults",
			files:        map[string]string{"PROMPT.md": "g", ".loop/stop.json": "{}", ".env": "A=1"},
			wantStopFile: ".loop/stop.json",
			wantEnvFile:  ".env",
		},
		{
			name:         "explicit files replace the defaults",
			files:        map[string]string{"PROMPT.md": "g", ".loop/stop.json": "{}", ".env": "A=1", "stop2.json": "{}", "dev.env": "B=2"},
			sets:         []string{"stop_file=stop2.json", "env_file=dev.env"},
			wantStopFile: "stop2.json",
			wantEnvFile:  "dev.env",
		},
		{
			name:  "empty values turn the defaults off",
			files: map[string]string{"PROMPT.md": "g", ".loop/stop.json": "{}", ".env": "A=1"},
			sets:  []string{"stop_file=", "env_file="},
		},
		{
			name:  "explicitly set missing files are errors, every one",
			files: map[string]string{"PROMPT.md": "g", ".loop/stop.json": "{}", ".env": "A=1"},
			sets:  []string{"stop_file=stop2.json", "env_file=dev.env", "prompt_file=GOAL.md", "spec_file=SPEC.md", "plan_file=PLAN.md"},
			wantErr: "--set 3: prompt_file: {ws}/GOAL.md does not exist\n" +
				"--set 4: spec_file: {ws}/SPEC.md does not exist\n" +
				"--set 5: plan_file: {ws}/PLAN.md does not exist\n" +
				"--set 1: stop_file: {ws}/stop2.json does not exist\n" +
				"--set 2: env_file: {ws}/dev.env does not exist",
		},
		{
			name:    "a default .env that does not parse is an error",
			files:   map[string]string{"PROMPT.md": "g", ".env": "# secrets\nTOKEN=\"abc\n"},
			wantErr: `{ws}/.env:2: invalid env file: unterminated quoted value`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkspace(t, tt.files)
			c, err := w.load(tt.sets...)
			if tt.wantErr != "" {
				if err == nil || err.Error() != w.expand(tt.wantErr) {
					t.Fatalf("Load error:\n%v\nwant:\n%s", err, w.expand(tt.wantErr))
				}
				for _, e := range flatten(err) {
					var ce *ConfigError
					if !errors.As(e, &ce) {
						t.Fatalf("%v is not a *ConfigError", e)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			abs := func(rel string) string {
				if rel == "" {
					return ""
				}
				return w.path(rel)
			}
			if c.StopFile != abs(tt.wantStopFile) || c.EnvFile != abs(tt.wantEnvFile) {
				t.Fatalf("stop_file, env_file = %q, %q; want %q, %q", c.StopFile, c.EnvFile, abs(tt.wantStopFile), abs(tt.wantEnvFile))
			}
		})
	}
}

// TestLoadReportsEveryProblem puts problems in every layer and expects all of
// them, in layer order, each located.
func TestLoadReportsEveryProblem(t *testing.T) {
	w := newWorkspace(t, map[string]string{
		"PROMPT.md": "g",
		".loop/config": "max_iterations=ten\n" +
			"# a comment\n" +
			"just some words\n" +
			"completion=promise,plan\n" +
			"step_timout=5m\n",
	})
	writeFile(t, w.userConfig, "model=\nagent=command\n")
	_, err := w.load("max_cost=lots", "prompt_file=\"GOAL.md")
	want := strings.Join([]string{
		"{user}:1: model: must not be empty",
		"{cfg}:3: missing \"=\" in \"just some words\": a line is key=value",
		"{cfg}:1: max_iterations: must be a whole number ≥ 0, got \"ten\"",
		"{cfg}:5: step_timout: unknown key (did you mean \"step_timeout\"?)",
		"--set 2: prompt_file: unterminated \" quote: close it (escape a quote inside with \\\"), or quote the whole value with '…'",
		"--set 1: max_cost: must be an amount in USD ≥ 0 such as 10 or $2.50, got \"lots\"",
		"{user}:2: agent: agent \"command\" needs agent_command, the shell command to run",
		"{cfg}:4: completion: gate \"plan\" needs plan_file to be set",
	}, "\n")
	if err == nil || err.Error() != w.expand(want) {
		t.Fatalf("Load error:\n%v\nwant:\n%s", err, w.expand(want))
	}
	if n := len(flatten(err)); n != 8 {
		t.Fatalf("Load joined %d errors, want 8 (a flat list)", n)
	}
}

func TestLoadFileErrors(t *testing.T) {
	t.Run("unreadable user config", func(t *testing.T) {
		w := newWorkspace(t, map[string]string{"PROMPT.md": "g"})
		if err := os.MkdirAll(w.userConfig, 0o755); err != nil { // a directory where the file should be
			t.Fatal(err)
		}
		_, err := w.load()
		if want := w.userConfig + ": cannot read: is a directory"; err == nil || err.Error() != want {
			t.Fatalf("Load error = %v, want %q", err, want)
		}
	})
	t.Run("relative workspace", func(t *testing.T) {
		_, err := Load(LoadOptions{Workspace: "ws"})
		if want := `config: workspace "ws" is not an absolute path`; err == nil || err.Error() != want {
			t.Fatalf("Load error = %v, want %q", err, want)
		}
	})
}

func TestWith(t *testing.T) {
	w := newWorkspace(t, map[string]string{"PROMPT.md": "g", "PLAN.md": "- [ ] a"})
	writeFile(t, w.config(), "max_iterations=5\nverify_command=go test ./...\nmax_cost=1\n")
	frozen, err := w.load()
	if err != nil {
		t.Fatal(err)
	}
	// Freeze as the database does.
	data, err := json.Marshal(frozen)
	if err != nil {
		t.Fatal(err)
	}
	var stored Config
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	before := stored.clone()

	t.Run("raise limits", func(t *testing.T) {
		got, err := stored.With(w.dir, []string{"max_iterations=100", "max_cost=$2.5", "completion=promise,plan", "plan_file=PLAN.md"})
		if err != nil {
			t.Fatal(err)
		}
		want := before.clone()
		want.MaxIterations, want.MaxCost = 100, 2.5
		want.Completion, want.PlanFile = []Gate{GatePromise, GatePlan}, w.path("PLAN.md")
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("With =\n%+v\nwant\n%+v", got, want)
		}
	})
	t.Run("verify_command replaced, prompt replaces prompt_file", func(t *testing.T) {
		got, err := stored.With(w.dir, []string{"verify_command=make check", "prompt=new goal"})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.VerifyCommands, []string{"make check"}) || got.Prompt != "new goal" || got.PromptFile != "" {
			t.Fatalf("With: verify_command %q, prompt %q, prompt_file %q", got.VerifyCommands, got.Prompt, got.PromptFile)
		}
	})
	t.Run("no sets", func(t *testing.T) {
		got, err := stored.With(w.dir, nil)
		if err != nil || !reflect.DeepEqual(got, before) {
			t.Fatalf("With(nil) = %+v, %v; want the config unchanged", got, err)
		}
	})
	t.Run("invalid sets change nothing", func(t *testing.T) {
		got, err := stored.With(w.dir, []string{"max_iterations=-5", "verify_command=x", "price.x=1,2", "completion=plan", "max_iteratoins=4"})
		want := "--set 1: max_iterations: must be a whole number ≥ 0, got \"-5\"\n" +
			"--set 5: max_iteratoins: unknown key (did you mean \"max_iterations\"?)\n" +
			"--set 4: completion: gate \"plan\" needs plan_file to be set"
		if err == nil || err.Error() != want {
			t.Fatalf("With error:\n%v\nwant:\n%s", err, want)
		}
		if !reflect.DeepEqual(got, Config{}) {
			t.Fatalf("With returned %+v with an error, want the zero Config", got)
		}
		if !reflect.DeepEqual(stored, before) {
			t.Fatalf("With changed the original:\n%+v\nwas\n%+v", stored, before)
		}
	})
	t.Run("a file deleted since is reported on the frozen value", func(t *testing.T) {
		c, err := stored.With(w.dir, []string{"spec_file=" + w.path("PLAN.md")})
		if err != nil {
			t.Fatal(err)
		}
		gone := w.path("PLAN.md")
		if err := os.Remove(gone); err != nil {
			t.Fatal(err)
		}
		_, err = c.With(w.dir, []string{"max_iterations=6"})
		want := "run config: spec_file: " + gone + " does not exist"
		if err == nil || err.Error() != want {
			t.Fatalf("With error = %v, want %q", err, want)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("With error %v does not wrap fs.ErrNotExist", err)
		}
	})
}

// TestJSONRoundTrip checks the frozen form: a config with every key set
// survives JSON exactly, with the documented field names.
func TestJSONRoundTrip(t *testing.T) {
	w := newWorkspace(t, map[string]string{
		"GOAL.md": "g", "SPEC.md": "s", "PLAN.md": "p", "stop.json": "{}", "x.env": "A=1",
	})
	writeFile(t, w.config(), `
agent=command
agent_command=./agent.sh --model "$MODEL"
model=claude-opus-4-5
prompt_file=GOAL.md
spec_file=SPEC.md
plan_file=PLAN.md
review_command=./review.sh
review_approve_pattern=^LGTM$
verify_command=go vet ./...
verify_command=go test ./...
verify_report=junit.xml
completion=plan,verify
completion_promise=DONE
step_timeout=1h 30m 15s
idle_timeout=0
max_iterations=7
max_duration=2days 3h
max_tokens=1_000_000
max_input_tokens=900000
max_output_tokens=100000
max_cost=$12.34
max_consecutive_implementation_failures=4
max_consecutive_review_failures=5
max_consecutive_verification_failures=6
max_task_failures=7
no_progress_iterations=8
stop_file=stop.json
env_file=x.env
postmortem_command=./pm.sh
postmortem_timeout=90s
price.claude-opus-4-5=5,25,0.5,6.25
price.gpt-4.1=2,8
`)
	c, err := w.load()
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip changed the config:\n%+v\nwas\n%+v\nJSON: %s", back, c, data)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"agent":          "command",
		"step_timeout":   "1h 30m 15s",
		"idle_timeout":   "0s",
		"max_duration":   "2days 3h",
		"max_tokens":     1e6,
		"max_cost":       12.34,
		"verify_command": []any{"go vet ./...", "go test ./..."},
		"completion":     []any{"plan", "verify"},
		"prompt_file":    w.path("GOAL.md"),
		"prices": map[string]any{
			"claude-opus-4-5": map[string]any{"input": 5.0, "output": 25.0, "cache_read": 0.5, "cache_write": 6.25},
			"gpt-4.1":         map[string]any{"input": 2.0, "output": 8.0, "cache_read": 2.0, "cache_write": 2.0},
		},
	} {
		if !reflect.DeepEqual(fields[key], want) {
			t.Errorf("JSON %q = %#v, want %#v", key, fields[key], want)
		}
	}
}

// TestJSONMissingKeysTakeDefaults checks that a frozen config written before
// a key existed decodes with that key's default.
func TestJSONMissingKeysTakeDefaults(t *testing.T) {
	var c Config
	if err := json.Unmarshal([]byte(`{"agent":"codex","model":"gpt-5","prompt":"x","max_iterations":0}`), &c); err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Agent, want.Model, want.Prompt, want.MaxIterations = AgentCodex, "gpt-5", "x", 0
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("decoded %+v, want %+v", c, want)
	}
	if err := json.Unmarshal([]byte(`{"step_timeout":"forever"}`), &c); err == nil ||
		!strings.Contains(err.Error(), `invalid duration: missing number before unit "forever" in "forever"`) {
		t.Fatalf("bad duration error = %v", err)
	}
}

func TestVacuousCompletionIsRefused(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", "")
	for _, tc := range []struct {
		sets []string
		ok   bool
	}{
		{[]string{"completion=verify,review"}, false},
		{[]string{"completion=review", "verify_command=true"}, false},
		{[]string{"completion=verify", "verify_command=true"}, true},
		{[]string{"completion=review", "review_command=./review.sh"}, true},
		{[]string{"completion=promise"}, true},
	} {
		_, err := Load(LoadOptions{Workspace: ws, Sets: append([]string{"prompt=goal", "agent=command", "agent_command=true"}, tc.sets...)})
		if tc.ok && err != nil {
			t.Errorf("%v: %v", tc.sets, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "none of these gates checks anything")) {
			t.Errorf("%v: err = %v, want the vacuous-completion error", tc.sets, err)
		}
	}
}

// TestLoadPromptSymlink: the default PROMPT.md may be a symlink within the
// workspace, not one that leads out of it.
func TestLoadPromptSymlink(t *testing.T) {
	w := newWorkspace(t, map[string]string{"docs/goal.md": "goal"})
	if err := os.Symlink("docs/goal.md", w.path("PROMPT.md")); err != nil {
		t.Fatal(err)
	}
	c, err := w.load()
	if err != nil || c.PromptFile != w.path("PROMPT.md") {
		t.Fatalf("PROMPT.md -> docs/goal.md: %v, prompt_file %q", err, c.PromptFile)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	writeFile(t, outside, "secret")
	os.Remove(w.path("PROMPT.md"))
	if err := os.Symlink(outside, w.path("PROMPT.md")); err != nil {
		t.Fatal(err)
	}
	_, err = w.load()
	if err == nil || !strings.Contains(err.Error(), "defaults: prompt_file: "+w.path("PROMPT.md")+" leads outside the workspace") {
		t.Fatalf("PROMPT.md -> %s: %v", outside, err)
	}
	if _, err := w.load("prompt=a goal given by the user"); err != nil {
		t.Errorf("with a goal of the user's, PROMPT.md is not read: %v", err)
	}
}

// TestLoadWorkspaceFilesStayInside: prompt_file, spec_file and plan_file
// that the workspace chose (its .loop/config, or a relative path in the
// user config) must lead to a file inside it; the user's own --set may
// name any file.
func TestLoadWorkspaceFilesStayInside(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "private.md")
	writeFile(t, outside, "private")
	tests := []struct {
		name    string
		user    string // user config content
		ws      string // .loop/config content
		sets    []string
		link    string // workspace file made a symlink to outside
		wantErr string // "" means valid
	}{
		{name: "a symlink inside is fine", ws: "prompt_file=docs/goal.md\nspec_file=GOAL.md\n", link: ""},
		{name: "prompt_file links outside", ws: "agent=claude\nprompt_file=GOAL.md\n", link: "GOAL.md",
			wantErr: "{cfg}:2: prompt_file: {ws}/GOAL.md leads outside the workspace (to " + outside + ")"},
		{name: "spec_file is an absolute path outside", ws: "prompt=x\nspec_file=" + outside + "\n",
			wantErr: "{cfg}:2: spec_file: " + outside + " leads outside the workspace"},
		{name: "plan_file climbs out", ws: "prompt=x\nplan_file=../" + filepath.Base(filepath.Dir(outside)) + "/private.md\n", wantErr: "{cfg}:2: plan_file: "},
		{name: "a relative path in the user config", user: "prompt_file=GOAL.md\n", link: "GOAL.md",
			wantErr: "{user}:1: prompt_file: {ws}/GOAL.md leads outside the workspace"},
		{name: "an absolute path in the user config is the user's", user: "prompt_file=" + outside + "\n"},
		{name: "--set is the user's", ws: "prompt=x\n", sets: []string{"spec_file=" + outside}},
		{name: "--set replaces the workspace's choice", ws: "prompt=x\nspec_file=SPEC.md\n", link: "SPEC.md", sets: []string{"spec_file=" + outside}},
		{name: "a goal given as text replaces prompt_file", ws: "prompt_file=GOAL.md\n", link: "GOAL.md", sets: []string{"prompt=typed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkspace(t, map[string]string{"docs/goal.md": "goal", "GOAL.md": "goal"})
			if tt.link != "" {
				os.Remove(w.path(tt.link))
				if err := os.Symlink(outside, w.path(tt.link)); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Remove(w.path("GOAL.md")); err == nil {
				if err := os.Symlink("docs/goal.md", w.path("GOAL.md")); err != nil {
					t.Fatal(err)
				}
			}
			if tt.ws != "" {
				writeFile(t, w.config(), tt.ws)
			}
			if tt.user != "" {
				writeFile(t, w.userConfig, tt.user)
			}
			// The workspace sits next to outside's directory only in
			// "climbs out": put it there.
			ws := w.dir
			if strings.Contains(tt.ws, "../") {
				ws = filepath.Join(filepath.Dir(filepath.Dir(outside)), "ws")
				if err := os.Rename(w.dir, ws); err != nil {
					t.Fatal(err)
				}
				w.dir = ws
			}
			_, err := Load(LoadOptions{Workspace: ws, Sets: tt.sets})
			switch want := w.expand(tt.wantErr); {
			case want == "" && err != nil:
				t.Errorf("Load: %v", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("Load: %v\nwant an error containing %q", err, want)
			}
		})
	}
}

// TestLoadGivenWorkspaceConfig: bytes the caller read stand for the
// workspace config file, which is not read again.
func TestLoadGivenWorkspaceConfig(t *testing.T) {
	w := newWorkspace(t, map[string]string{".loop/config": "max_iterations=7\nprompt=on disk\n"})
	loadOpts := func(o LoadOptions) (Config, error) { o.Workspace = w.dir; return Load(o) }
	c, err := loadOpts(LoadOptions{WorkspaceConfigGiven: true, WorkspaceConfigData: []byte("max_iterations=3\nprompt=given\n")})
	if err != nil || c.MaxIterations != 3 || c.Prompt != "given" {
		t.Fatalf("given bytes: %+v, %v", c, err)
	}
	c, err = loadOpts(LoadOptions{WorkspaceConfigGiven: true, Sets: []string{"prompt=g"}})
	if err != nil || c.MaxIterations != 50 {
		t.Fatalf("given as missing: max_iterations %d, %v", c.MaxIterations, err)
	}
}

// agent=command has no default model: the built-in Claude model would
// price a command agent's usage at made-up rates. A model set anywhere
// stays; a preset keeps its default; an explicit empty model is an error.
func TestCommandAgentHasNoDefaultModel(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", "")
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"agent=command", "agent_command=true"}, ""},
		{[]string{"agent=command", "agent_command=true", "model=gpt-5"}, "gpt-5"},
		{[]string{"agent=claude"}, "claude-sonnet-4-5"},
	} {
		c, err := Load(LoadOptions{Workspace: ws, Sets: append([]string{"prompt=goal"}, tc.sets...)})
		if err != nil || c.Model != tc.want {
			t.Errorf("%v: model %q, err %v; want %q", tc.sets, c.Model, err, tc.want)
		}
	}
	_, err := Load(LoadOptions{Workspace: ws, Sets: []string{"prompt=goal", "agent=command", "agent_command=true", "model="}})
	if err == nil || !strings.Contains(err.Error(), "model: must not be empty") {
		t.Errorf("model= with agent=command: err = %v, want model: must not be empty", err)
	}
}
