package config

import (
	"os"
	"reflect"
	"testing"
	"time"
)

// TestExampleConfig keeps testdata/example.config, the example of a
// workspace's .loop/config, valid.
func TestExampleConfig(t *testing.T) {
	example, err := os.ReadFile("testdata/example.config")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkspace(t, map[string]string{"PROMPT.md": "goal", ".loop/config": string(example)})
	c, err := w.load()
	if err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	if want := []string{`test -z "$(gofmt -l .)"`, "go vet ./...", "go test -race ./..."}; !reflect.DeepEqual(c.VerifyCommands, want) {
		t.Errorf("verify_command = %q, want %q", c.VerifyCommands, want)
	}
	if c.MaxCost != 25 || c.MaxDuration != Duration(4*time.Hour) || c.HasGate(GateReview) {
		t.Errorf("example read as %+v", c)
	}
}
