package stop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Measuring: what one condition finds in a run's Context — met or not, its progress
// toward being met and a human detail. Each condition type's measure function is named
// in its descriptor (conditions.go). The functions are pure but for the slow leaves
// (file_created, file_contains read the workspace; custom_script, in script.go, runs a
// process); the Evaluator decides when they run, under what timeout, and caches them.

// probe is what a measure function is given: the run's Context, the condition's
// prepared node, and the way to evaluate the node's children (all, any, not).
type probe struct {
	ctx context.Context
	run *Context
	n   *node
	e   *Evaluator
}

// child evaluates the node's i-th child.
func (p probe) child(i int) outcome { return p.e.eval(p.ctx, p.run, p.n.children[i]) }

// outcome is what evaluating one node found.
type outcome struct {
	met          bool
	progress     float64
	hasProgress  bool
	detail       string // human detail, becomes Result.Reason
	timedOut     bool
	unmeasurable bool
	err          string
	cached       bool // this node, or a slow leaf below it, was served from the cache
}

// unknown reports that the outcome is not a real "not met": the condition could not be
// evaluated or measured.
func (o outcome) unknown() bool { return o.timedOut || o.unmeasurable || o.err != "" }

func metOutcome(detail string) outcome {
	return outcome{met: true, progress: 1, hasProgress: true, detail: detail}
}

func failed(format string, args ...any) outcome {
	msg := fmt.Sprintf(format, args...)
	return outcome{err: msg, detail: msg}
}

// counter is the outcome of "n has reached limit".
func counter(n, limit int64, met, progress func() string) outcome {
	if limit < 1 {
		return failed("limit must be at least 1 (got %d)", limit)
	}
	if n >= limit {
		return metOutcome(met())
	}
	return outcome{progress: fraction(float64(n), float64(limit)), hasProgress: true, detail: progress()}
}

// fraction returns n/limit clamped to [0, 1].
func fraction(n, limit float64) float64 {
	p := n / limit
	if math.IsNaN(p) || p < 0 {
		return 0
	}
	return min(p, 1)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// ratio returns prefix + "n/limit" + suffix in one allocation: progress details are
// built for every condition at every evaluation.
func ratio(prefix string, n, limit int64, suffix string) string {
	var buf [96]byte
	b := append(buf[:0], prefix...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, limit, 10)
	b = append(b, suffix...)
	return string(b)
}

func measureMaxIterations(cond MaxIterations, p probe) outcome {
	it, limit := int64(p.run.Iteration), int64(cond.Count)
	return counter(it, limit,
		func() string { return "Reached " + plural(limit, "iteration") },
		func() string { return ratio("", it, limit, " done") })
}

func measureMaxDuration(cond MaxDuration, p probe) outcome {
	if cond.Duration <= 0 {
		return failed("duration must be positive (got %s)", FormatDuration(cond.Duration))
	}
	if p.run.Elapsed >= cond.Duration {
		return metOutcome("Reached duration limit of " + FormatDuration(cond.Duration))
	}
	return outcome{
		progress:    fraction(float64(p.run.Elapsed), float64(cond.Duration)),
		hasProgress: true,
		detail:      FormatDuration(p.run.Elapsed.Truncate(1e9)) + " / " + FormatDuration(cond.Duration) + " elapsed",
	}
}

func measureTestFailureStreak(cond TestFailureStreak, p probe) outcome {
	streak, limit := int64(p.run.TestFailureStreak), int64(cond.Count)
	return counter(streak, limit,
		func() string { return plural(limit, "consecutive test failure") },
		func() string { return ratio("", streak, limit, " failures") })
}

func measureNoProgress(cond NoProgress, p probe) outcome {
	since, limit := int64(p.run.IterationsSinceProgress), int64(cond.Iterations)
	return counter(since, limit,
		func() string { return "No progress for " + plural(limit, "iteration") },
		func() string { return ratio("", since, limit, " iterations without progress") })
}

func measureFileCreated(cond FileCreated, p probe) outcome {
	return fileCreated(p.ctx, p.run.Workspace, cond.Path)
}

func measureFileContains(cond FileContains, p probe) outcome {
	return fileContains(p.ctx, p.run.Workspace, cond.Path, cond.Content)
}

func measureOnError(cond OnError, p probe) outcome {
	c := p.run
	if !c.HasError || (cond.Pattern != "" && !strings.Contains(c.LastError, cond.Pattern)) {
		return outcome{detail: "no matching error"}
	}
	msg := c.LastError
	if msg == "" {
		msg = "unknown"
	}
	return metOutcome("Error occurred: " + truncate(msg, maxDetail))
}

func measureCustomScript(cond CustomScript, p probe) outcome { return runScript(p.ctx, p.run, cond) }

func measureUserSignal(_ UserSignal, p probe) outcome {
	if p.run.UserSignal {
		return metOutcome("User signal received")
	}
	return outcome{detail: "no user signal"}
}

func measureNot(_ Negation, p probe) outcome {
	inner := p.child(0)
	switch {
	case inner.met:
		return outcome{detail: "Negated condition met", cached: inner.cached}
	case inner.unknown():
		inner.met, inner.hasProgress, inner.progress = false, false, 0
		inner.detail = "Negated condition unknown: " + inner.detail
		return inner
	}
	o := metOutcome("Negated condition not met")
	o.cached = inner.cached
	return o
}

func measureMaxTokens(cond MaxTokens, p probe) outcome {
	used, limit := p.run.Usage.Total(), cond.Count
	return counter(used, limit,
		func() string { return "Reached " + itoa(limit) + " tokens (used " + itoa(used) + ")" },
		func() string { return ratio("", used, limit, " tokens") })
}

func measureMaxInputTokens(cond MaxInputTokens, p probe) outcome {
	used, limit := p.run.Usage.InputTotal(), cond.Count
	return counter(used, limit,
		func() string { return "Reached " + itoa(limit) + " input tokens (used " + itoa(used) + ")" },
		func() string { return ratio("", used, limit, " input tokens") })
}

func measureMaxOutputTokens(cond MaxOutputTokens, p probe) outcome {
	used, limit := p.run.Usage.OutputTokens, cond.Count
	return counter(used, limit,
		func() string { return "Reached " + itoa(limit) + " output tokens (used " + itoa(used) + ")" },
		func() string { return ratio("", used, limit, " output tokens") })
}

func measureMaxConsecutiveFailures(cond MaxConsecutiveFailures, p probe) outcome {
	if !slices.Contains(phases, cond.Phase) {
		return failed("unknown phase %q", cond.Phase)
	}
	streak, limit := int64(p.run.ConsecutiveFailures[cond.Phase]), int64(cond.Limit)
	return counter(streak, limit,
		func() string { return plural(limit, "consecutive "+cond.Phase+" failure") },
		func() string { return ratio("", streak, limit, " consecutive "+cond.Phase+" failures") })
}

func measureStuckTask(cond StuckTask, p probe) outcome {
	streak, limit := int64(p.run.StuckTaskFailures), int64(cond.Count)
	return counter(streak, limit,
		func() string { return "The same plan task failed verification " + itoa(limit) + " times in a row" },
		func() string { return ratio("", streak, limit, " failures on the same task") })
}

func measureAll(_ All, p probe) outcome {
	if len(p.n.children) == 0 {
		return failed("all needs at least one condition")
	}
	var o outcome
	metCount, sum, measured := 0, 0.0, false
	for i := range p.n.children {
		r := p.child(i)
		o.cached = o.cached || r.cached
		if r.met {
			metCount++
		} else {
			o.timedOut = o.timedOut || r.timedOut
			o.unmeasurable = o.unmeasurable || r.unmeasurable
			if r.err != "" && o.err == "" {
				o.err = "conditions[" + strconv.Itoa(i) + "]: " + r.err
			}
		}
		if r.hasProgress {
			sum += r.progress
			measured = true
		}
	}
	if metCount == len(p.n.children) {
		m := metOutcome("All conditions met")
		m.cached = o.cached
		return m
	}
	o.detail = ratio("", int64(metCount), int64(len(p.n.children)), " conditions met")
	if o.err != "" {
		o.detail += "; " + o.err
	}
	if measured {
		o.progress, o.hasProgress = fraction(sum, float64(len(p.n.children))), true
	}
	return o
}

func measureAny(_ Any, p probe) outcome {
	if len(p.n.children) == 0 {
		return failed("any needs at least one condition")
	}
	var o outcome
	best, measured := 0.0, false
	for i := range p.n.children {
		r := p.child(i)
		o.cached = o.cached || r.cached
		if r.met {
			m := metOutcome(r.detail)
			if m.detail == "" {
				m.detail = "Condition met"
			}
			m.cached = o.cached
			return m
		}
		o.timedOut = o.timedOut || r.timedOut
		o.unmeasurable = o.unmeasurable || r.unmeasurable
		if r.err != "" && o.err == "" {
			o.err = "conditions[" + strconv.Itoa(i) + "]: " + r.err
		}
		if r.hasProgress {
			best, measured = max(best, r.progress), true
		}
	}
	o.detail = "no condition met"
	if o.err != "" {
		o.detail += "; " + o.err
	}
	if measured {
		o.progress, o.hasProgress = best, true
	}
	return o
}

func measureAllTestsPass(_ AllTestsPass, pr probe) outcome {
	c := pr.run
	if !c.TestsKnown {
		return outcome{detail: "test results unknown"}
	}
	passed, total := len(c.PassedTests), len(c.PassedTests)+len(c.FailedTests)
	if len(c.FailedTests) == 0 && passed > 0 {
		return metOutcome("All " + strconv.Itoa(passed) + " tests passed")
	}
	p := 0.0
	if total > 0 {
		p = float64(passed) / float64(total)
	}
	return outcome{progress: p, hasProgress: true, detail: ratio("", int64(passed), int64(total), " tests passing")}
}

func measureSpecificTestsPass(cond SpecificTestsPass, p probe) outcome {
	c, tests := p.run, cond.Tests
	if len(tests) == 0 {
		return failed("tests needs at least one test name")
	}
	if !c.TestsKnown {
		return outcome{detail: "test results unknown"}
	}
	var missing []string
	for _, t := range tests {
		if !testPassing(t, c.PassedTests, c.FailedTests) {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return metOutcome("All " + strconv.Itoa(len(tests)) + " specified tests passed")
	}
	passing := len(tests) - len(missing)
	return outcome{
		progress:    float64(passing) / float64(len(tests)),
		hasProgress: true,
		detail: strconv.Itoa(passing) + "/" + strconv.Itoa(len(tests)) + " passing, waiting for: " +
			strings.Join(missing[:min(3, len(missing))], ", "),
	}
}

// testPassing reports whether the wanted test passed: an exact name, else a glob
// (path.Match; at least one passed match and no failed match), else a suffix on a
// separator boundary matching exactly one passed test and no failed test.
func testPassing(want string, passed, failed []string) bool {
	if slices.Contains(failed, want) {
		return false
	}
	if slices.Contains(passed, want) {
		return true
	}
	if isGlob(want) {
		match := func(name string) bool { ok, _ := path.Match(want, name); return ok }
		return slices.ContainsFunc(passed, match) && !slices.ContainsFunc(failed, match)
	}
	n := 0
	for _, name := range passed {
		if suffixMatch(name, want) {
			n++
		}
	}
	return n == 1 && !slices.ContainsFunc(failed, func(name string) bool { return suffixMatch(name, want) })
}

// suffixMatch reports whether name ends with want right after a separator, as in
// "pkg/TestFoo", "tests/test_a.py::test_x" or "com.example.FooTest.testBar".
func suffixMatch(name, want string) bool {
	if len(name) <= len(want) || !strings.HasSuffix(name, want) {
		return false
	}
	return strings.IndexByte(`/.:\ #>`, name[len(name)-len(want)-1]) >= 0
}

func measureOutputPattern(cond OutputPattern, p probe) outcome {
	c, n := p.run, p.n
	var matched bool
	switch {
	case cond.Pattern == "":
		return failed("pattern must not be empty")
	case cond.IsRegex && n.re == nil:
		return failed("%s", n.reErr)
	case cond.IsRegex:
		matched = n.re.MatchString(c.LastOutput)
	default:
		matched = strings.Contains(c.LastOutput, cond.Pattern)
	}
	if matched {
		return metOutcome("Output matched pattern: " + cond.Pattern)
	}
	return outcome{detail: "output does not match"}
}

func measureMaxCost(cond MaxCost, p probe) outcome {
	c, n := p.run, p.n
	if !(cond.Dollars > 0) || math.IsInf(cond.Dollars, 0) {
		return failed("dollars must be greater than 0 (got %v)", cond.Dollars)
	}
	u := c.Usage
	var cost float64
	note := ""
	switch {
	case cond.Model != "" && n.priceOK:
		cost = Cost(u, n.price)
		note = " (priced as " + cond.Model + ")"
	case u.PricedKnown:
		cost = u.PricedCostUSD
	case u.ReportedKnown:
		cost = u.ReportedCostUSD
		note = " (reported by the agent)"
	case u.Total() == 0:
		// Nothing used yet: $0 is measured, not assumed.
	default:
		model := u.Model
		if model == "" {
			model = "(unnamed)"
		}
		msg := "cost unknown: model " + model + " is not in the pricing table and the agent reported no cost"
		return outcome{unmeasurable: true, detail: msg}
	}
	if cond.Model != "" && !n.priceOK {
		note += " (model " + cond.Model + " is not in the pricing table; using the run's cost)"
	}
	if cost >= cond.Dollars {
		return metOutcome("Cost " + formatUSD(cost) + " reached the " + formatUSD(cond.Dollars) + " budget" + note)
	}
	var buf [64]byte
	b := strconv.AppendFloat(append(buf[:0], '$'), cost, 'f', 2, 64)
	b = strconv.AppendFloat(append(b, " / $"...), cond.Dollars, 'f', 2, 64)
	return outcome{progress: fraction(cost, cond.Dollars), hasProgress: true, detail: string(append(b, note...))}
}

// maxDetail bounds human details built from outside text (errors, script output).
const maxDetail = 4 << 10

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// openWorkspace opens the workspace as an os.Root: paths that escape it, by ".." or by
// a symlink, fail instead of reading outside.
func openWorkspace(workspace, name string) (*os.Root, string, error) {
	if workspace == "" {
		return nil, "", errors.New("no workspace")
	}
	rel := filepath.FromSlash(name)
	if name == "" || !filepath.IsLocal(rel) {
		return nil, "", fmt.Errorf("%q must be a relative path inside the workspace", name)
	}
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, "", fmt.Errorf("open workspace: %w", err)
	}
	return root, rel, nil
}

func fileCreated(ctx context.Context, workspace, name string) outcome {
	if ctx.Err() != nil {
		return interrupted(ctx)
	}
	root, rel, err := openWorkspace(workspace, name)
	if err != nil {
		return failed("%v", err)
	}
	defer root.Close()
	switch _, err := root.Stat(rel); {
	case err == nil:
		return metOutcome("File created: " + name)
	case errors.Is(err, fs.ErrNotExist):
		return outcome{detail: name + " does not exist"}
	default:
		return failed("stat %s: %v", name, err)
	}
}

// fileContains streams the file through a window of len(content)-1 bytes of overlap, so
// memory stays bounded whatever the file's size, and checks ctx between chunks.
func fileContains(ctx context.Context, workspace, name, content string) outcome {
	if ctx.Err() != nil {
		return interrupted(ctx)
	}
	if content == "" {
		return failed("content must not be empty")
	}
	root, rel, err := openWorkspace(workspace, name)
	if err != nil {
		return failed("%v", err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return outcome{detail: name + " does not exist"}
	case err != nil:
		return failed("open %s: %v", name, err)
	}
	defer f.Close()
	want := []byte(content)
	r := bufio.NewReaderSize(f, 64<<10)
	buf := make([]byte, 0, 64<<10+len(want))
	chunk := make([]byte, 64<<10)
	for {
		if ctx.Err() != nil {
			return interrupted(ctx)
		}
		k, err := r.Read(chunk)
		buf = append(buf, chunk[:k]...)
		if bytes.Contains(buf, want) {
			return metOutcome("File " + name + " contains expected content")
		}
		if keep := len(want) - 1; len(buf) > keep {
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
		if err == io.EOF {
			return outcome{detail: name + " does not contain '" + truncate(content, 80) + "'"}
		}
		if err != nil {
			return failed("read %s: %v", name, err)
		}
	}
}

// interrupted is the outcome of a slow leaf whose context ended before it finished.
func interrupted(ctx context.Context) outcome {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return outcome{timedOut: true, detail: "timed out"}
	}
	return failed("evaluation canceled")
}
