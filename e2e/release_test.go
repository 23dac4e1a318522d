package e2e

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scripts/release builds static binaries that carry their version, with
// SHA-256 sums that check. (One architecture, the host's, to keep the test
// short; the script builds amd64 and arm64 by default.)
func TestReleaseScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds release binaries")
	}
	if runtime.GOOS != "linux" {
		t.Skip("release binaries are for linux")
	}
	repo := repoRoot()
	gitOut := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	commit := gitOut("rev-parse", "HEAD")[:12]
	date := gitOut("log", "-1", "--format=%ct")
	dist := t.TempDir()
	cmd := exec.Command(filepath.Join(repo, "scripts", "release"), "v1.2.3-test")
	cmd.Env = append(os.Environ(), "DIST="+dist, "ARCHS="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, out)
	}
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	for _, name := range []string{"loopd", "loopctl"} {
		bin := filepath.Join(dist, name+"-v1.2.3-test-linux-"+runtime.GOARCH)
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is dynamically linked", name)
			}
		}
		if f.Machine != machine {
			t.Errorf("%s is for %v", name, f.Machine)
		}
		f.Close()
		// The version, the commit and the commit's date.
		out, err := exec.Command(bin, "--version").CombinedOutput()
		when, _ := strconv.ParseInt(date, 10, 64)
		want := name + " v1.2.3-test (commit " + commit
		if err != nil || !strings.HasPrefix(string(out), want) || !strings.HasSuffix(strings.TrimSpace(string(out)), ", "+time.Unix(when, 0).UTC().Format(time.RFC3339)+")") {
			t.Errorf("%s --version = %q, %v; want %s…, %s)", name, out, err, want, time.Unix(when, 0).UTC().Format(time.RFC3339))
		}
	}
	check := exec.Command("sha256sum", "-c", "SHA256SUMS")
	check.Dir = dist
	if out, err := check.CombinedOutput(); err != nil || strings.Count(string(out), ": OK") != 2 {
		t.Errorf("sha256sum -c: %v\n%s", err, out)
	}
	bad := exec.Command(filepath.Join(repo, "scripts", "release"), "v1; rm -rf /")
	bad.Env = append(os.Environ(), "DIST="+t.TempDir())
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "may hold only") {
		t.Errorf("a version with shell characters was accepted: %v %s", err, out)
	}
}
