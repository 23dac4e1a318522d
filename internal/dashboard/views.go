package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
	"github.com/loopd/loopd/internal/usagefmt"
)

// PageSize is how many iterations one page of the ledger shows: a run of
// 10,000 iterations is read and rendered a page at a time.
const PageSize = 25

// runRow is one line of the runs page.
type runRow struct {
	api.Run
	IterLimit int     // max_iterations, 0 when unlimited
	CostLimit float64 // max_cost in USD, 0 when unlimited
	// A backlog's row heads a group: its task runs (oldest first), shown
	// indented under it, and Tally, how many there are in each status. Open says
	// the group starts unfolded: a backlog that has not ended shows what
	// its tasks are doing, an ended one folds them away (the browser
	// remembers what the user chose instead).
	TaskRuns []runRow
	Tally    string
	Open     bool
	// Tasks and Done count a backlog's tasks, shown where a run shows its
	// iterations (a backlog runs none of its own).
	Tasks, Done int
	// Title is a task run's task's title, shown for its goal (the task
	// prompt, which begins with the backlog's goal); Hidden renders its
	// row folded (its backlog's Open).
	Title  string
	Hidden bool
}

func newRunRow(r api.Run) runRow {
	row := runRow{Run: r}
	for _, c := range r.Conditions {
		switch c.Type {
		case "max_iterations":
			var spec struct {
				Count int `json:"count"`
			}
			if json.Unmarshal(c.Spec, &spec) == nil && (row.IterLimit == 0 || spec.Count < row.IterLimit) {
				row.IterLimit = spec.Count
			}
		case "max_cost":
			var spec struct {
				Dollars float64 `json:"dollars"`
			}
			if json.Unmarshal(c.Spec, &spec) == nil && (row.CostLimit == 0 || spec.Dollars < row.CostLimit) {
				row.CostLimit = spec.Dollars
			}
		}
	}
	return row
}

// runsPage is the data of the runs page.
type runsPage struct {
	CSRF       string
	Seq        int64 // the event seq the page was read at: its stream starts after it
	Rows       []runRow
	Status     string
	Workspace  string
	Statuses   []api.RunStatus
	Workspaces []string
	Query      string // the filter as a query string, for the live stream
}

var allStatuses = []api.RunStatus{api.RunPending, api.RunRunning, api.RunPaused, api.RunWaiting,
	api.RunCompleted, api.RunFailed, api.RunAborted, api.RunInterrupted}

// runsFilter reads the runs page's filter from its query, refusing an
// unknown status as the API does.
func runsFilter(r *http.Request) (RunFilter, error) {
	q := r.URL.Query()
	f := RunFilter{Status: api.RunStatus(q.Get("status")), Workspace: q.Get("workspace"), Limit: 100}
	if f.Status != "" && !f.Status.Valid() {
		return f, fmt.Errorf("unknown status %q: use PENDING, RUNNING, PAUSED, WAITING, COMPLETED, FAILED, ABORTED or INTERRUPTED", f.Status)
	}
	return f, nil
}

// matches reports whether a run belongs on a runs page with filter f.
func (f RunFilter) matches(r api.Run) bool {
	return (f.Status == "" || r.Status == f.Status) && (f.Workspace == "" || r.Workspace == f.Workspace)
}

// backlogRow is a backlog's row with its group: its task runs under it.
func (s *Server) backlogRow(ctx context.Context, run api.Run) (runRow, error) {
	row := newRunRow(run)
	group, err := s.src.TaskRuns(ctx, run.ID)
	if err != nil {
		return row, err
	}
	row.Open = !run.Status.Terminal()
	row.Tasks, row.Done = group.Tasks, group.Done
	n := map[api.RunStatus]int{}
	runs := make([]api.Run, 0, len(group.Runs))
	for _, k := range group.Runs {
		kid := newRunRow(k.Run)
		kid.Title, kid.Hidden = k.Title, !row.Open
		row.TaskRuns = append(row.TaskRuns, kid)
		runs = append(runs, k.Run)
		n[k.Status]++
	}
	withTaskUsage(&row, runs)
	var parts []string
	for _, st := range allStatuses {
		if n[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[st], strings.ToLower(string(st))))
		}
	}
	row.Tally = fmt.Sprintf("%d task run%s", len(runs), plural(len(runs)))
	if len(parts) > 0 {
		row.Tally += ": " + strings.Join(parts, " · ")
	}
	return row, nil
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	f, err := runsFilter(r)
	if err != nil {
		s.refusePage(w, http.StatusBadRequest, err)
		return
	}
	seq := s.src.Seq() // before reading: what commits after is streamed
	// The workspace filter is applied here rather than in the query, so
	// its menu can offer every workspace of the listed runs. Task runs are
	// listed under their backlog's row, not on their own: the filter picks
	// backlogs by the backlog's own status, and a backlog's group shows
	// all of its task runs.
	runs, err := s.src.Runs(r.Context(), RunFilter{Status: f.Status, Limit: f.Limit, TopLevel: true})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := runsPage{CSRF: s.auth.CSRFToken(r), Seq: seq, Status: string(f.Status), Workspace: f.Workspace,
		Statuses: allStatuses, Query: r.URL.RawQuery}
	for _, run := range runs {
		if !slices.Contains(page.Workspaces, run.Workspace) {
			page.Workspaces = append(page.Workspaces, run.Workspace)
		}
		if !f.matches(run) {
			continue
		}
		row := newRunRow(run)
		if run.Kind == kindBacklog {
			if row, err = s.backlogRow(r.Context(), run); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		page.Rows = append(page.Rows, row)
	}
	if f.Workspace != "" && !slices.Contains(page.Workspaces, f.Workspace) {
		page.Workspaces = append(page.Workspaces, f.Workspace)
	}
	slices.Sort(page.Workspaces)
	s.render(w, r, http.StatusOK, "runs.html", page)
}

// iteration is one entry of the ledger: the steps of one iteration.
type iteration struct {
	N            int
	Setup        bool // the setup phase, before iteration 1
	Baseline     bool // the baseline phase (verify_baseline), before iteration 1
	Steps        []Step
	Impl         *Step // the last implementation step
	Review       *Step
	Verify       *Step // the last verification step
	InputTokens  int64
	OutputTokens int64
	CacheTokens  int64
	CostUSD      float64
	CostUnknown  bool
}

// runPage is the data of a run's page.
type runPage struct {
	CSRF   string
	Seq    int64 // the event seq the page was read at: its stream starts after it
	Run    api.Run
	Row    runRow
	Ledger ledger
	Charts charts
	Offer  offer
}

type ledger struct {
	RunID      string
	Iterations []iteration // newest first
	Page       int         // 1 = the newest iterations
	Pages      int
	Total      int // iterations recorded
}

func (l ledger) Prev() int { return l.Page - 1 }
func (l ledger) Next() int { return l.Page + 1 }

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	page := 1
	if p := r.URL.Query().Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			s.refusePage(w, http.StatusBadRequest, fmt.Errorf("page must be a number ≥ 1, got %q", p))
			return
		}
		page = n
	}
	seq := s.src.Seq() // before reading: what commits after is streamed
	run, err := s.src.Run(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if run.Kind == kindBacklog {
		data, err := s.backlogPage(r, run, seq)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, "backlog.html", data)
		return
	}
	data, err := s.runPageOf(r, run, seq, page)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "run.html", data)
}

// runPage reads everything a run's page shows: the run, one page of its
// ledger (steps with their final messages, only for that page) and the
// charts (from every step, without final messages).
func (s *Server) runPage(r *http.Request, ref string, page int) (runPage, error) {
	seq := s.src.Seq() // before reading: what commits after is streamed
	run, err := s.src.Run(r.Context(), ref)
	if err != nil {
		return runPage{}, err
	}
	return s.runPageOf(r, run, seq, page)
}

// runPageOf is runPage of a run already read, at event seq seq.
func (s *Server) runPageOf(r *http.Request, run api.Run, seq int64, page int) (runPage, error) {
	light, err := s.src.Steps(r.Context(), run.ID)
	if err != nil {
		return runPage{}, err
	}
	out := runPage{CSRF: s.auth.CSRFToken(r), Seq: seq, Run: run, Row: newRunRow(run), Charts: buildCharts(light),
		Offer: offerFor(run)}
	out.Ledger, err = s.ledgerPage(r, run.ID, light, page)
	return out, err
}

// ledgerPage groups one page of iterations, newest first.
func (s *Server) ledgerPage(r *http.Request, runID string, light []api.Step, page int) (ledger, error) {
	// The run's iterations in order (setup's 0 first). Steps come by seq,
	// so an iteration's steps are mostly together; the set keeps a re-run
	// (an interrupted step's phase again) from counting twice.
	var its []int
	seen := make(map[int]bool)
	for _, st := range light {
		if !seen[st.Iteration] {
			seen[st.Iteration] = true
			its = append(its, st.Iteration)
		}
	}
	slices.Sort(its)
	l := ledger{RunID: runID, Page: page, Total: len(its), Pages: max(1, (len(its)+PageSize-1)/PageSize)}
	if len(its) == 0 {
		return l, nil
	}
	// Page 1 is the newest PageSize iterations.
	hi := len(its) - (page-1)*PageSize
	if hi <= 0 {
		return l, nil
	}
	lo := max(0, hi-PageSize)
	want := its[lo:hi]
	fromSeq, toSeq := 0, 0
	for _, st := range light {
		if st.Iteration >= want[0] && st.Iteration <= want[len(want)-1] {
			if fromSeq == 0 || st.Seq < fromSeq {
				fromSeq = st.Seq
			}
			toSeq = max(toSeq, st.Seq)
		}
	}
	steps, err := s.src.StepsBetween(r.Context(), runID, fromSeq, toSeq)
	if err != nil {
		return l, err
	}
	byIt := map[int]*iteration{}
	for i := range steps {
		st := &steps[i]
		it := byIt[st.Iteration]
		if it == nil {
			it = &iteration{N: st.Iteration}
			byIt[st.Iteration] = it
		}
		// Iteration 0 holds what runs before iteration 1: the setup, the
		// baseline, or both.
		it.Setup = it.Setup || st.Phase == api.PhaseSetup
		it.Baseline = it.Baseline || st.Phase == api.PhaseBaseline
		it.Steps = append(it.Steps, *st)
	}
	for n := want[len(want)-1]; n >= want[0]; n-- {
		it := byIt[n]
		if it == nil {
			continue
		}
		for i := range it.Steps {
			st := &it.Steps[i]
			switch st.Phase {
			case api.PhaseImplementation:
				it.Impl = st
			case api.PhaseReview:
				it.Review = st
			case api.PhaseVerification, api.PhaseBaseline:
				// The baseline's tests read like a verification's: they are
				// the pre-existing failures the later ones are judged by.
				it.Verify = st
			}
			it.InputTokens += st.Usage.InputTokens
			it.OutputTokens += st.Usage.OutputTokens
			it.CacheTokens += st.Usage.CacheReadTokens + st.Usage.CacheWriteTokens
			it.CostUSD += st.Usage.CostUSD
			it.CostUnknown = it.CostUnknown || st.Usage.CostUnknown
		}
		l.Iterations = append(l.Iterations, *it)
	}
	return l, nil
}

// fail answers a page request whose data could not be read: an API error
// (a run that does not exist, an ambiguous prefix) with its own status and
// words, anything else as a 500 page.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *api.Error
	status := http.StatusInternalServerError
	switch {
	case errors.As(err, &ae):
		status = ae.Code.HTTPStatus()
	default:
		s.log.Error("dashboard page", zap.String("path", r.URL.Path), zap.Error(err))
	}
	s.refusePage(w, status, err)
}

// funcs are the templates' helpers.
func (s *Server) funcs() template.FuncMap {
	return template.FuncMap{
		"short": func(id string) string {
			if len(id) > 8 {
				return id[:8]
			}
			return id
		},
		"base": filepath.Base,
		// Costs and tokens read as loopctl prints them.
		"usd":        usagefmt.USD,
		"cost":       usagefmt.Cost,
		"tokens":     usagefmt.Tokens,
		"breakAfter": breakAfter,
		"head":       func(names []string, n int) []string { return names[:min(n, len(names))] },
		"rest":       func(names []string, n int) []string { return names[min(n, len(names)):] },
		// ignored: a failing test that was already failing in the
		// baseline (verify_baseline), so the verify gate ignores it.
		"ignored": func(t *api.Tests, name string) bool { return t != nil && slices.Contains(t.IgnoredNames, name) },
		"unnamed": func(t *api.Tests) int {
			if t == nil || t.Failed == nil {
				return 0
			}
			return max(0, *t.Failed-len(t.FailedNames))
		},
		"elapsed": func(ms int64) string { return humanDuration(time.Duration(ms) * time.Millisecond) },
		"lower":   func(s api.RunStatus) string { return strings.ToLower(string(s)) },
		"slower":  func(s api.StepStatus) string { return strings.ToLower(string(s)) },
		"live":    func(s api.RunStatus) bool { return s == api.RunRunning },
		"when": func(t api.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"iso": func(t api.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format(time.RFC3339)
		},
		"progress": func(p *float64) string {
			if p == nil {
				return ""
			}
			return strconv.FormatFloat(min(max(*p, 0), 1), 'f', 3, 64)
		},
		"pct": func(p *float64) string {
			if p == nil {
				return "—"
			}
			return fmt.Sprintf("%.0f%%", min(max(*p, 0), 1)*100)
		},
		"count": func(p *int) string {
			if p == nil {
				return "?"
			}
			return strconv.Itoa(*p)
		},
		"tail": func(s string, n int) string {
			if len(s) <= n {
				return s
			}
			cut := len(s) - n
			for cut < len(s) && s[cut]&0xC0 == 0x80 { // never split a character
				cut++
			}
			return "…" + s[cut:]
		},
		"trunc": func(s string, n int) string {
			if len(s) <= n {
				return s
			}
			cut := n
			for cut > 0 && s[cut]&0xC0 == 0x80 {
				cut--
			}
			return s[:cut] + "…"
		},
		"firstLine": func(s string) string {
			line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
			return line
		},
		"query": func(runID string, page int) string { return "/runs/" + runID + "?page=" + strconv.Itoa(page) },
		// Text a task list gave (ids, titles, descriptions, why a task is
		// blocked): control characters and bidi overrides shown as escapes,
		// as loopctl shows them, so a title cannot pass for another.
		"q":       termtext.Quote,
		"qlines":  termtext.QuoteLines,
		"depList": depList,
		"commit":  shortCommit,
		// pathEscape is a task id as one segment of an API path: the page
		// holds none of the id's own bytes, and the script sends it as is.
		"pathEscape": url.PathEscape,
		"plural":     plural,
		"min":        func(a, b int) int { return min(a, b) },
	}
}

// humanDuration prints 3s, 4m05s, 2h07m, 3d04h.
func humanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// breakAfter escapes s and lets the browser break its line after any of
// seps (a <wbr> after each), and nowhere else but at spaces: a reason such
// as max_consecutive_failures:verification:3 wraps at its colons, a test
// name at its :: or /, a path at its slashes — never in the middle of a
// word, which reads as two different words. CSS breaks a piece that is
// wider than its box on its own as a last resort.
func breakAfter(s string, seps ...string) template.HTML {
	var b strings.Builder
	for s != "" {
		i, n := -1, 0
		for _, sep := range seps {
			if j := strings.Index(s, sep); j >= 0 && (i < 0 || j < i) {
				i, n = j, len(sep)
			}
		}
		if i < 0 {
			b.WriteString(template.HTMLEscapeString(s))
			break
		}
		b.WriteString(template.HTMLEscapeString(s[:i+n]))
		if i+n < len(s) {
			b.WriteString("<wbr>")
		}
		s = s[i+n:]
	}
	return template.HTML(b.String())
}
