package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// GET /metrics on the HTTP listener, behind the token, in the Prometheus
// text format: scraped and parsed with Prometheus' own parser, the values
// match the runs, steps, usage and events the daemon recorded.
func TestMetrics(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback TCP")
	}
	addr := l.Addr().String()
	l.Close()
	e := newEnv(t)
	e.startDaemon("--http", addr)
	e.config("agent=command", e.fakeAgent("FAKE_DONE_AT=2", "FAKE_INPUT=1000", "FAKE_OUTPUT=200", "FAKE_COST=0.25"), verifyDone)
	id := e.start("goal")
	if code := e.wait(id); code != 0 {
		t.Fatalf("wait exit %d", code)
	}
	steps := e.steps(id)
	tok, err := os.ReadFile(filepath.Join(e.home, "http.token"))
	if err != nil {
		t.Fatal(err)
	}
	scrape := func(auth string) *http.Response {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := scrape(""); resp.StatusCode != http.StatusForbidden {
		resp.Body.Close()
		t.Fatalf("/metrics without the token: %d, want 403", resp.StatusCode)
	}
	resp := scrape("Bearer " + strings.TrimSpace(string(tok)))
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	value := func(name string, labels map[string]string) (float64, bool) {
		f := fams[name]
		if f == nil {
			return 0, false
		}
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				switch {
				case m.Gauge != nil:
					return m.Gauge.GetValue(), true
				case m.Counter != nil:
					return m.Counter.GetValue(), true
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount()), true
				}
			}
		}
		return 0, false
	}
	impl, verify := 0, 0
	for _, s := range steps {
		switch s.Phase {
		case "implementation":
			impl++
		case "verification":
			verify++
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"loopd_runs", map[string]string{"status": "COMPLETED"}, 1},
		{"loopd_runs", map[string]string{"status": "RUNNING"}, 0},
		{"loopd_steps", map[string]string{"phase": "implementation", "status": "SUCCEEDED"}, float64(impl)},
		{"loopd_steps", map[string]string{"phase": "verification", "status": "FAILED"}, 1},
		{"loopd_steps", map[string]string{"phase": "verification", "status": "SUCCEEDED"}, 1},
		{"loopd_step_duration_seconds", map[string]string{"phase": "implementation", "status": "SUCCEEDED"}, float64(impl)},
		{"loopd_tokens_total", map[string]string{"phase": "implementation", "kind": "input"}, float64(1000 * impl)},
		{"loopd_tokens_total", map[string]string{"phase": "implementation", "kind": "output"}, float64(200 * impl)},
		{"loopd_events_total", map[string]string{"type": "RUN_COMPLETED"}, 1},
		{"loopd_events_total", map[string]string{"type": "STEP_FINISHED"}, float64(len(steps))},
		{"loopd_waiting_seconds", nil, 0},
		// Every step after the run's first followed a step in this daemon.
		{"loopd_step_gap_seconds", nil, float64(len(steps) - 1)},
		// Each of them was started while the step before it ran (a failed
		// verification is followed by the next implementation, as
		// predicted); the one started after the last step was discarded.
		{"loopd_steps_started_ahead_total", map[string]string{"result": "used"}, float64(len(steps) - 1)},
		{"loopd_steps_started_ahead_total", map[string]string{"result": "discarded"}, 1},
	} {
		got, ok := value(c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if f := fams["loopd_step_duration_seconds"]; f == nil || f.GetType() != dto.MetricType_HISTOGRAM || len(f.GetMetric()[0].GetHistogram().GetBucket()) == 0 {
		t.Errorf("loopd_step_duration_seconds is not a histogram with buckets: %v", f)
	}
	// Sub-second buckets: the fake agent's steps take milliseconds, and
	// every one of them is counted below 1 s, in buckets from 10 ms.
	if f := fams["loopd_step_duration_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			var below []float64
			var underOne uint64
			for _, b := range h.GetBucket() {
				if b.GetUpperBound() < 1 {
					below = append(below, b.GetUpperBound())
				}
				if b.GetUpperBound() == 1 {
					underOne = b.GetCumulativeCount()
				}
			}
			if len(below) == 0 || below[0] > 0.01 {
				t.Errorf("loopd_step_duration_seconds%v has no sub-second buckets from 10 ms: %v", m.GetLabel(), below)
			}
			if underOne > h.GetSampleCount() {
				t.Errorf("loopd_step_duration_seconds%v: %d under 1 s of %d", m.GetLabel(), underOne, h.GetSampleCount())
			}
		}
	}
	// Which loopd this is: its version, commit and Go version, always 1.
	if f := fams["loopd_build_info"]; f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("loopd_build_info = %v, want one series of value 1", f)
	} else {
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		var d api.DaemonInfo
		if err := json.Unmarshal([]byte(e.must("daemon", "status", "--json")), &d); err != nil {
			t.Fatal(err)
		}
		if _, ok := labels["commit"]; !ok || labels["version"] != d.Version || !strings.HasPrefix(labels["goversion"], "go1.") {
			t.Errorf("loopd_build_info labels %v, want version %q, a commit label and goversion", labels, d.Version)
		}
	}
	if cost, ok := value("loopd_cost_usd_total", map[string]string{"phase": "implementation"}); !ok || cost <= 0 {
		t.Errorf("loopd_cost_usd_total = %v", cost)
	}
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}
