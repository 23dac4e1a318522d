package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// readmeBlock is a ```sh block of README.md and the heading it is under.
type readmeBlock struct {
	heading string
	index   int // among the blocks under the same heading
	text    string
}

func readmeBlocks(t *testing.T, repo string) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		out     []readmeBlock
		heading string
		count   = map[string]int{}
		in      bool
		cur     strings.Builder
	)
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case in && line == "```":
			out = append(out, readmeBlock{heading: heading, index: count[heading], text: cur.String()})
			count[heading]++
			in = false
			cur.Reset()
		case in:
			cur.WriteString(line + "\n")
		case line == "```sh":
			in = true
		case strings.HasPrefix(line, "## "):
			heading = strings.TrimPrefix(line, "## ")
		}
	}
	return out
}

// Every command block of the README runs, as written, in a test: a new
// user's first commands must work. The quickstart block is the command
// TestQuickstart runs; the others run here against a fake Claude Code
// (e2e/testdata/agents/claude.sh) on PATH, in a HOME of their own, with
// loopctl starting the daemon as it does for a user.
func TestReadmeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the binaries and runs loops")
	}
	repo := repoRoot()
	blocks := readmeBlocks(t, repo)
	if len(blocks) < 4 {
		t.Fatalf("found %d sh blocks in README.md", len(blocks))
	}
	w := newReadmeWorld(t, repo)
	ran := map[string]bool{}
	for _, b := range blocks {
		key := b.heading + "#" + string(rune('0'+b.index))
		ran[key] = true
		switch key {
		case "Quickstart#0":
			// TestQuickstart runs exactly this script.
			if cmd := strings.TrimSpace(stripComments(b.text)); cmd != "./examples/quickstart/run.sh" {
				t.Errorf("the quickstart block runs %q; TestQuickstart runs ./examples/quickstart/run.sh", cmd)
			}
		case "Development#0":
			// The test command is the one CI runs.
			if cmd := strings.TrimSpace(stripComments(b.text)); cmd != "scripts/test" {
				t.Errorf("the tests block runs %q, want scripts/test", cmd)
			}
			ci, err := os.ReadFile(filepath.Join(repo, ".ci", "run"))
			if err != nil || !strings.Contains(string(ci), "exec ./scripts/test") {
				t.Errorf(".ci/run does not call scripts/test: %v\n%s", err, ci)
			}
		case "Install#0":
			out := w.run(t, repo, b.text)
			for _, bin := range []string{"loopd", "loopctl"} {
				if _, err := os.Stat(filepath.Join(w.gobin, bin)); err != nil {
					t.Fatalf("the install block installed no %s: %v\n%s", bin, err, out)
				}
			}
		case "Use#0":
			// The budget (max_cost=10) is spent in iteration 2 ($6 of
			// tokens per iteration): the run is ABORTED, which the next
			// block fixes.
			if err := os.MkdirAll(filepath.Join(w.home, "src", "myproject"), 0o755); err != nil {
				t.Fatal(err)
			}
			w.writeProject(t)
			out := w.run(t, repo, b.text)
			id := regexp.MustCompile(`(?m)^[0-9a-f]{16}$`).FindString(out)
			for _, want := range []string{"ABORTED", "max_cost:10.00", "==> #1 implementation (iteration 1) <==", "# Postmortem"} {
				if id == "" || !strings.Contains(out, want) {
					t.Errorf("the Use block's output lacks %q (run id %q):\n%s", want, id, out)
				}
			}
			w.runID = id
		case "Use#1":
			if w.runID == "" {
				t.Fatal("the steering block needs the run of the Use block")
			}
			// The user is still in ~/src/myproject, where the Use block
			// left them.
			project := filepath.Join(w.home, "src", "myproject")
			out := w.run(t, project, b.text)
			if code := w.lastCode; code != 0 {
				t.Errorf("loopctl wait exited %d after resume --set max_cost=20, want 0:\n%s", code, out)
			}
			st := w.run(t, project, "loopctl status last --json")
			if !strings.Contains(st, `"status": "COMPLETED"`) || !strings.Contains(st, w.runID) {
				t.Errorf("after the steering block the run is not COMPLETED:\n%s", st)
			}
		default:
			t.Errorf("README block %d under %q is not run by any test: add it to TestReadmeCommands\n%s", b.index, b.heading, b.text)
		}
	}
	for _, want := range []string{"Quickstart#0", "Development#0", "Install#0", "Use#0", "Use#1"} {
		if !ran[want] {
			t.Errorf("README has no block %s", want)
		}
	}
}

// readmeWorld is a user's machine in miniature: a HOME, a GOBIN and a
// fake claude on PATH.
type readmeWorld struct {
	repo, home, gobin, fake string
	env                     []string
	runID                   string
	lastCode                int
}

func newReadmeWorld(t *testing.T, repo string) *readmeWorld {
	// A short home: the default LOOPD_HOME is inside it, and Unix socket
	// paths are limited to ~108 bytes.
	home, err := os.MkdirTemp("", "rh")
	if err != nil {
		t.Fatal(err)
	}
	w := &readmeWorld{repo: repo, home: home, gobin: filepath.Join(home, "go", "bin"), fake: filepath.Join(home, "fake")}
	t.Cleanup(func() {
		for _, pid := range processesMentioning(home) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		os.RemoveAll(home)
	})
	if err := os.MkdirAll(w.fake, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(repo, "e2e", "testdata", "agents", "claude.sh")
	if err := os.Symlink(agent, filepath.Join(w.fake, "claude")); err != nil {
		t.Fatal(err)
	}
	goenv := func(k string) string {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		return strings.TrimSpace(string(out))
	}
	w.env = []string{
		"HOME=" + home,
		"PATH=" + w.gobin + ":" + w.fake + ":" + os.Getenv("PATH"),
		"GOBIN=" + w.gobin,
		// The machine's Go caches, so the user's first build is not a cold one.
		"GOCACHE=" + goenv("GOCACHE"), "GOMODCACHE=" + goenv("GOMODCACHE"), "GOPATH=" + goenv("GOPATH"),
		"GOFLAGS=" + os.Getenv("GOFLAGS"), "GOPROXY=off", "GORACE=atexit_sleep_ms=0",
		// The fake Claude Code: $6 of input per iteration, done in the third.
		"FAKE_INPUT=2000000", "FAKE_DONE_AT=3", "IS_SANDBOX=1",
	}
	return w
}

// writeProject makes ~/src/myproject a Go module whose tests pass once the
// agent has written done.txt.
func (w *readmeWorld) writeProject(t *testing.T) {
	t.Helper()
	dir := filepath.Join(w.home, "src", "myproject")
	files := map[string]string{
		"go.mod": "module example.com/myproject\n\ngo 1.26\n",
		"parser_test.go": "package myproject\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\n" +
			"func TestQuotedFields(t *testing.T) {\n\tif _, err := os.Stat(\"done.txt\"); err != nil {\n\t\tt.Fatal(\"quoted fields are not handled yet\")\n\t}\n}\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run runs a block with sh in dir (the block's own cd moves it), as a user
// would paste it; the exit status of its last command is kept.
func (w *readmeWorld) run(t *testing.T, dir, block string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", block)
	cmd.Dir, cmd.Env = dir, w.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	w.lastCode = 0
	if ee, ok := err.(*exec.ExitError); ok {
		w.lastCode = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("sh: %v", err)
	}
	return out.String()
}

func stripComments(block string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(block, "\n") {
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(strings.TrimSpace(line) + "\n")
	}
	return b.String()
}
