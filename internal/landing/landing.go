// Package landing is what becomes of a run's work once the run has ended:
// the diff of its change ledger, the land of its branch into the branch it
// started from, and the clean of its worktree. It also owns what the
// daemon does at startup for them: the records of worktrees removed by
// hand are brought in line with git, and a land cut short by a daemon that
// died is undone or, when git had already moved the base branch, recorded.
//
// The daemon's handlers decode a request, call a Lander and encode what it
// returns; a land that does not happen is a *Refusal. Every refusal leaves
// the user's checkout as it was.
package landing

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/loopd/loopd/internal/filetail"
	"github.com/loopd/loopd/internal/storage"
)

// Options configure a Lander.
type Options struct {
	Store *storage.Store
	// Home is LOOPD_HOME: a run's land markers live in Home/runs/<id>,
	// and loopd makes its worktrees under Home/worktrees.
	Home string
	// Verifier builds the verification a land runs when the base branch
	// has moved (the scheduler: the run's verify_command in its
	// environment).
	Verifier Verifier
	Logger   *zap.Logger
	// Grace is the time between SIGTERM and SIGKILL when a land's
	// verification is stopped.
	Grace time.Duration
	// PRCommands finds the pr_command a push runs; nil: none runs.
	PRCommands PRCommander
	// PRTasks, when set, lists a backlog run's tasks for the body of its
	// pull request (nil tasks for a run that is not a backlog).
	PRTasks func(ctx context.Context, run storage.Run) ([]PRTask, error)
}

// Lander lands, diffs and cleans runs' branches and worktrees. It is safe
// for concurrent use: lands into one repository are serialised, and a
// clean leaves alone the worktree of a run being landed.
type Lander struct {
	store    *storage.Store
	home     string
	verifier Verifier
	log      *zap.Logger
	grace    time.Duration
	prs      PRCommander
	prTasks  func(ctx context.Context, run storage.Run) ([]PRTask, error)

	// locks serialises lands into one repository (common git dir ->
	// *sync.Mutex): two lands tested against the same base tip would
	// otherwise race to move it.
	locks sync.Map
	busy  sync.Map // ids of runs being landed: clean leaves their worktrees alone

	disk diskCache // the last measure of the run worktrees' disk (daemon status)
}

// New returns a Lander.
func New(opts Options) *Lander {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Lander{store: opts.Store, home: opts.Home, verifier: opts.Verifier, log: opts.Logger, grace: opts.Grace,
		prs: opts.PRCommands, prTasks: opts.PRTasks}
}

// Recover brings the records in line with what happened while no daemon
// was watching. Called at startup, before any run is recovered: records of
// worktrees removed by hand are marked gone before anything is removed; a
// land cut short mid-verification is undone (its verification stopped, its
// worktree put back on the run's branch) before a run can be resumed into
// it; a land whose base branch git moved just before the daemon died is
// recorded, and so is a push the remote took (asked of the remote).
func (l *Lander) Recover(ctx context.Context) {
	l.Reconcile(ctx, "")
	l.recoverLands(ctx)
	l.recoverLandedIntents(ctx)
	l.recoverPushIntents(ctx)
}

// Landing reports whether a land of the run is under way (its worktree
// may be checked out at the merge under test).
func (l *Lander) Landing(runID string) bool {
	_, busy := l.busy.Load(runID)
	return busy
}

// Hold keeps land and clean away from a run's worktree while something
// else works in it (resume --onto-base merging its base): false when a
// land or clean of the run is under way. release ends the hold.
func (l *Lander) Hold(runID string) (release func(), ok bool) {
	if _, busy := l.busy.LoadOrStore(runID, struct{}{}); busy {
		return nil, false
	}
	return func() { l.busy.Delete(runID) }, true
}

func (l *Lander) runDir(runID string) string { return filepath.Join(l.home, "runs", runID) }

// fileTail is the last n bytes of a file, from a line start when it can.
func fileTail(path string, n int64) string {
	b, fi, err := filetail.Read(path, n)
	if err != nil {
		return ""
	}
	s := string(b)
	if fi.Size() > n {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.ToValidUTF8(s, "")
}

func shortID(id string) string { return id[:min(len(id), 8)] }

func shortCommit(c string) string { return c[:min(len(c), 12)] }

func writeJSONFile(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
