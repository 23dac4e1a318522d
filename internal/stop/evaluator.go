package stop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Options configure an Evaluator. The zero value is usable: every field has a default.
type Options struct {
	// Clock is read for Evaluation.At, timings and cache ages. Default: SystemClock.
	Clock Clock
	// Logger receives a warning per timed-out condition. Default: no logging. The
	// evaluation itself is the caller's to log (it has the run's secrets to redact).
	Logger *zap.Logger
	// Prices prices max_cost conditions that name a model. Default: DefaultPrices().
	Prices Prices
	// MaxParallel bounds how many slow conditions run at once. Default: 4.
	MaxParallel int
	// ConditionTimeout bounds each slow condition; one that runs out is not met and
	// is reported TimedOut. Default: 5s.
	ConditionTimeout time.Duration
	// CacheTTL is how long a slow leaf's result may be reused for the same run and
	// step. Default: 1s; negative disables the cache.
	CacheTTL time.Duration
	// Sequential evaluates every condition one after the other in priority order
	// instead of running slow ones in parallel. Results are the same either way.
	Sequential bool
}

// Evaluator evaluates one run's Set after every step. Its methods are safe for
// concurrent use; evaluations of one Evaluator are serialized.
//
// Evaluation order is priority order (highest first); within a priority, failure
// conditions come before success conditions before limits, then declaration order.
// Fast conditions are evaluated inline; slow ones (custom_script, file_created,
// file_contains and composites containing one) run concurrently, at most MaxParallel
// at a time, each under ConditionTimeout.
//
// The cache holds results of slow leaves keyed by the leaf, Context.RunID,
// Context.Step and Context.Workspace, for CacheTTL: a result is never reused for a
// different step. Composites are never cached; they re-combine their children, so a
// change in a fast child (a user signal, say) is never hidden by the cache.
//
// An Evaluator belongs to one run: evaluating a Context with a different RunID
// starts afresh (cache, progress and history are dropped).
type Evaluator struct {
	clock       Clock
	log         *zap.Logger
	prices      Prices
	maxParallel int
	timeout     time.Duration
	ttl         time.Duration
	sequential  bool
	stopOnFirst bool

	entries []entry
	slots   int // number of slow leaves, sized while compiling

	evalMu sync.Mutex  // serializes Evaluate
	cache  []cacheSlot // by node.slot; guarded by evalMu, each slot touched by one goroutine at a time

	mu       sync.Mutex // guards the fields below
	runID    string
	progress map[entryKey]float64
	history  []Evaluation // ring of historySize
	next     int          // next write position in history once it is full
}

// historySize is how many evaluations an Evaluator keeps (`loopctl status --debug`).
const historySize = 100

type entry struct {
	node        *node
	class       Class
	index       int
	priority    int
	description string // computed once: descriptions are immutable and not free
}

type entryKey struct {
	class Class
	index int
}

type cacheSlot struct {
	valid     bool
	runID     string
	step      int64
	workspace string
	at        time.Time
	out       outcome
}

// node is a condition prepared for evaluation: regexes compiled, prices looked up, and
// every slow leaf (file_created, file_contains, custom_script) given a cache slot.
type node struct {
	cond     Condition
	kind     descriptor // nil for a missing condition
	slow     bool
	slot     int // cache slot of a slow leaf, -1 for every other node
	children []*node
	re       *regexp.Regexp
	reErr    string
	price    Price // max_cost with a model: that model's price
	priceOK  bool
}

func (e *Evaluator) compile(c Condition) *node {
	n := &node{cond: c, slot: -1}
	if c == nil {
		return n
	}
	n.kind, n.slow = c.kind(), isSlow(c)
	if n.kind.slowLeaf() {
		n.slot = e.slots
		e.slots++
	}
	n.kind.prepareNode(c, n, e.prices)
	for _, child := range n.kind.children(c, "") {
		n.children = append(n.children, e.compile(child))
	}
	return n
}

// eval evaluates one node: a slow leaf through the cache. It never blocks beyond ctx:
// slow leaves watch it.
func (e *Evaluator) eval(ctx context.Context, c *Context, n *node) outcome {
	if n.kind == nil {
		return failed("missing condition")
	}
	p := probe{ctx: ctx, run: c, n: n, e: e}
	if n.slot >= 0 {
		return e.leaf(ctx, c, n, func() outcome { return n.kind.measureNode(p) })
	}
	return n.kind.measureNode(p)
}

// NewEvaluator prepares set for evaluation. It does not validate set (Set.Validate
// does, at run creation): a condition that cannot be evaluated reports Err and is not
// met.
func NewEvaluator(set Set, opts Options) *Evaluator {
	e := &Evaluator{
		clock:       opts.Clock,
		log:         opts.Logger,
		prices:      opts.Prices,
		maxParallel: opts.MaxParallel,
		timeout:     opts.ConditionTimeout,
		ttl:         opts.CacheTTL,
		sequential:  opts.Sequential,
		stopOnFirst: set.StopOnFirst,
		progress:    make(map[entryKey]float64),
	}
	if e.clock == nil {
		e.clock = SystemClock
	}
	if e.log == nil {
		e.log = zap.NewNop()
	}
	if e.prices == nil {
		e.prices = DefaultPrices()
	}
	if e.maxParallel <= 0 {
		e.maxParallel = 4
	}
	if e.timeout <= 0 {
		e.timeout = 5 * time.Second
	}
	if e.ttl == 0 {
		e.ttl = time.Second
	}
	for _, l := range set.lists() {
		for i, c := range l.conds {
			en := entry{node: e.compile(c), class: l.class, index: i}
			if c != nil {
				en.priority, en.description = c.Priority(), c.Description()
			}
			e.entries = append(e.entries, en)
		}
	}
	slices.SortStableFunc(e.entries, func(a, b entry) int {
		if a.priority != b.priority {
			return b.priority - a.priority
		}
		if a.class != b.class {
			return a.class.rank() - b.class.rank()
		}
		return a.index - b.index
	})
	e.cache = make([]cacheSlot, e.slots)
	return e
}

// Evaluation is the outcome of evaluating every condition once.
type Evaluation struct {
	RunID     string        `json:"run_id"`
	Step      int64         `json:"step"`
	Iteration int           `json:"iteration"`
	At        time.Time     `json:"at"`
	Duration  time.Duration `json:"duration_ns"`
	// Results holds every evaluated condition in evaluation order. With
	// Set.StopOnFirst it ends at the first met condition.
	Results []Result `json:"results"`
	// Stop is the verdict, nil when the run goes on.
	Stop *Verdict `json:"stop,omitempty"`
	// Progressed lists the conditions whose progress changed by more than 0.001 since
	// it was last reported (or is seen for the first time): the caller emits
	// CONDITION_PROGRESSED for each.
	Progressed []Progress `json:"progressed,omitempty"`
}

// Result is the outcome of one top-level condition.
type Result struct {
	Condition Condition `json:"condition"`
	Class     Class     `json:"class"`
	Index     int       `json:"index"` // position in its list of the Set
	Met       bool      `json:"met"`
	// Progress toward being met, 0..1; nil when not measurable. A met condition has 1.
	Progress *float64 `json:"progress"`
	// Reason is the human detail: "3/7 done", a script's output, "timed out".
	Reason      string `json:"reason,omitempty"`
	Description string `json:"description"`
	// TimedOut reports that the condition ran out of time; it is then not met.
	TimedOut bool `json:"timed_out,omitempty"`
	// Unmeasurable reports that the condition could not be measured, such as a
	// max_cost whose model has no price while the agent reported no cost; it is then
	// not met and Reason says why. Surface it to the user.
	Unmeasurable bool `json:"unmeasurable,omitempty"`
	// Err reports a condition that could not be evaluated (missing script, bad regex).
	Err      string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	// Cached reports that the result, or a slow part of a composite, came from the
	// cache.
	Cached bool `json:"cached,omitempty"`
}

// UnmarshalJSON decodes a Result written by encoding/json, decoding its condition
// strictly.
func (r *Result) UnmarshalJSON(data []byte) error {
	type plain Result
	var aux struct {
		plain
		Condition json.RawMessage `json:"condition"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*r = Result(aux.plain)
	r.Condition = nil
	if len(aux.Condition) > 0 && string(aux.Condition) != "null" {
		c, err := DecodeCondition(aux.Condition)
		if err != nil {
			return fmt.Errorf("condition: %w", err)
		}
		r.Condition = c
	}
	return nil
}

// ProgressBar draws Progress as "[#####-----]  50%" with width cells; "n/a" when not
// measurable. The percentage rounds down, so only a met condition shows 100%.
func (r Result) ProgressBar(width int) string {
	width = max(width, 1)
	if r.Progress == nil {
		return "[" + strings.Repeat(" ", width) + "]  n/a"
	}
	p := fraction(*r.Progress, 1)
	filled := int(math.Floor(p * float64(width)))
	return fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", filled), strings.Repeat("-", width-filled), int(math.Floor(p*100)))
}

// Verdict says why a run stops.
type Verdict struct {
	Condition Condition `json:"condition"`
	// Class decides the run's status: ClassLimit → ABORTED, ClassSuccess →
	// COMPLETED, ClassFailure → FAILED.
	Class Class `json:"class"`
	// Reason is the machine reason of docs/reference.md, e.g. "max_iterations:7".
	Reason string `json:"reason"`
	// Description is the condition's human description, e.g. "after 7 iterations".
	Description string `json:"description"`
	// Detail is the result's human detail, e.g. "Reached 7 iterations".
	Detail string `json:"detail"`
}

// Progress is a change in one condition's progress.
type Progress struct {
	Condition   Condition `json:"condition"`
	Class       Class     `json:"class"`
	Index       int       `json:"index"`
	Description string    `json:"description"`
	Previous    *float64  `json:"previous"` // nil the first time the condition is seen
	Current     float64   `json:"current"`
	Delta       float64   `json:"delta"`
}

// Evaluate evaluates every condition against c and returns the results and the
// verdict. Among met conditions a failure beats a success beats a limit; within a class
// the highest priority, then declaration order, wins. If ctx ends, conditions still
// running report Err or TimedOut and are not met: a caller that is shutting down
// should not act on such an evaluation.
func (e *Evaluator) Evaluate(ctx context.Context, c Context) Evaluation {
	e.evalMu.Lock()
	defer e.evalMu.Unlock()
	e.switchRun(c.RunID)

	start := e.clock.Now()
	results := make([]Result, len(e.entries))
	// Progress values live in one array that the results point into: one allocation
	// instead of one per condition.
	progress := make([]float64, len(e.entries))
	n := len(e.entries)
	if e.sequential {
		for i := range e.entries {
			results[i] = e.evalEntry(ctx, &c, i, progress)
			if e.stopOnFirst && results[i].Met {
				n = i + 1
				break
			}
		}
	} else {
		n = e.evalParallel(ctx, &c, results, progress)
	}
	results = results[:n]

	ev := Evaluation{
		RunID:     c.RunID,
		Step:      c.Step,
		Iteration: c.Iteration,
		At:        start,
		Results:   results,
		Stop:      verdict(results),
	}
	ev.Duration = e.clock.Now().Sub(start)
	ev.Progressed = e.record(ev)
	return ev
}

// evalParallel evaluates fast conditions inline in priority order and slow ones
// concurrently, and returns how many results count. With StopOnFirst it evaluates
// exactly the conditions the sequential order would have: slow ones after the first
// met fast condition are skipped, and results end at the first met condition.
func (e *Evaluator) evalParallel(ctx context.Context, c *Context, results []Result, progress []float64) int {
	cut := len(e.entries)
	var slow []int
	t := e.clock.Now()
	for i, en := range e.entries {
		if en.node.slow {
			slow = append(slow, i)
			continue
		}
		results[i], t = e.evalEntryAt(ctx, c, i, t, progress)
		if e.stopOnFirst && results[i].Met {
			cut = i + 1
			break
		}
	}
	switch len(slow) {
	case 0:
	case 1:
		results[slow[0]] = e.evalEntry(ctx, c, slow[0], progress)
	default:
		var g errgroup.Group
		g.SetLimit(e.maxParallel)
		for _, i := range slow {
			g.Go(func() error {
				results[i] = e.evalEntry(ctx, c, i, progress)
				return nil
			})
		}
		_ = g.Wait() // workers never fail: problems are reported in results
	}
	if e.stopOnFirst {
		for i := range cut {
			if results[i].Met {
				return i + 1
			}
		}
	}
	return cut
}

func (e *Evaluator) evalEntry(ctx context.Context, c *Context, i int, progress []float64) Result {
	r, _ := e.evalEntryAt(ctx, c, i, e.clock.Now(), progress)
	return r
}

// evalEntryAt evaluates entry i, which started at t0, and returns its result and the
// time it ended, so a run of fast conditions reads the clock once per condition. The
// result's progress is stored in progress[i].
func (e *Evaluator) evalEntryAt(ctx context.Context, c *Context, i int, t0 time.Time, progress []float64) (Result, time.Time) {
	en := e.entries[i]
	var o outcome
	if en.node.slow {
		cctx, cancel := context.WithTimeout(ctx, e.timeout)
		o = e.eval(cctx, c, en.node)
		if !o.met && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			o.timedOut = true
		}
		cancel()
	} else {
		o = e.eval(ctx, c, en.node)
	}
	end := e.clock.Now()
	r := Result{
		Condition:    en.node.cond,
		Class:        en.class,
		Index:        en.index,
		Met:          o.met,
		Reason:       o.detail,
		TimedOut:     o.timedOut,
		Unmeasurable: o.unmeasurable,
		Err:          o.err,
		Duration:     end.Sub(t0),
		Cached:       o.cached,
		Description:  en.description,
	}
	if o.hasProgress {
		progress[i] = o.progress
		r.Progress = &progress[i]
	}
	if o.timedOut {
		switch msg := "timed out after " + FormatDuration(e.timeout); r.Reason {
		case "", "timed out":
			r.Reason = msg
		default:
			r.Reason += " (" + msg + ")"
		}
		e.log.Warn("stop condition timed out",
			zap.String("run", c.RunID), zap.Int64("step", c.Step),
			zap.String("type", string(typeOf(en.node.cond))), zap.String("class", string(en.class)),
			zap.Int("index", en.index), zap.Duration("timeout", e.timeout))
	}
	return r, end
}

// leaf evaluates a slow leaf through the cache.
func (e *Evaluator) leaf(ctx context.Context, c *Context, n *node, eval func() outcome) outcome {
	slot := &e.cache[n.slot]
	if e.ttl > 0 && slot.valid && slot.runID == c.RunID && slot.step == c.Step &&
		slot.workspace == c.Workspace && e.clock.Now().Sub(slot.at) < e.ttl {
		o := slot.out
		o.cached = true
		return o
	}
	o := eval()
	if ctx.Err() != nil && !o.met {
		o = interrupted(ctx)
	}
	if e.ttl > 0 && !o.timedOut && ctx.Err() == nil {
		*slot = cacheSlot{valid: true, runID: c.RunID, step: c.Step, workspace: c.Workspace, at: e.clock.Now(), out: o}
	}
	return o
}

// verdict picks the winning met condition: failure beats success beats limit; results
// are in priority order, so the first met result of the best class wins.
func verdict(results []Result) *Verdict {
	best := -1
	for i, r := range results {
		if r.Met && (best < 0 || r.Class.rank() < results[best].Class.rank()) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	r := results[best]
	v := &Verdict{Condition: r.Condition, Class: r.Class, Description: r.Description, Detail: r.Reason}
	if r.Condition != nil {
		v.Reason = r.Condition.Reason()
	}
	return v
}

func typeOf(c Condition) Type {
	if c == nil {
		return ""
	}
	return c.Type()
}

// switchRun drops per-run state when the evaluator is used for another run.
func (e *Evaluator) switchRun(runID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runID == runID {
		return
	}
	if e.runID != "" {
		clear(e.progress)
		e.history, e.next = nil, 0
		clear(e.cache)
	}
	e.runID = runID
}

// record tracks progress and appends ev to the history; it returns what progressed.
func (e *Evaluator) record(ev Evaluation) []Progress {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Progress
	for _, r := range ev.Results {
		if r.Progress == nil {
			continue
		}
		k := entryKey{r.Class, r.Index}
		cur := *r.Progress
		prev, seen := e.progress[k]
		if seen && math.Abs(cur-prev) <= 0.001 {
			continue // small changes accumulate until they are worth reporting
		}
		p := Progress{Condition: r.Condition, Class: r.Class, Index: r.Index, Description: r.Description, Current: cur, Delta: cur - prev}
		if seen {
			p.Previous = new(prev) // a copy, so prev does not escape on every iteration
		}
		out = append(out, p)
		e.progress[k] = cur
	}
	ev.Progressed = out
	if len(e.history) < historySize {
		e.history = append(e.history, ev)
	} else {
		e.history[e.next] = ev
		e.next = (e.next + 1) % historySize
	}
	return out
}

// History returns the last 100 evaluations, oldest first. Treat them as read-only.
func (e *Evaluator) History() []Evaluation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Concat(e.history[e.next:], e.history[:e.next])
}

// Restore seeds the progress last reported, from results persisted before a daemon
// restart, so unchanged progress is not reported again. Only Class, Index, Progress and
// (when set) the condition's type are used; results that no longer match a condition
// of the set are ignored.
func (e *Evaluator) Restore(prev []Result) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range prev {
		if r.Progress == nil {
			continue
		}
		i := slices.IndexFunc(e.entries, func(en entry) bool { return en.class == r.Class && en.index == r.Index })
		if i < 0 || (r.Condition != nil && typeOf(e.entries[i].node.cond) != r.Condition.Type()) {
			continue
		}
		e.progress[entryKey{r.Class, r.Index}] = *r.Progress
	}
}
