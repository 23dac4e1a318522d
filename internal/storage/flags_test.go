package storage

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
)

// FlagsVersion changes with every commit that changes a run's Flags, and
// not with the writes of a step, which are most commits.
func TestFlagsVersionChangesWithTheFlags(t *testing.T) {
	s, _ := openTest(t, sqliteDialect)
	version := func() uint64 {
		t.Helper()
		v, covered := s.FlagsVersion()
		if !covered {
			t.Fatal("SQLite's flags version does not cover every writer")
		}
		return v
	}
	write := func(what string, changes bool, fn func(tx *Tx) error) {
		t.Helper()
		before := version()
		if err := s.Write(t.Context(), fn); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := version() != before; got != changes {
			t.Errorf("%s: the flags version changed: %v, want %v", what, got, changes)
		}
	}
	before := version()
	newRun(t, s, "r1")
	if version() == before {
		t.Error("a new run did not change the flags version")
	}
	write("to RUNNING", true, func(tx *Tx) error {
		return tx.TransitionRun(Transition{RunID: "r1", From: []api.RunStatus{api.RunPending}, To: api.RunRunning})
	})
	write("a step", false, func(tx *Tx) error {
		return tx.InsertStep(&Step{RunID: "r1", Seq: 1, Iteration: 1, Phase: api.PhaseImplementation, Status: api.StepRunning, LogPath: "/l"}, nil)
	})
	write("stop request", true, func(tx *Tx) error { return tx.SetStopRequest("r1", StopGraceful) })
	write("pause request", true, func(tx *Tx) error { return tx.SetPauseRequest("r1", true) })
	write("user signal", true, func(tx *Tx) error { return tx.SetUserSignal("r1") })
	write("user signal cleared", true, func(tx *Tx) error { return tx.ClearUserSignal("r1") })
	f, err := s.RunFlags(t.Context(), "r1")
	if err != nil || f.StopRequest != StopGraceful || !f.PauseRequest || f.UserSignal || f.Status != api.RunRunning {
		t.Errorf("flags %+v, %v", f, err)
	}
}

// Every statement of this package that writes a run's Flags columns is in
// a function that marks its transaction (Tx.flags), so that FlagsVersion
// moves: a runner that trusts it would otherwise miss a stop or a pause.
// Only PostgreSQL's claim (leases.go) is exempt: FlagsVersion does not
// cover PostgreSQL.
func TestEveryWriteOfTheFlagsMovesTheVersion(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	exempt := map[string]bool{"ClaimRuns": true}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			writesRuns, touchesFlags, marks := false, false, false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit:
					if n.Kind != token.STRING {
						break
					}
					s, _ := strconv.Unquote(n.Value)
					if strings.Contains(s, "UPDATE runs") || strings.Contains(s, "INSERT INTO runs") || strings.Contains(s, "DELETE FROM runs") {
						writesRuns = true
					}
					// What a statement sets comes before its WHERE (a
					// fragment of a SET list has none).
					set, _, _ := strings.Cut(s, "WHERE")
					for _, col := range []string{"status", "stop_request", "pause_request", "user_signal", "INSERT INTO runs", "DELETE FROM runs"} {
						if strings.Contains(set, col) {
							touchesFlags = true
						}
					}
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "updateLive" {
						// updateLive sets one of the flags, and marks the
						// transaction itself.
						writesRuns, touchesFlags, marks = true, true, true
					}
				case *ast.AssignStmt:
					if sel, ok := n.Lhs[0].(*ast.SelectorExpr); ok && sel.Sel.Name == "flags" {
						if id, ok := n.Rhs[0].(*ast.Ident); ok && id.Name == "true" {
							marks = true
						}
					}
				}
				return true
			})
			if !writesRuns || !touchesFlags || exempt[fn.Name.Name] {
				continue
			}
			checked++
			if !marks {
				t.Errorf("%s: %s writes a run's flags without setting tx.flags", fset.Position(fn.Pos()), fn.Name.Name)
			}
		}
	}
	if checked < 6 {
		t.Errorf("only %d functions that write a run's flags found: the check no longer sees them", checked)
	}
}
