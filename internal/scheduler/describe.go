package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/config"
	"github.com/loopd/loopd/internal/stop"
	"github.com/loopd/loopd/internal/storage"
	"github.com/loopd/loopd/internal/views"
)

// DescribeOptions choose how much of a run Describe includes.
type DescribeOptions struct {
	Debug bool // the last 100 evaluations
}

// Describe builds the wire view of a run. Every number in it is derived
// from persisted steps and evaluations, so it is the same before and after
// a daemon restart.
//
// The aggregates come from the run's recorded stats (kept with each step),
// so a run costs the same few reads whatever its number of steps; a run
// without current stats is derived from its steps.
func (s *Scheduler) Describe(ctx context.Context, run storage.Run, opts DescribeOptions) (api.Run, error) {
	views, err := s.store.RunViews(ctx, []string{run.ID})
	if err != nil {
		return api.Run{}, err
	}
	var last *storage.Evaluation
	if e, err := s.store.LastEvaluation(ctx, run.ID); err == nil {
		last = &e
	}
	var view *storage.RunView
	if v, ok := views[run.ID]; ok {
		view = &v
	}
	out, err := s.describe(ctx, run, opts, view, last)
	if err != nil {
		return out, err
	}
	if cfg, _, err := s.frozen(run); err == nil && pipelineOf(cfg).Baseline {
		if out.Baseline, err = s.baselineView(ctx, run.ID); err != nil {
			return out, err
		}
	}
	return out, nil
}

// baselineView is verify_baseline's record for status: the baseline
// step's failing tests and what the newest verification ignored of them.
// Two indexed reads of one run, so only Describe makes them, never a list.
func (s *Scheduler) baselineView(ctx context.Context, runID string) (*api.Baseline, error) {
	out := &api.Baseline{Failing: []string{}, Ignored: []string{}}
	base, err := s.store.LastEnded(ctx, runID, api.PhaseBaseline)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return out, nil // not run yet
	case err != nil:
		return nil, err
	}
	out.Seq, out.Known = base.Seq, base.TestsFailed != nil
	if out.Known && len(base.TestsFailedNames) > 0 {
		out.Failing = base.TestsFailedNames
	}
	v, err := s.store.LastEnded(ctx, runID, api.PhaseVerification)
	switch {
	case errors.Is(err, storage.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		out.IgnoredSeq = v.Seq
		if len(v.TestsIgnoredNames) > 0 {
			out.Ignored = v.TestsIgnoredNames
		}
	}
	return out, nil
}

// DescribeList describes runs for a list, reading what they need in a few
// statements for all of them together: the cost grows with the runs
// shown, not with their steps.
func (s *Scheduler) DescribeList(ctx context.Context, runs []storage.Run) ([]api.Run, error) {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	views, err := s.store.RunViews(ctx, ids)
	if err != nil {
		return nil, err
	}
	evals, err := s.store.LastEvaluations(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]api.Run, 0, len(runs))
	for _, run := range runs {
		var view *storage.RunView
		if v, ok := views[run.ID]; ok {
			view = &v
		}
		var last *storage.Evaluation
		if e, ok := evals[run.ID]; ok {
			last = &e
		}
		v, err := s.describe(ctx, run, DescribeOptions{}, view, last)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// describe builds a run's view from its current aggregates (view; nil:
// derive them from its steps) and its newest evaluation (nil: none).
func (s *Scheduler) describe(ctx context.Context, run storage.Run, opts DescribeOptions, view *storage.RunView, last *storage.Evaluation) (api.Run, error) {
	out := views.Run(run)
	cfg, set, err := s.frozen(run)
	if err != nil {
		return out, err
	}
	now := s.opts.Now().UnixMilli()
	if !run.Status.Terminal() && run.Status != api.RunRunning {
		now = run.UpdatedAt // paused or waiting: the clock is not running
	}
	if view != nil {
		s.fillFromView(run, &out, view, now)
	} else if err := s.describeFromSteps(ctx, run, cfg, &out, now); err != nil {
		return out, err
	}
	if out.Usage.Model == "" {
		out.Usage.Model = cfg.Model
	}
	if out.Usage.CostUnknown {
		out.Warnings = append(out.Warnings, fmt.Sprintf("cost unknown for part of the usage: model %q is not in the pricing table "+
			"and the agent reported no cost; set price.<model> in .loop/config", out.Usage.Model))
	}
	if !run.Status.Terminal() {
		if w := unpricedBudget(cfg, set); w != "" {
			out.Warnings = append(out.Warnings, w)
		}
	}
	out.Conditions, err = views.Conditions(last, set)
	if err != nil {
		return out, err
	}
	for _, c := range out.Conditions {
		if c.Unmeasured {
			out.Warnings = append(out.Warnings, c.Description+": "+c.Reason)
		}
	}
	gate := api.Condition{Type: "completion", Kind: string(stop.ClassSuccess),
		Description: gateDescription(cfg)}
	if run.Status == api.RunCompleted && len(run.Reason) > len("completed:") && run.Reason[:len("completed:")] == "completed:" {
		one := 1.0
		gate.Met, gate.Progress, gate.Reason = true, &one, run.Description
	}
	out.Conditions = append(out.Conditions, gate)
	if opts.Debug {
		evs, err := s.store.Evaluations(ctx, run.ID)
		if err != nil {
			return out, err
		}
		for _, e := range evs {
			out.Evaluations = append(out.Evaluations, views.Evaluation(e))
		}
	}
	out.Config = json.RawMessage(run.Config)
	return out, nil
}

// describeFromSteps fills the aggregates of out from every step of the
// run: for runs whose recorded stats are missing or not current.
func (s *Scheduler) describeFromSteps(ctx context.Context, run storage.Run, cfg config.Config, out *api.Run, now int64) error {
	steps, err := s.store.StepsLight(ctx, run.ID)
	if err != nil {
		return fmt.Errorf("load steps: %w", err)
	}
	h := NewHistory(steps, pipelineOf(cfg))
	out.Iteration = h.Iteration()
	out.Counters = h.Counters()
	out.FailingTrend = h.FailingTrend()
	out.Usage = h.Usage()
	out.ElapsedMS = h.ElapsedMS(now)
	out.Steps = len(steps)
	if last := h.Last(); last != nil && last.Status == api.StepRunning {
		cur := views.Step(last, now)
		if cur.Pid == 0 {
			cur.Pid = s.RunningPid(run.ID) // recorded with the step's finish; live from the runner until then
		}
		out.CurrentStep = &cur
	}
	return nil
}

// gateDescription says what the completion gate really checks: a verify
// or review gate with nothing configured holds vacuously and is not named
// as if it were a check.
func gateDescription(cfg config.Config) string {
	var real, vacuous []string
	for _, g := range cfg.Completion {
		switch {
		case g == config.GateVerify && len(cfg.VerifyCommands) == 0:
			vacuous = append(vacuous, "verify (no verify_command)")
		case g == config.GateReview && cfg.ReviewCommand == "":
			vacuous = append(vacuous, "review (no review_command)")
		default:
			real = append(real, string(g))
		}
	}
	var desc string
	switch len(real) {
	case 0:
		desc = "when an iteration ends without a failure"
	case 1:
		desc = "when " + real[0] + " holds after an iteration"
	default:
		desc = "when " + joinAnd(real) + " hold after the same iteration"
	}
	switch len(vacuous) {
	case 0:
	case 1:
		desc += "; " + vacuous[0] + " checks nothing"
	default:
		desc += "; " + joinAnd(vacuous) + " check nothing"
	}
	return desc
}

// RunningPid is the pid of a run's running step, from its runner (the
// database has it only once the step ends); 0 when there is none.
func (s *Scheduler) RunningPid(runID string) int {
	r := s.runner(runID)
	if r == nil {
		return 0
	}
	return r.live.pid()
}

// frozen decodes a run's frozen config and conditions, cached: status and
// list ask for them far more often than a resume changes them.
func (s *Scheduler) frozen(run storage.Run) (config.Config, stop.Set, error) {
	key := frozenKey{run.ID, run.UpdatedAt}
	s.mu.Lock()
	f, ok := s.frozenCache[key]
	s.mu.Unlock()
	if ok {
		return f.cfg, f.set, nil
	}
	cfg, set, err := decodeFrozen(run)
	if err != nil {
		return cfg, set, err
	}
	s.mu.Lock()
	if len(s.frozenCache) >= 1024 {
		clear(s.frozenCache) // a bound, not an LRU: re-decoding is cheap
	}
	s.frozenCache[key] = frozenEntry{cfg, set}
	s.mu.Unlock()
	return cfg, set, nil
}

// frozenKey names a version of a run's frozen config: only an update of
// the run (a resume --set) can change it.
type frozenKey struct {
	id      string
	updated int64
}

type frozenEntry struct {
	cfg config.Config
	set stop.Set
}
