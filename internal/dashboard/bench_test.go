package dashboard

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// benchPage renders one page with a logged-in request, as the daemon
// would, reporting its size (raw and gzipped) beside the time.
func benchPage(b *testing.B, src Source, path string) {
	s := New(Options{Source: src})
	mux := http.NewServeMux()
	s.Register(mux)
	var size, gz int
	for b.Loop() {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		size = rec.Body.Len()
		if gz == 0 {
			gz = gzipSize(rec.Body.Bytes())
		}
	}
	b.ReportMetric(float64(size), "html-bytes")
	b.ReportMetric(float64(gz), "html-gzip-bytes")
}

func gzipSize(p []byte) int {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(p)
	_ = w.Close()
	return buf.Len()
}

// BenchmarkRunPage renders a run's page: the newest page of its ledger and
// the charts over every iteration. Ten iterations are the baseline for the
// ratio of 10,000 (BENCHMARKS.md).
func BenchmarkRunPage(b *testing.B) {
	for _, n := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("iterations=%d", n), func(b *testing.B) { benchPage(b, ledgerSource(n), "/runs/big") })
	}
}

// BenchmarkRunsPage renders the runs page with 1 run (baseline) and 100.
func BenchmarkRunsPage(b *testing.B) {
	for _, n := range []int{1, 100} {
		src := newFakeSource()
		for i := range n {
			src.commit(api.Run{ID: fmt.Sprintf("run%04d", i), Status: api.RunRunning, Goal: "make the parser handle quoted fields",
				Workspace: fmt.Sprintf("/home/me/src/project%d", i%7), Iteration: 3, Reason: "", ElapsedMS: 123456,
				Usage: api.Usage{CostUSD: 1.25}})
		}
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) { benchPage(b, src, "/") })
	}
}

// BenchmarkBacklogPage renders a backlog's page with 5 tasks (baseline)
// and 200 (a chain of dependencies every tenth), each with its task run.
func BenchmarkBacklogPage(b *testing.B) {
	for _, n := range []int{5, 200} {
		src := newFakeSource()
		src.commit(api.Run{ID: "bl", Kind: kindBacklog, Status: api.RunRunning, Goal: "work through the plan", Workspace: "/w"})
		bt := api.BacklogTasks{Backlog: "bl", Status: api.RunRunning, Branch: "loop/bl", BaseBranch: "main"}
		passed := 40
		for i := range n {
			id, run := fmt.Sprintf("t%d", i+1), fmt.Sprintf("run%04d", i)
			task := api.Task{ID: id, Position: i + 1, Title: "make the parser handle quoted fields " + id, State: "done",
				Description: "The parser splits on commas inside quotes.\nKeep the errors' line numbers.", DependsOn: []string{},
				Run: run, RunStatus: api.RunCompleted, Iterations: 3, Usage: api.Usage{CostUSD: 0.42, InputTokens: 12000},
				Tests: &api.Tests{Passed: &passed, Failed: new(int)}, FilesChanged: 3, Insertions: 50, Deletions: 7,
				LandedCommit: "0123456789abcdef0123456789abcdef01234567", Verified: true}
			if i%10 != 0 {
				task.DependsOn = []string{fmt.Sprintf("t%d", i)}
			}
			bt.Tasks = append(bt.Tasks, task)
			src.commit(api.Run{ID: run, Parent: "bl", Name: id, Status: api.RunCompleted, Workspace: "/w", Usage: task.Usage})
		}
		src.tasks["bl"] = bt
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) { benchPage(b, src, "/runs/bl") })
	}
}

// TestAssetWeight reports what every page loads besides its HTML, and
// keeps it light: the budget fails the test when a change bloats it.
func TestAssetWeight(t *testing.T) {
	total, gz := 0, 0
	err := fs.WalkDir(assetFS, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assetFS.ReadFile(path)
		if err != nil {
			return err
		}
		total += len(b)
		gz += gzipSize(b)
		t.Logf("%s: %d bytes (%d gzipped)", path, len(b), gzipSize(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("assets: %d bytes (%d gzipped)", total, gz)
	if total > 40_000 {
		t.Fatalf("the dashboard's assets weigh %d bytes; the budget is 40 kB", total)
	}
}
