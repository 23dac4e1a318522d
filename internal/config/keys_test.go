package config

import (
	"reflect"
	"testing"
	"time"
)

// TestKeys covers every key: valid values with their parsed result, and
// invalid values with the exact error, located at the workspace config
// file's line. The workspace has PROMPT.md (so that there is a goal) and a
// directory "dir"; files named in the cases exist when listed in files.
func TestKeys(t *testing.T) {
	type get = func(Config) any
	var (
		agent        get = func(c Config) any { return c.Agent }
		agentCommand get = func(c Config) any { return c.AgentCommand }
		model        get = func(c Config) any { return c.Model }
		prompt       get = func(c Config) any { return [2]string{c.Prompt, c.PromptFile} }
		specFile     get = func(c Config) any { return c.SpecFile }
		planFile     get = func(c Config) any { return c.PlanFile }
		review       get = func(c Config) any { return [2]string{c.ReviewCommand, c.ReviewApprovePattern} }
		verify       get = func(c Config) any { return c.VerifyCommands }
		verifyReport get = func(c Config) any { return c.VerifyReport }
		completion   get = func(c Config) any { return c.Completion }
		promise      get = func(c Config) any { return c.CompletionPromise }
		stepTimeout  get = func(c Config) any { return c.StepTimeout }
		idleTimeout  get = func(c Config) any { return c.IdleTimeout }
		maxIter      get = func(c Config) any { return c.MaxIterations }
		maxDuration  get = func(c Config) any { return c.MaxDuration }
		tokens       get = func(c Config) any { return [3]int64{c.MaxTokens, c.MaxInputTokens, c.MaxOutputTokens} }
		maxCost      get = func(c Config) any { return c.MaxCost }
		failures     get = func(c Config) any {
			return [5]int{c.MaxConsecutiveImplementationFailures, c.MaxConsecutiveReviewFailures,
				c.MaxConsecutiveVerificationFailures, c.MaxTaskFailures, c.NoProgressIterations}
		}
		stopFile   get = func(c Config) any { return c.StopFile }
		envFile    get = func(c Config) any { return c.EnvFile }
		postmortem get = func(c Config) any { return [2]any{c.PostmortemCommand, c.PostmortemTimeout} }
		prices     get = func(c Config) any { return c.Prices }
	)
	const ws = "{ws}" // replaced by the workspace in strings below

	tests := []struct {
		name    string
		config  string            // the workspace config file
		files   map[string]string // more workspace files
		get     get
		want    any // the value get returns; strings have {ws} expanded
		wantErr string
	}{
		// agent, agent_command, model
		{name: "agent claude", config: "agent=claude", get: agent, want: AgentClaude},
		{name: "agent codex", config: "agent=codex\nmodel=gpt-5", get: agent, want: AgentCodex},
		{name: "agent command", config: "agent=command\nagent_command=./agent.sh", get: agent, want: AgentCommand},
		{name: "agent misspelt", config: "agent=cladue", wantErr: `{cfg}:1: agent: must be one of claude, codex, gemini, command, got "cladue" (did you mean "claude"?)`},
		{name: "agent unknown", config: "agent=gpt", wantErr: `{cfg}:1: agent: must be one of claude, codex, gemini, command, got "gpt"`},
		{name: "agent command needs agent_command", config: "# mine\nagent=command", wantErr: `{cfg}:2: agent: agent "command" needs agent_command, the shell command to run`},
		{name: "agent codex with the default Claude model", config: "agent=codex", wantErr: `{cfg}:1: model: "claude-sonnet-4-5" is a Claude model, which agent "codex" cannot run; set model to a model Codex runs`},
		{name: "agent codex with a Claude model set", config: "model=claude-opus-4-5\nagent=codex", wantErr: `{cfg}:1: model: "claude-opus-4-5" is a Claude model, which agent "codex" cannot run; set model to a model Codex runs`},
		{name: "agent codex with agent_command may name any model", config: "agent=codex\nagent_command=my-codex", get: agentCommand, want: "my-codex"},
		{name: "agent_command", config: `agent_command=claude -p --model "$M" # a comment`, get: agentCommand, want: `claude -p --model "$M"`},
		{name: "agent_command keeps a quoted hash", config: `agent_command=claude -p --append-system-prompt "rule # 1"`, get: agentCommand, want: `claude -p --append-system-prompt "rule # 1"`},
		{name: "model", config: "model = claude-opus-4-5", get: model, want: "claude-opus-4-5"},
		{name: "model empty", config: "model=", wantErr: `{cfg}:1: model: must not be empty`},

		// prompt, prompt_file, spec_file, plan_file
		{name: "prompt", config: "prompt=Fix the flaky test", get: prompt, want: [2]string{"Fix the flaky test", ""}},
		{name: "prompt_file relative", config: "prompt_file=docs/GOAL.md", files: map[string]string{"docs/GOAL.md": "g"}, get: prompt, want: [2]string{"", ws + "/docs/GOAL.md"}},
		{name: "prompt_file absolute", config: "prompt_file={ws}/docs/GOAL.md", files: map[string]string{"docs/GOAL.md": "g"}, get: prompt, want: [2]string{"", ws + "/docs/GOAL.md"}},
		{name: "prompt_file missing", config: "prompt_file=GOAL.md", wantErr: `{cfg}:1: prompt_file: {ws}/GOAL.md does not exist`},
		{name: "prompt_file is a directory", config: "prompt_file=dir", wantErr: `{cfg}:1: prompt_file: {ws}/dir is a directory, not a file`},
		{name: "prompt and prompt_file in one layer", config: "prompt=x\nprompt_file=PROMPT.md", wantErr: `{cfg}:2: prompt_file: conflicts with prompt at line 1: set only one of prompt and prompt_file`},
		{name: "prompt_file empty and no prompt", config: "prompt_file=", wantErr: `{cfg}:1: prompt_file: no goal: set prompt or prompt_file, or add PROMPT.md to the workspace`},
		{name: "spec_file", config: "spec_file=SPEC.md", files: map[string]string{"SPEC.md": "s"}, get: specFile, want: ws + "/SPEC.md"},
		{name: "spec_file missing", config: "spec_file=SPEC.md", wantErr: `{cfg}:1: spec_file: {ws}/SPEC.md does not exist`},
		{name: "plan_file", config: "plan_file=PLAN.md", files: map[string]string{"PLAN.md": "- [ ] x"}, get: planFile, want: ws + "/PLAN.md"},
		{name: "plan_file missing", config: "plan_file=sub/../PLAN.md", wantErr: `{cfg}:1: plan_file: {ws}/PLAN.md does not exist`},

		// review_command, review_approve_pattern
		{name: "review_command", config: "review_command=./review.sh", get: review, want: [2]string{"./review.sh", "APPROVED"}},
		{name: "review_approve_pattern", config: `review_approve_pattern=^(LGTM|APPROVED)\b`, get: review, want: [2]string{"", `^(LGTM|APPROVED)\b`}},
		{name: "review_approve_pattern empty matches all", config: "review_approve_pattern=", get: review, want: [2]string{"", ""}},
		{name: "review_approve_pattern invalid", config: "review_approve_pattern=(APPROVED", wantErr: "{cfg}:1: review_approve_pattern: must be a valid regular expression (Go RE2 syntax): error parsing regexp: missing closing ): `(APPROVED`"},

		// verify_command, verify_report
		{name: "verify_command repeated", config: "verify_command=go vet ./...\nverify_command=go test ./...", get: verify, want: []string{"go vet ./...", "go test ./..."}},
		{name: "verify_command cleared", config: "verify_command=a\nverify_command=\nverify_command=b", get: verify, want: []string{"b"}},
		{name: "verify_report need not exist", config: "verify_report=out/junit.xml", get: verifyReport, want: ws + "/out/junit.xml"},
		{name: "verify_report is a directory", config: "verify_report=dir", wantErr: `{cfg}:1: verify_report: {ws}/dir is a directory, not a file`},

		// completion, completion_promise
		{name: "completion", config: "completion = verify , promise", get: completion, want: []Gate{GateVerify, GatePromise}},
		{name: "completion plan", config: "completion=plan,verify\nplan_file=PLAN.md", files: map[string]string{"PLAN.md": ""}, get: completion, want: []Gate{GatePlan, GateVerify}},
		{name: "completion plan without plan_file", config: "completion=promise,plan", wantErr: `{cfg}:1: completion: gate "plan" needs plan_file to be set`},
		{name: "completion empty", config: "completion=", wantErr: `{cfg}:1: completion: must list at least one gate of promise, verify, review, plan, changes`},
		{name: "completion unknown gate", config: "completion=promise,verfy", wantErr: `{cfg}:1: completion: unknown gate "verfy" (did you mean "verify"?); gates are promise, verify, review, plan, changes`},
		{name: "completion duplicate and empty", config: "completion=promise,,promise", wantErr: `{cfg}:1: completion: gate 2 is empty; gate "promise" is listed twice`},
		{name: "completion_promise", config: `completion_promise=<promise>DONE</promise>`, get: promise, want: "<promise>DONE</promise>"},
		{name: "completion_promise empty", config: `completion_promise=""`, wantErr: `{cfg}:1: completion_promise: must not be empty`},

		// durations
		{name: "step_timeout humantime", config: "step_timeout=1h 30m", get: stepTimeout, want: Duration(90 * time.Minute)},
		{name: "step_timeout Go", config: "step_timeout=1.5h", get: stepTimeout, want: Duration(90 * time.Minute)},
		{name: "step_timeout zero", config: "step_timeout=0", wantErr: `{cfg}:1: step_timeout: must be at least 1s, got "0"`},
		{name: "step_timeout below a second", config: "step_timeout=5ms", wantErr: `{cfg}:1: step_timeout: must be at least 1s, got "5ms"`},
		{name: "step_timeout without unit", config: "step_timeout=90", wantErr: `{cfg}:1: step_timeout: invalid duration: missing unit after "90" in "90" (for example "90s" or "90m")`},
		{name: "step_timeout unknown unit", config: "step_timeout=2hx", wantErr: `{cfg}:1: step_timeout: invalid duration: unknown unit "hx" in "2hx"`},
		{name: "idle_timeout", config: "idle_timeout=5 minutes", get: idleTimeout, want: Duration(5 * time.Minute)},
		{name: "idle_timeout 0 disables", config: "idle_timeout=0", get: idleTimeout, want: Duration(0)},
		{name: "idle_timeout above step_timeout", config: "idle_timeout=2h\nstep_timeout=1h", get: idleTimeout, want: Duration(2 * time.Hour)},
		{name: "idle_timeout below a second", config: "idle_timeout=500ms", wantErr: `{cfg}:1: idle_timeout: must be 0 (off) or at least 1s, got "500ms"`},
		{name: "max_duration", config: "max_duration=1day", get: maxDuration, want: Duration(24 * time.Hour)},
		{name: "max_duration negative", config: "max_duration=-1h", wantErr: `{cfg}:1: max_duration: must be ≥ 0 (0 is off), got "-1h"`},
		{name: "postmortem", config: "postmortem_command=./analyse.sh\npostmortem_timeout=2m", get: postmortem, want: [2]any{"./analyse.sh", Duration(2 * time.Minute)}},
		{name: "postmortem_timeout zero", config: "postmortem_timeout=0s", wantErr: `{cfg}:1: postmortem_timeout: must be at least 1s, got "0s"`},

		// workspaces
		{name: "isolation default", config: "", get: func(c Config) any { return c.Isolation }, want: IsolationInPlace},
		{name: "isolation worktree", config: "isolation=worktree", get: func(c Config) any { return c.Isolation }, want: IsolationWorktree},
		{name: "isolation misspelt", config: "isolation=worktre", wantErr: `{cfg}:1: isolation: must be in_place or worktree, got "worktre" (did you mean "worktree"?)`},
		{name: "setup_command", config: `setup_command=cp "$LOOP_CHECKOUT/.env" .`, get: func(c Config) any { return c.SetupCommand }, want: `cp "$LOOP_CHECKOUT/.env" .`},

		// counts
		{name: "max_iterations", config: "max_iterations=10", get: maxIter, want: 10},
		{name: "max_iterations unlimited", config: "max_iterations=0", get: maxIter, want: 0},
		{name: "max_iterations not a number", config: "max_iterations=abc", wantErr: `{cfg}:1: max_iterations: must be a whole number ≥ 0, got "abc"`},
		{name: "max_iterations negative", config: "max_iterations=-1", wantErr: `{cfg}:1: max_iterations: must be a whole number ≥ 0, got "-1"`},
		{name: "max_iterations fraction", config: "max_iterations=1.5", wantErr: `{cfg}:1: max_iterations: must be a whole number ≥ 0, got "1.5"`},
		{name: "max_iterations too large", config: "max_iterations=99999999999999999999", wantErr: `{cfg}:1: max_iterations: must be a whole number from 0 to 9223372036854775807, got "99999999999999999999"`},
		{name: "token limits", config: "max_tokens=1_000_000\nmax_input_tokens=800000\nmax_output_tokens=0", get: tokens, want: [3]int64{1_000_000, 800_000, 0}},
		{name: "max_tokens bad grouping", config: "max_tokens=1__000", wantErr: `{cfg}:1: max_tokens: must be a whole number ≥ 0, got "1__000"`},
		{name: "max_input_tokens trailing underscore", config: "max_input_tokens=1_", wantErr: `{cfg}:1: max_input_tokens: must be a whole number ≥ 0, got "1_"`},
		{name: "max_output_tokens sign", config: "max_output_tokens=+5", wantErr: `{cfg}:1: max_output_tokens: must be a whole number ≥ 0, got "+5"`},
		{
			name: "failure limits",
			config: "max_consecutive_implementation_failures=0\nmax_consecutive_review_failures=2\n" +
				"max_consecutive_verification_failures=5\nmax_task_failures=4\nno_progress_iterations=6",
			get: failures, want: [5]int{0, 2, 5, 4, 6},
		},
		{name: "failure limits defaults", config: "", get: failures, want: [5]int{3, 0, 3, 3, 0}},
		{name: "max_consecutive_review_failures invalid", config: "max_consecutive_review_failures=two", wantErr: `{cfg}:1: max_consecutive_review_failures: must be a whole number ≥ 0, got "two"`},
		{name: "max_task_failures invalid", config: "max_task_failures=-3", wantErr: `{cfg}:1: max_task_failures: must be a whole number ≥ 0, got "-3"`},
		{name: "no_progress_iterations invalid", config: "no_progress_iterations=3x", wantErr: `{cfg}:1: no_progress_iterations: must be a whole number ≥ 0, got "3x"`},

		// max_cost
		{name: "max_cost", config: "max_cost=12.5", get: maxCost, want: 12.5},
		{name: "max_cost dollar sign", config: "max_cost=$2.50", get: maxCost, want: 2.5},
		{name: "max_cost off", config: "max_cost=0", get: maxCost, want: 0.0},
		{name: "max_cost negative", config: "max_cost=-1", wantErr: `{cfg}:1: max_cost: must be an amount in USD ≥ 0 such as 10 or $2.50, got "-1"`},
		{name: "max_cost exponent", config: "max_cost=1e3", wantErr: `{cfg}:1: max_cost: must be an amount in USD ≥ 0 such as 10 or $2.50, got "1e3"`},
		{name: "max_cost infinity", config: "max_cost=inf", wantErr: `{cfg}:1: max_cost: must be an amount in USD ≥ 0 such as 10 or $2.50, got "inf"`},

		// stop_file, env_file
		{name: "stop_file", config: "stop_file=conditions.json", files: map[string]string{"conditions.json": "{}"}, get: stopFile, want: ws + "/conditions.json"},
		{name: "stop_file missing", config: "stop_file=conditions.json", wantErr: `{cfg}:1: stop_file: {ws}/conditions.json does not exist`},
		{name: "env_file", config: "env_file=secrets.env", files: map[string]string{"secrets.env": "A=1"}, get: envFile, want: ws + "/secrets.env"},
		{name: "env_file missing", config: "env_file=secrets.env", wantErr: `{cfg}:1: env_file: {ws}/secrets.env does not exist`},
		{name: "env_file does not parse", config: "env_file=secrets.env", files: map[string]string{"secrets.env": "A=1\nB-C=2\n"}, wantErr: `{ws}/secrets.env:2: invalid env file: unexpected character "-" in a variable name (names are letters, digits, '_' and '.')`},

		// price.<model>
		{name: "price two values", config: "price.gpt-4o=2.5,10", get: prices, want: map[string]Price{"gpt-4o": {Input: 2.5, Output: 10, CacheRead: 2.5, CacheWrite: 2.5}}},
		{name: "price four values", config: "price.claude-sonnet-4-5 = 3, 15, 0.30, $3.75", get: prices, want: map[string]Price{"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}}},
		{name: "price five values", config: "price.claude-sonnet-4-5=3,15,0.30,3.75,6", get: prices, want: map[string]Price{"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75, CacheWrite1h: 6}}},
		{name: "price six values", config: "price.x=1,2,3,4,5,6", wantErr: `{cfg}:1: price.x: must be input,output[,cache_read[,cache_write[,cache_write_1h]]] in USD per million tokens, such as 3,15,0.30,3.75,6; got 6 value(s) in "1,2,3,4,5,6"`},
		{name: "price three values", config: "price.my/model-1.2=1,2,0.1", get: prices, want: map[string]Price{"my/model-1.2": {Input: 1, Output: 2, CacheRead: 0.1, CacheWrite: 1}}},
		{name: "price removed", config: "price.a=1,2\nprice.b=3,4\nprice.a=", get: prices, want: map[string]Price{"b": {Input: 3, Output: 4, CacheRead: 3, CacheWrite: 3}}},
		{name: "price without model", config: "price.=1,2", wantErr: `{cfg}:1: price.: the model name after "price." must not be empty, as in price.claude-sonnet-4-5=3,15,0.30,3.75`},
		{name: "price one value", config: "price.x=1", wantErr: `{cfg}:1: price.x: must be input,output[,cache_read[,cache_write[,cache_write_1h]]] in USD per million tokens, such as 3,15,0.30,3.75,6; got 1 value(s) in "1"`},
		{name: "price bad value", config: "price.x=1,abc", wantErr: `{cfg}:1: price.x: output price "abc" is not an amount ≥ 0; the form is input,output[,cache_read[,cache_write[,cache_write_1h]]] in USD per million tokens, such as 3,15,0.30,3.75,6`},
		{name: "price negative", config: "price.x=1,2,-0.1", wantErr: `{cfg}:1: price.x: cache_read price "-0.1" is not an amount ≥ 0; the form is input,output[,cache_read[,cache_write[,cache_write_1h]]] in USD per million tokens, such as 3,15,0.30,3.75,6`},

		// unknown keys
		{name: "unknown key close to a key", config: "max_iteration=5", wantErr: `{cfg}:1: max_iteration: unknown key (did you mean "max_iterations"?)`},
		{name: "unknown key with dashes", config: "max-consecutive-review-failures=1", wantErr: `{cfg}:1: max-consecutive-review-failures: unknown key (did you mean "max_consecutive_review_failures"?)`},
		{name: "unknown key in capitals", config: "Model=x", wantErr: `{cfg}:1: Model: unknown key (did you mean "model"?)`},
		{name: "unknown key prefix", config: "max_cost_usd=5", wantErr: `{cfg}:1: max_cost_usd: unknown key (did you mean "max_cost"?)`},
		{name: "unknown key truncated", config: "max_consecutive_verification=5", wantErr: `{cfg}:1: max_consecutive_verification: unknown key (did you mean "max_consecutive_verification_failures"?)`},
		{name: "unknown price prefix", config: "prices.gpt-4o=1,2", wantErr: `{cfg}:1: prices.gpt-4o: unknown key (did you mean "price.gpt-4o"?)`},
		{name: "unknown key far from all", config: "frobnicate=1", wantErr: `{cfg}:1: frobnicate: unknown key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"PROMPT.md": "goal", "dir/x": "", ".loop/config": ""}
			for name, content := range tt.files {
				files[name] = content
			}
			w := newWorkspace(t, files)
			writeFile(t, w.config(), w.expand(tt.config)+"\n")
			c, err := w.load()
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Load succeeded, want error:\n%s", w.expand(tt.wantErr))
				}
				if got, want := err.Error(), w.expand(tt.wantErr); got != want {
					t.Fatalf("Load error:\n%s\nwant:\n%s", got, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := expandAny(w, tt.want)
			if got := tt.get(c); !reflect.DeepEqual(got, want) {
				t.Fatalf("got %#v, want %#v", got, want)
			}
		})
	}
}

// expandAny expands {ws} in the strings of a wanted value.
func expandAny(w testWorkspace, v any) any {
	switch v := v.(type) {
	case string:
		return w.expand(v)
	case [2]string:
		return [2]string{w.expand(v[0]), w.expand(v[1])}
	}
	return v
}

// TestKeysTableMatchesConfig checks that every key is documented by a JSON
// field of the same name, so the frozen config names values as the files do.
func TestKeysTableMatchesConfig(t *testing.T) {
	fields := map[string]bool{}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		name, _, _ := cutComma(typ.Field(i).Tag.Get("json"))
		fields[name] = true
	}
	for _, k := range keys {
		if !fields[k.name] {
			t.Errorf("key %q has no Config field with that JSON name", k.name)
		}
		delete(fields, k.name)
	}
	delete(fields, "prices") // the price.<model> keys
	for name := range fields {
		t.Errorf("Config field %q is not a key", name)
	}
}

func cutComma(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == ',' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
