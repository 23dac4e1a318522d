package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A graceful shutdown (SIGTERM) while a land tests the combination cuts the
// request: loopctl exits 69 (daemon unavailable: run it again), as after a
// crash, never 70 with the daemon's "context canceled".
func TestLandCutByAGracefulShutdownExits69(t *testing.T) {
	e := newEnv(t)
	e.startDaemon()
	checkLog := e.landRepo()
	holdLand := filepath.Join(e.home, "hold-land")
	e.writeFile(".env", "CHECK_LOG="+checkLog+"\nHOLD_LAND="+holdLand+"\n", 0o600)
	run := e.finishedRun()
	e.commitOnMain(map[string]string{"user.txt": "user\n"})
	if err := os.WriteFile(holdLand, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	land, out := e.landHeld(run.ID, holdLand, "the land's verification to hold")
	e.stopDaemon()
	err := land.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 69 {
		t.Fatalf("loopctl land when the daemon shut down: %v, want exit 69\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "internal error") || !strings.Contains(out.String(), "run `loopctl land "+run.ID+"` again") {
		t.Errorf("loopctl land does not say to run it again:\n%s", out.String())
	}
	os.Remove(holdLand)
	e.startDaemon()
	if res, ref, code := e.landJSON(run.ID); code != 0 || !res.Verified {
		t.Fatalf("land after the restart: exit %d, %+v, refusal %+v", code, res, ref)
	}
}
