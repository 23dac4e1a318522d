package scheduler

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/storage"
)

// A step asked to stop that still exits 0 keeps its success only when it
// really finished: a structured agent must have reported the end of its
// turn. Captured logs of the real CLIs decide.
func TestFinishedDespiteStop(t *testing.T) {
	fixture := func(name string) string { return filepath.Join("..", "transcript", "testdata", name) }
	plain := filepath.Join(t.TempDir(), "plain.log")
	if err := os.WriteFile(plain, []byte("did the work\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		phase api.Phase
		log   string
		want  bool
	}{
		{"gemini killed in its tool (no result)", api.PhaseImplementation, fixture("gemini-0.61.0-killed-in-tool.jsonl"), false},
		{"gemini with its result", api.PhaseImplementation, fixture("gemini-0.61.0-tool-promise.jsonl"), true},
		{"plain text agent", api.PhaseImplementation, plain, true},
		{"verification", api.PhaseVerification, fixture("gemini-0.61.0-killed-in-tool.jsonl"), true},
	}
	r := &runner{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &storage.Step{Phase: tt.phase, LogPath: tt.log}
			if got := r.finishedDespiteStop(st); got != tt.want {
				t.Errorf("finishedDespiteStop = %v, want %v", got, tt.want)
			}
		})
	}
}
