// Package metrics exposes loopd's state in the Prometheus text format
// (GET /metrics): runs by status, steps by phase and status, a histogram
// of step durations, token and cost totals, events by type, and how long
// WAITING runs have waited.
//
// Every number but the step gap (NewStepGap) and the steps started ahead
// (NewStepsAhead) is read from the database when Prometheus scrapes, not
// kept in memory: the values are the same before and after a daemon
// restart, and counters only go down if the database is replaced. The
// steps are aggregated in one pass per scrape; events are counted
// incrementally (each scrape reads only the events after the last one it
// counted).
package metrics

import (
	"context"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// DurationBuckets are the upper bounds, in seconds, of the step duration
// histogram: agent steps take minutes, verification seconds to minutes,
// and a command agent, a quick check or a step that fails at once
// (a missing binary, a refused config) well under a second — the buckets
// below 1 s tell those apart.
var DurationBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}

// StepGapBuckets are the upper bounds, in seconds, of the step gap
// histogram: the daemon's own work between two steps takes milliseconds.
var StepGapBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// NewStepGap returns the histogram of what the daemon adds between two
// steps of a run (scheduler.Options.OnStepGap). Unlike the other metrics
// it is about this daemon process, kept in memory since it started, like
// the Go runtime's.
func NewStepGap() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "loopd_step_gap_seconds",
		Help:    "Time this daemon took from noticing a step's end to letting the run's next step run (recording, stop conditions, the next step's start).",
		Buckets: StepGapBuckets,
	})
}

// StepsAhead counts the processes started ahead of their step
// (loopd_steps_started_ahead_total; scheduler.Options.OnAhead) by what
// became of them: used (the step after the running one was the one
// predicted, and its process was already waiting) or discarded (the run
// stopped, or the plan differed). In memory since this daemon started,
// like the step gap.
type StepsAhead struct{ *prometheus.CounterVec }

// NewStepsAhead returns the counter, with both results at zero.
func NewStepsAhead() StepsAhead {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loopd_steps_started_ahead_total",
		Help: "Processes this daemon started for a run's next step while the step before it ran, by result: used, or discarded (the run stopped, or the next step was not the one predicted).",
	}, []string{"result"})
	c.WithLabelValues("used")
	c.WithLabelValues("discarded")
	return StepsAhead{c}
}

// Observe counts one process started ahead.
func (s StepsAhead) Observe(used bool) {
	result := "discarded"
	if used {
		result = "used"
	}
	s.WithLabelValues(result).Inc()
}

// NewBuildInfo returns loopd_build_info, always 1, whose labels say which
// loopd is scraped: version, commit ("" when the build did not record
// it) and the Go version it was built with. Joined on the instance, it
// tells which release a change in the other metrics came with.
func NewBuildInfo(version, commit string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "loopd_build_info",
		Help:        "Always 1; the labels name the running loopd's version, commit and Go version.",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// Handler returns the /metrics handler for store, with Go runtime and
// process metrics and the given in-memory ones beside loopd's own.
func Handler(store *storage.Store, log *zap.Logger, own ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(store, log), NewBuildInfo(api.BuildVersion(), api.BuildCommit()), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(own...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: zap.NewStdLog(log), ErrorHandling: promhttp.ContinueOnError})
}

// Collector reads loopd's metrics from the database at each scrape.
type Collector struct {
	store *storage.Store
	log   *zap.Logger
	now   func() time.Time

	mu      sync.Mutex
	events  map[string]int64 // by type, up to seq
	counted int64

	runs, steps, stepDuration, tokens, cost, eventsTotal, waiting, waitingLongest *prometheus.Desc
}

// NewCollector returns a Collector over store.
func NewCollector(store *storage.Store, log *zap.Logger) *Collector {
	if log == nil {
		log = zap.NewNop()
	}
	return &Collector{
		store: store, log: log.Named("metrics"), now: time.Now, events: map[string]int64{},
		runs: prometheus.NewDesc("loopd_runs", "Runs by status.", []string{"status"}, nil),
		steps: prometheus.NewDesc("loopd_steps", "Steps by phase and status (RUNNING steps included).",
			[]string{"phase", "status"}, nil),
		stepDuration: prometheus.NewDesc("loopd_step_duration_seconds", "Duration of ended steps, by phase and status.",
			[]string{"phase", "status"}, nil),
		tokens: prometheus.NewDesc("loopd_tokens_total", "Tokens used by steps, by phase and kind (input excludes cache reads and writes).",
			[]string{"phase", "kind"}, nil),
		cost: prometheus.NewDesc("loopd_cost_usd_total", "Cost of steps in USD, by phase: priced where the model is known, else as the agent reported.",
			[]string{"phase"}, nil),
		eventsTotal: prometheus.NewDesc("loopd_events_total", "Events recorded, by type.", []string{"type"}, nil),
		waiting: prometheus.NewDesc("loopd_waiting_seconds", "Total time the runs now WAITING (usage limit, model API trouble) have been waiting.",
			nil, nil),
		waitingLongest: prometheus.NewDesc("loopd_waiting_longest_seconds", "How long the longest-waiting WAITING run has waited (0 when none waits).",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.runs, c.steps, c.stepDuration, c.tokens, c.cost, c.eventsTotal, c.waiting, c.waitingLongest} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A failed query drops its
// metrics from this scrape and reports the error to the handler.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if counts, err := c.store.RunCounts(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(c.runs, err)
	} else {
		statuses := []api.RunStatus{api.RunPending, api.RunRunning, api.RunPaused, api.RunWaiting,
			api.RunCompleted, api.RunFailed, api.RunAborted, api.RunInterrupted}
		for _, s := range statuses { // every status, 0 included: dashboards need no absent series
			ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, float64(counts[string(s)]), string(s))
		}
	}
	c.collectSteps(ctx, ch)
	c.collectEvents(ctx, ch)
	if since, err := c.store.WaitingSince(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(c.waiting, err)
	} else {
		now := c.now().UnixMilli()
		var total, longest float64
		for _, ms := range since {
			d := float64(max(now-ms, 0)) / 1000
			total += d
			longest = max(longest, d)
		}
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, total)
		ch <- prometheus.MustNewConstMetric(c.waitingLongest, prometheus.GaugeValue, longest)
	}
}

func (c *Collector) collectSteps(ctx context.Context, ch chan<- prometheus.Metric) {
	totals, err := c.store.StepTotals(ctx, DurationBuckets)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.steps, err)
		return
	}
	type usage struct {
		in, out, cr, cw int64
		cost            float64
	}
	byPhase := map[string]*usage{}
	for _, t := range totals {
		ch <- prometheus.MustNewConstMetric(c.steps, prometheus.GaugeValue, float64(t.Count), t.Phase, t.Status)
		if t.Ended > 0 {
			buckets := make(map[float64]uint64, len(DurationBuckets))
			for i, b := range DurationBuckets {
				buckets[b] = uint64(t.Buckets[i])
			}
			ch <- prometheus.MustNewConstHistogram(c.stepDuration, uint64(t.Ended), t.DurationSum, buckets, t.Phase, t.Status)
		}
		u := byPhase[t.Phase]
		if u == nil {
			u = &usage{}
			byPhase[t.Phase] = u
		}
		u.in += t.InputTokens
		u.out += t.OutputTokens
		u.cr += t.CacheReadTokens
		u.cw += t.CacheWriteTokens
		u.cost += t.CostUSD
	}
	for phase, u := range byPhase {
		for kind, n := range map[string]int64{"input": u.in, "output": u.out, "cache_read": u.cr, "cache_write": u.cw} {
			ch <- prometheus.MustNewConstMetric(c.tokens, prometheus.CounterValue, float64(n), phase, kind)
		}
		ch <- prometheus.MustNewConstMetric(c.cost, prometheus.CounterValue, u.cost, phase)
	}
}

func (c *Collector) collectEvents(ctx context.Context, ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts, last, err := c.store.EventCounts(ctx, c.counted)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.eventsTotal, err)
		return
	}
	for typ, n := range counts {
		c.events[typ] += n
	}
	c.counted = last
	for typ, n := range c.events {
		ch <- prometheus.MustNewConstMetric(c.eventsTotal, prometheus.CounterValue, float64(n), typ)
	}
}
