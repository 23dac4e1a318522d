package dashboard

import (
	"cmp"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
)

// A backlog run's page is its tasks rather than an iteration ledger: the
// backlog itself runs no agent, its task runs do, each with its own page.
// The tasks come in dependency order (every task after the tasks it
// depends on), which is the order they can land in; the runs page shows
// the task runs under their backlog's row.

// kindBacklog is api.Run's Kind for a backlog run.
const kindBacklog = "backlog"

// taskStates are the task states in the order the page counts them.
var taskStates = []string{"running", "waiting", "landing", "ready", "pending", "done", "blocked", "skipped"}

// taskRow is one line of a backlog's task table.
type taskRow struct {
	api.Task
	// Depth is how many tasks stand before it on its longest dependency
	// chain: the page indents by it, so a chain reads as one.
	Depth int
	// Retry says the page offers `loopctl tasks --retry` for it: it is
	// blocked (only a blocked task can be retried).
	Retry bool
}

// stateCount is how many of a backlog's tasks are in one state.
type stateCount struct {
	State string
	N     int
}

// backlogPage is the data of a backlog run's page.
type backlogPage struct {
	CSRF    string
	Seq     int64 // the event seq the page was read at: its stream starts after it
	Run     api.Run
	Row     runRow
	Offer   offer
	Backlog api.BacklogTasks
	Tasks   []taskRow // in dependency order
	Counts  []stateCount
	// TaskRuns are the backlog's task runs by id (retried ones too): the
	// page's stream re-renders when one of them changes.
	TaskRuns map[string]bool
}

// backlogPage reads a backlog run's page: the run and its tasks.
func (s *Server) backlogPage(r *http.Request, run api.Run, seq int64) (backlogPage, error) {
	bt, err := s.src.Tasks(r.Context(), run.ID)
	if err != nil {
		return backlogPage{}, err
	}
	group, err := s.src.TaskRuns(r.Context(), run.ID)
	if err != nil {
		return backlogPage{}, err
	}
	kids := make([]api.Run, len(group.Runs))
	for i, k := range group.Runs {
		kids[i] = k.Run
	}
	page := backlogPage{CSRF: s.auth.CSRFToken(r), Seq: seq, Run: run, Row: newRunRow(run), Offer: offerFor(run),
		Backlog: bt, Tasks: dependencyOrder(bt.Tasks), TaskRuns: map[string]bool{}}
	withTaskUsage(&page.Row, kids)
	for _, k := range kids {
		page.TaskRuns[k.ID] = true
	}
	n := map[string]int{}
	for _, t := range bt.Tasks {
		n[t.State]++
	}
	for _, st := range taskStates {
		if n[st] > 0 {
			page.Counts = append(page.Counts, stateCount{st, n[st]})
		}
	}
	return page, nil
}

// dependencyOrder lists tasks so that each comes after every task it
// depends on, otherwise as the backlog starts them: priority first (1
// before 2; none given last), then list order. A dependency that is not
// in the list, or a cycle (both refused when the backlog starts), cannot
// hide a task: what is left is listed at the end in list order.
func dependencyOrder(tasks []api.Task) []taskRow {
	byID := make(map[string]int, len(tasks))
	for i, t := range tasks {
		byID[t.ID] = i
	}
	waiting := make([]int, len(tasks)) // unplaced dependencies
	dependents := make([][]int, len(tasks))
	for i, t := range tasks {
		for _, d := range t.DependsOn {
			if j, ok := byID[d]; ok && j != i {
				waiting[i]++
				dependents[j] = append(dependents[j], i)
			}
		}
	}
	before := func(a, b int) int {
		pa, pb := tasks[a].Priority, tasks[b].Priority
		if (pa == 0) != (pb == 0) {
			if pa == 0 {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(pa, pb), cmp.Compare(tasks[a].Position, tasks[b].Position), cmp.Compare(a, b))
	}
	var free []int
	for i := range tasks {
		if waiting[i] == 0 {
			free = append(free, i)
		}
	}
	depth := make([]int, len(tasks))
	placed := make([]bool, len(tasks))
	out := make([]taskRow, 0, len(tasks))
	for len(free) > 0 {
		slices.SortFunc(free, before)
		i := free[0]
		free = free[1:]
		placed[i] = true
		out = append(out, taskRow{Task: tasks[i], Depth: depth[i], Retry: tasks[i].State == "blocked"})
		for _, j := range dependents[i] {
			depth[j] = max(depth[j], depth[i]+1)
			if waiting[j]--; waiting[j] == 0 {
				free = append(free, j)
			}
		}
	}
	for i, t := range tasks {
		if !placed[i] {
			out = append(out, taskRow{Task: t, Retry: t.State == "blocked"})
		}
	}
	return out
}

// depList names a task's dependencies, each quoted as the page quotes
// every id a task list gave (termtext.Quote).
func depList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = termtext.Quote(id)
	}
	return strings.Join(q, ", ")
}

// withTaskUsage gives a backlog's row the usage of its task runs: the
// run's own view counts only its own steps, and a backlog runs none (its
// budgets count every task run's, retried ones included). A view that
// already carries usage is left as it is, so nothing is counted twice.
func withTaskUsage(row *runRow, kids []api.Run) {
	own := row.Usage
	if own.InputTokens != 0 || own.OutputTokens != 0 || own.CostUSD != 0 {
		return
	}
	var u api.Usage
	for _, k := range kids {
		u.InputTokens += k.Usage.InputTokens
		u.OutputTokens += k.Usage.OutputTokens
		u.CacheReadTokens += k.Usage.CacheReadTokens
		u.CacheWriteTokens += k.Usage.CacheWriteTokens
		u.ReasoningTokens += k.Usage.ReasoningTokens
		u.CostUSD += k.Usage.CostUSD
		u.CostUnknown = u.CostUnknown || k.Usage.CostUnknown
	}
	row.Usage = u
}

// backlogUpdate is a backlog page's live update: its summary, its task
// table and the controls its state offers.
type backlogUpdate struct {
	Status  api.RunStatus `json:"status"`
	Summary string        `json:"summary"`
	Tasks   string        `json:"tasks"`
	Offer   []string      `json:"offer"`
	Note    string        `json:"offer_note"`
}

// streamBacklog feeds a backlog's page: on every commit that concerns the
// backlog or one of its task runs (a step, a wait, a status), the summary
// and the task table are re-rendered. A new task run is announced by the
// backlog's own TASK_STARTED event, so the set of task runs to watch is
// read again with each update.
func (s *Server) streamBacklog(w http.ResponseWriter, r *http.Request, run api.Run, after int64) {
	ctx := r.Context()
	watch := map[string]bool{run.ID: true}
	if page, err := s.backlogPage(r, run, after); err == nil {
		maps.Copy(watch, page.TaskRuns)
	}
	st := startStream(w)
	defer s.bye(st)
	s.follow(ctx, st, after, func(ids []string, seq int64) error {
		if !slices.ContainsFunc(ids, func(id string) bool { return watch[id] }) {
			return nil
		}
		cur, err := s.src.Run(ctx, run.ID)
		if err != nil {
			return err
		}
		page, err := s.backlogPage(r, cur, seq)
		if err != nil {
			return err
		}
		maps.Copy(watch, page.TaskRuns)
		u := backlogUpdate{Status: cur.Status, Offer: page.Offer.Names(), Note: page.Offer.Note}
		if u.Summary, err = s.fragment("backlog-summary", page); err != nil {
			return err
		}
		if u.Tasks, err = s.fragment("tasks", page); err != nil {
			return err
		}
		return st.send("backlog", seq, u)
	})
}
