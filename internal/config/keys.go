package config

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/editdist"
	"github.com/loopd/loopd/internal/humantime"
)

// pricePrefix starts the keys price.<model>.
const pricePrefix = "price."

// fileRule says what Validate requires of a path key's file.
type fileRule int

const (
	noFile    fileRule = iota // not a path
	mustExist                 // a readable regular file when set
	notADir                   // may be missing (it is written later), but not a directory
)

// key describes one config key: how to read a value into a Config and how to
// check a Config's field. Values accepted by set always pass check; check
// exists for configs built in code or decoded from JSON.
type key struct {
	name string
	// set parses v into c, resolving a relative path against ws. A non-empty
	// result is the problem, worded for "<key>: <problem>", and c is then
	// unchanged.
	set func(c *Config, v, ws string) string
	// check reports a problem with the field in c, or ""; nil for keys whose
	// every value is valid.
	check func(c *Config) string
	// file says what Validate requires of a path's file.
	file fileRule
	// path returns the field of a path key.
	path func(c *Config) *string
	// repeatable marks verify_command: entries of one layer append, and
	// set is nil (see applyLayer).
	repeatable bool
}

// keys lists every key but price.<model>, in the order of docs/configuration.md;
// Validate reports problems in this order.
var keys = []key{
	{name: "agent", set: setAgent, check: checkAgent},
	textKey("agent_command", func(c *Config) *string { return &c.AgentCommand }),
	modelKey(),
	textKey("prompt", func(c *Config) *string { return &c.Prompt }),
	pathKey("prompt_file", mustExist, func(c *Config) *string { return &c.PromptFile }),
	pathKey("spec_file", mustExist, func(c *Config) *string { return &c.SpecFile }),
	pathKey("plan_file", mustExist, func(c *Config) *string { return &c.PlanFile }),
	textKey("review_command", func(c *Config) *string { return &c.ReviewCommand }),
	{name: "review_approve_pattern", set: setApprovePattern, check: checkApprovePattern},
	{name: "verify_command", check: checkVerifyCommands, repeatable: true},
	pathKey("verify_report", notADir, func(c *Config) *string { return &c.VerifyReport }),
	boolKey("verify_baseline", func(c *Config) *bool { return &c.VerifyBaseline }),
	{name: "completion", set: setCompletion, check: checkCompletion},
	lineKey("completion_promise", func(c *Config) *string { return &c.CompletionPromise }),
	{name: "question_tag", set: setQuestionTag, check: checkQuestionTag},
	durationKey("step_timeout", atLeastASecond, func(c *Config) *Duration { return &c.StepTimeout }),
	durationKey("idle_timeout", offOrAtLeastASecond, func(c *Config) *Duration { return &c.IdleTimeout }),
	wholeKey("max_iterations", func(c *Config) *int { return &c.MaxIterations }),
	durationKey("max_duration", offOrAny, func(c *Config) *Duration { return &c.MaxDuration }),
	wholeKey("max_tokens", func(c *Config) *int64 { return &c.MaxTokens }),
	wholeKey("max_input_tokens", func(c *Config) *int64 { return &c.MaxInputTokens }),
	wholeKey("max_output_tokens", func(c *Config) *int64 { return &c.MaxOutputTokens }),
	{name: "max_cost", set: setMaxCost, check: checkMaxCost},
	wholeKey("max_consecutive_implementation_failures", func(c *Config) *int { return &c.MaxConsecutiveImplementationFailures }),
	wholeKey("max_consecutive_review_failures", func(c *Config) *int { return &c.MaxConsecutiveReviewFailures }),
	wholeKey("max_consecutive_verification_failures", func(c *Config) *int { return &c.MaxConsecutiveVerificationFailures }),
	boolKey("progress_resets_streak", func(c *Config) *bool { return &c.ProgressResetsStreak }),
	wholeKey("max_task_failures", func(c *Config) *int { return &c.MaxTaskFailures }),
	wholeKey("no_progress_iterations", func(c *Config) *int { return &c.NoProgressIterations }),
	pathKey("stop_file", mustExist, func(c *Config) *string { return &c.StopFile }),
	pathKey("env_file", mustExist, func(c *Config) *string { return &c.EnvFile }),
	textKey("postmortem_command", func(c *Config) *string { return &c.PostmortemCommand }),
	durationKey("postmortem_timeout", atLeastASecond, func(c *Config) *Duration { return &c.PostmortemTimeout }),
	textKey("notify_command", func(c *Config) *string { return &c.NotifyCommand }),
	{name: "notify_webhook", set: setNotifyWebhook, check: checkNotifyWebhook},
	boolKey("notify_desktop", func(c *Config) *bool { return &c.NotifyDesktop }),
	{name: "notify_on", set: setNotifyOn, check: checkNotifyOn},
	durationKey("max_api_wait", atLeastASecond, func(c *Config) *Duration { return &c.MaxAPIWait }),
	boolKey("redact_secrets", func(c *Config) *bool { return &c.RedactSecrets }),
	{name: "isolation", set: setIsolation, check: checkIsolation},
	textKey("setup_command", func(c *Config) *string { return &c.SetupCommand }),
	pathKey("tasks_file", mustExist, func(c *Config) *string { return &c.TasksFile }),
	textKey("tasks_command", func(c *Config) *string { return &c.TasksCommand }),
	{name: "max_parallel_tasks", set: setMaxParallelTasks, check: checkMaxParallelTasks},
	wholeKey("land_retries", func(c *Config) *int { return &c.LandRetries }),
	{name: "max_task_cost", set: setMaxTaskCost, check: checkMaxTaskCost},
	wholeKey("max_task_iterations", func(c *Config) *int { return &c.MaxTaskIterations }),
}

// lookupKey returns the key named name.
func lookupKey(name string) (key, bool) {
	i := slices.IndexFunc(keys, func(k key) bool { return k.name == name })
	if i < 0 {
		return key{}, false
	}
	return keys[i], true
}

// textKey is a free-text key (a command, the prompt); empty means none.
func textKey(name string, field func(*Config) *string) key {
	return key{
		name: name,
		set:  func(c *Config, v, _ string) string { *field(c) = v; return "" },
	}
}

// lineKey is a required single-line text key.
func lineKey(name string, field func(*Config) *string) key {
	check := func(v string) string {
		switch {
		case strings.TrimSpace(v) == "":
			return "must not be empty"
		case strings.ContainsAny(v, "\r\n"):
			return "must be a single line"
		}
		return ""
	}
	return key{
		name: name,
		set: func(c *Config, v, _ string) string {
			if msg := check(v); msg != "" {
				return msg
			}
			*field(c) = v
			return ""
		},
		check: func(c *Config) string { return check(*field(c)) },
	}
}

// modelKey is model: a single line that a config may not set empty, and
// that only agent=command may leave unset (its agent reports its own cost).
func modelKey() key {
	k := lineKey("model", func(c *Config) *string { return &c.Model })
	check := k.check
	k.check = func(c *Config) string {
		if c.Model == "" && c.Agent == AgentCommand {
			return ""
		}
		return check(c)
	}
	return k
}

// pathKey is a file path, relative to the workspace unless absolute; empty
// means none. Whether the file must exist is checked by Validate.
func pathKey(name string, rule fileRule, field func(*Config) *string) key {
	return key{
		name: name,
		set: func(c *Config, v, ws string) string {
			*field(c) = resolve(ws, v)
			return ""
		},
		file: rule,
		path: field,
	}
}

// resolve makes a non-empty path absolute against the workspace.
func resolve(ws, p string) string {
	if p == "" {
		return ""
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(ws, p)
}

// wholeKey is a whole number ≥ 0. Digits may be grouped with underscores,
// as in 1_000_000.
func wholeKey[T int | int64](name string, field func(*Config) *T) key {
	bits := 64
	if _, isInt := any(T(0)).(int); isInt {
		bits = strconv.IntSize
	}
	return key{
		name: name,
		set: func(c *Config, v, _ string) string {
			n, msg := parseWhole(v, bits)
			if msg != "" {
				return msg
			}
			*field(c) = T(n)
			return ""
		},
		check: func(c *Config) string {
			if n := *field(c); n < 0 {
				return fmt.Sprintf("must be a whole number ≥ 0, got %d", n)
			}
			return ""
		},
	}
}

// parseWhole parses a whole number ≥ 0 that fits in a signed integer of the
// given bit size.
func parseWhole(v string, bits int) (int64, string) {
	if !isWhole(v) {
		return 0, fmt.Sprintf("must be a whole number ≥ 0, got %q", v)
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 10, bits)
	if err != nil {
		return 0, fmt.Sprintf("must be a whole number from 0 to %d, got %q", int64(1)<<(bits-1)-1, v)
	}
	return n, ""
}

// isWhole reports whether s is decimal digits, optionally grouped by single
// underscores between digits.
func isWhole(s string) bool {
	digit := false // the previous byte was a digit
	for i := range len(s) {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			digit = true
		case c == '_' && digit:
			digit = false
		default:
			return false
		}
	}
	return digit
}

// durationRule bounds a duration key.
type durationRule int

const (
	atLeastASecond      durationRule = iota // a timeout that cannot be off
	offOrAtLeastASecond                     // 0 is off, otherwise a timeout
	offOrAny                                // 0 is off, otherwise any positive limit
)

// problem returns what is wrong with d under the rule, or "". got is d as the
// user wrote it.
func (r durationRule) problem(d time.Duration, got string) string {
	switch r {
	case atLeastASecond:
		if d < time.Second {
			return fmt.Sprintf("must be at least 1s, got %s", got)
		}
	case offOrAtLeastASecond:
		if d != 0 && d < time.Second {
			return fmt.Sprintf("must be 0 (off) or at least 1s, got %s", got)
		}
	case offOrAny:
		if d < 0 {
			return fmt.Sprintf("must be ≥ 0 (0 is off), got %s", got)
		}
	}
	return ""
}

// durationKey is a duration in humantime ("1h 30m") or Go ("1h30m") form.
// Sub-second timeouts are rejected: "step_timeout=5ms" is far more likely a
// slip for 5m than a wish.
func durationKey(name string, rule durationRule, field func(*Config) *Duration) key {
	return key{
		name: name,
		set: func(c *Config, v, _ string) string {
			d, err := humantime.Parse(v)
			if err != nil {
				return "invalid duration: " + err.Error()
			}
			if msg := rule.problem(d, strconv.Quote(v)); msg != "" {
				return msg
			}
			*field(c) = Duration(d)
			return ""
		},
		check: func(c *Config) string {
			d := *field(c)
			return rule.problem(d.Std(), d.String())
		},
	}
}

// boolKey is a boolean; see parseBool for the spellings.
func boolKey(name string, field func(*Config) *bool) key {
	return key{
		name: name,
		set: func(c *Config, v, _ string) string {
			b, msg := parseBool(v)
			if msg != "" {
				return msg
			}
			*field(c) = b
			return ""
		},
	}
}

// parseBool reads a boolean key's value: true or false, also yes/no, on/off and
// 1/0, in any case, around which blanks are ignored. It is the one reading of every
// boolean key. A problem is returned worded for "<key>: <problem>".
//
// "t" and "f" (and "T", "F"), which strconv.ParseBool reads, are refused by name:
// notify_desktop once read them through it while redact_secrets refused them, and a
// one-letter value silently meaning a boolean is not worth the doubt.
func parseBool(v string) (bool, string) {
	switch s := strings.ToLower(strings.TrimSpace(v)); s {
	case "true", "yes", "on", "1":
		return true, ""
	case "false", "no", "off", "0":
		return false, ""
	case "t", "f":
		return false, fmt.Sprintf("must be true or false, got %q (write %s in full)", v, map[string]string{"t": "true", "f": "false"}[s])
	}
	return false, fmt.Sprintf("must be true or false, got %q", v)
}

func setAgent(c *Config, v, _ string) string {
	if !slices.Contains(agents, Agent(v)) {
		return agentProblem(Agent(v))
	}
	c.Agent = Agent(v)
	return ""
}

func setIsolation(c *Config, v, _ string) string {
	if !slices.Contains(isolations, Isolation(v)) {
		return isolationProblem(Isolation(v))
	}
	c.Isolation = Isolation(v)
	return ""
}

func checkIsolation(c *Config) string {
	if !slices.Contains(isolations, c.Isolation) {
		return isolationProblem(c.Isolation)
	}
	return ""
}

func isolationProblem(v Isolation) string {
	msg := fmt.Sprintf("must be in_place or worktree, got %q", v)
	if s := suggest(string(v), []string{string(IsolationInPlace), string(IsolationWorktree)}); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg
}

func checkAgent(c *Config) string {
	if !slices.Contains(agents, c.Agent) {
		return agentProblem(c.Agent)
	}
	return ""
}

func agentProblem(a Agent) string {
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = string(a)
	}
	msg := fmt.Sprintf("must be one of %s, got %q", strings.Join(names, ", "), a)
	if s := suggest(string(a), names); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg
}

func setApprovePattern(c *Config, v, _ string) string {
	if msg := approvePatternProblem(v); msg != "" {
		return msg
	}
	c.ReviewApprovePattern = v
	return ""
}

func checkApprovePattern(c *Config) string { return approvePatternProblem(c.ReviewApprovePattern) }

func approvePatternProblem(p string) string {
	if _, err := regexp.Compile(p); err != nil {
		return "must be a valid regular expression (Go RE2 syntax): " + err.Error()
	}
	return ""
}

func setQuestionTag(c *Config, v, _ string) string {
	if msg := questionTagProblem(v); msg != "" {
		return msg
	}
	c.QuestionTag = v
	return ""
}

// checkQuestionTag accepts an empty tag in a config frozen before the key
// existed: such a run reads questions with the default tag.
func checkQuestionTag(c *Config) string {
	if c.QuestionTag == "" {
		return ""
	}
	return questionTagProblem(c.QuestionTag)
}

// questionTagRE is a tag name: it goes between < and > as it is, so
// nothing that would change the markup's meaning is allowed.
var questionTagRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

func questionTagProblem(v string) string {
	if !questionTagRE.MatchString(v) {
		return fmt.Sprintf("must be a tag name (a letter, then letters, digits, _ or -), such as question; got %q", v)
	}
	return ""
}

func checkVerifyCommands(c *Config) string {
	for i, cmd := range c.VerifyCommands {
		if strings.TrimSpace(cmd) == "" {
			return fmt.Sprintf("command %d of %d is empty", i+1, len(c.VerifyCommands))
		}
	}
	return ""
}

func setCompletion(c *Config, v, _ string) string {
	var list []Gate
	if strings.TrimSpace(v) != "" {
		for g := range strings.SplitSeq(v, ",") {
			list = append(list, Gate(strings.TrimSpace(g)))
		}
	}
	if msg := completionProblem(list); msg != "" {
		return msg
	}
	c.Completion = list
	return ""
}

func checkCompletion(c *Config) string { return completionProblem(c.Completion) }

// completionProblem checks a gate list: non-empty, known gates, no
// duplicates. (That plan needs plan_file is checked across keys.)
func completionProblem(list []Gate) string {
	names := make([]string, len(gates))
	for i, g := range gates {
		names[i] = string(g)
	}
	if len(list) == 0 {
		return "must list at least one gate of " + strings.Join(names, ", ")
	}
	var problems []string
	for i, g := range list {
		switch {
		case g == "":
			problems = append(problems, fmt.Sprintf("gate %d is empty", i+1))
		case !slices.Contains(gates, g):
			msg := fmt.Sprintf("unknown gate %q", g)
			if s := suggest(string(g), names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			problems = append(problems, msg+"; gates are "+strings.Join(names, ", "))
		case slices.Index(list, g) < i:
			problems = append(problems, fmt.Sprintf("gate %q is listed twice", g))
		}
	}
	return strings.Join(problems, "; ")
}

func setMaxCost(c *Config, v, _ string) string {
	usd, ok := parseUSD(v)
	if !ok {
		return fmt.Sprintf("must be an amount in USD ≥ 0 such as 10 or $2.50, got %q", v)
	}
	c.MaxCost = usd
	return ""
}

func setMaxTaskCost(c *Config, v, _ string) string {
	usd, ok := parseUSD(v)
	if !ok {
		return fmt.Sprintf("must be an amount in USD ≥ 0 such as 10 or $2.50, got %q", v)
	}
	c.MaxTaskCost = usd
	return ""
}

func checkMaxTaskCost(c *Config) string {
	if !validUSD(c.MaxTaskCost) {
		return fmt.Sprintf("must be an amount in USD ≥ 0, got %v", c.MaxTaskCost)
	}
	return ""
}

func setMaxParallelTasks(c *Config, v, _ string) string {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 64 {
		return fmt.Sprintf("must be a whole number from 1 to 64, got %q", v)
	}
	c.MaxParallelTasks = n
	return ""
}

func checkMaxParallelTasks(c *Config) string {
	if c.MaxParallelTasks < 1 || c.MaxParallelTasks > 64 {
		return fmt.Sprintf("must be a whole number from 1 to 64, got %d", c.MaxParallelTasks)
	}
	return ""
}

func checkMaxCost(c *Config) string {
	if !validUSD(c.MaxCost) {
		return fmt.Sprintf("must be an amount in USD ≥ 0, got %v", c.MaxCost)
	}
	return ""
}

// parseUSD parses a decimal amount ≥ 0 with an optional leading "$", such as
// "10", "2.50" or "$0.5". Exponents, signs, "inf" and "nan" are not amounts.
func parseUSD(v string) (float64, bool) {
	s := strings.TrimPrefix(v, "$")
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" || strings.Trim(intPart, "0123456789") != "" ||
		strings.Trim(frac, "0123456789") != "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !validUSD(f) {
		return 0, false
	}
	return f, true
}

func validUSD(f float64) bool { return f >= 0 && !math.IsInf(f, 0) && !math.IsNaN(f) }

// setPrice applies price.<model>=input,output[,cache_read[,cache_write[,cache_write_1h]]]. An
// empty value removes the model's override. A missing cache price defaults to
// the input price — a model without a cache discount — and a missing 1-hour
// write price to the cache_write price, so an incomplete
// override never prices cached tokens at $0 and never under-counts a budget;
// 0 is written explicitly for a provider that does not charge. c.Prices must
// be owned by the caller (see Config.clone).
func setPrice(c *Config, model, v string) string {
	if model == "" {
		return "the model name after \"price.\" must not be empty, as in price.claude-sonnet-4-5=3,15,0.30,3.75"
	}
	if v == "" {
		delete(c.Prices, model)
		return ""
	}
	const form = "input,output[,cache_read[,cache_write[,cache_write_1h]]] in USD per million tokens, such as 3,15,0.30,3.75,6"
	fields := strings.Split(v, ",")
	if len(fields) < 2 || len(fields) > 5 {
		return fmt.Sprintf("must be %s; got %d value(s) in %q", form, len(fields), v)
	}
	names := []string{"input", "output", "cache_read", "cache_write", "cache_write_1h"}
	var values [5]float64
	for i, f := range fields {
		usd, ok := parseUSD(strings.TrimSpace(f))
		if !ok {
			return fmt.Sprintf("%s price %q is not an amount ≥ 0; the form is %s", names[i], strings.TrimSpace(f), form)
		}
		values[i] = usd
	}
	p := Price{Input: values[0], Output: values[1], CacheRead: values[0], CacheWrite: values[0]}
	if len(fields) > 2 {
		p.CacheRead = values[2]
	}
	if len(fields) > 3 {
		p.CacheWrite = values[3]
	}
	if len(fields) > 4 { // else 0: priced as cache_write
		p.CacheWrite1h = values[4]
	}
	if c.Prices == nil {
		c.Prices = make(map[string]Price)
	}
	c.Prices[model] = p
	return ""
}

// priceProblem checks a Price built in code or decoded from JSON.
func priceProblem(model string, p Price) string {
	if model == "" {
		return "the model name must not be empty"
	}
	for _, f := range []struct {
		name string
		usd  float64
	}{{"input", p.Input}, {"output", p.Output}, {"cache_read", p.CacheRead}, {"cache_write", p.CacheWrite}, {"cache_write_1h", p.CacheWrite1h}} {
		if !validUSD(f.usd) {
			return fmt.Sprintf("%s price must be an amount ≥ 0, got %v", f.name, f.usd)
		}
	}
	return ""
}

// suggestKey returns the known key that an unknown key k most likely means,
// or "". It tries, in order: the same key with '-' or ' ' for '_' and in
// lower case; "price.<model>" for a misspelt price prefix; a key within edit
// distance 2; a unique key that k is a prefix of, or that is a prefix of k.
func suggestKey(k string) string {
	norm := strings.ToLower(strings.NewReplacer("-", "_", " ", "_").Replace(k))
	if before, model, ok := strings.Cut(k, "."); ok && model != "" && editdist.Distance(strings.ToLower(before), "price") <= 2 {
		return pricePrefix + model
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.name
	}
	if s := suggest(norm, names); s != "" {
		return s
	}
	if len(norm) >= 4 {
		var found []string
		for _, n := range names {
			if strings.HasPrefix(n, norm) || strings.HasPrefix(norm, n) {
				found = append(found, n)
			}
		}
		if len(found) == 1 {
			return found[0]
		}
	}
	return ""
}

// suggest returns the choice closest to s within edit distance 2 (case
// insensitive), the first of equally close ones, or "".
func suggest(s string, choices []string) string {
	best, bestDist := "", 3
	for _, c := range choices {
		if d := editdist.Distance(strings.ToLower(s), c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}
